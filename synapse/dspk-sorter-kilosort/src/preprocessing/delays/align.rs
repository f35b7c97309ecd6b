//! Applying channel delays to windows on the device.

use std::ops::Range;

use cubecl::prelude::*;
use dspk_core::HaloWindow;
use dspk_ops::launch::cube_count;
use dspk_ops::{DeviceArray, DeviceWindow};

use super::kernel;
use crate::runner::buffers::upload;
use crate::{Error, Result};

/// Removes channel delays from windows (EMUsort's last transform of every batch,
/// `docs/KILOSORT4.md` §10.1.1): row `b` of the output is row `b` of the input read `d_b`
/// samples later, `out[b, t] = in[b, t + d_b]` (the row moved by `-d_b`), so every channel lines
/// up with the reference channel of [`ChannelDelays`](super::ChannelDelays).
///
/// The samples come from the window's own halo. EMUsort rolls each padded batch circularly;
/// with `|d_b| < nt` its own columns get the padding's samples, the same real neighbours as
/// here, except at the recording's ends, where its padding repeats the first or last sample
/// and here missing samples are zeros.
///
/// Bookkeeping: the output carries the input's [`HaloWindow`] unchanged (same read and owned
/// ranges, same array shape). Its values are those of the whole aligned recording
/// (`in[b, t + d_b]`, zero where `t + d_b` is before the recording's first sample or after its
/// last) on [`trusted_local`](Self::trusted_local): the read range shrunk by
/// [`halo`](Self::halo) samples on each side where the recording goes on past it. Outside it, a
/// sample whose source lies beyond the window's read range reads as zero. So a pass whose
/// windows carry `halo()` samples of halo more than the stages after the aligner need gives
/// owned samples, and halos those stages read, that do not depend on where windows begin.
///
/// Values are copied as they are (a NaN stays a NaN for the next stage to report).
#[derive(Debug)]
pub struct DelayAligner {
    channels: usize,
    halo: usize,
    /// `d_b + halo` per row, unsigned.
    shift: DeviceArray<u32>,
    buffer: DeviceArray<f32>,
    current: Option<DeviceWindow>,
}

impl DelayAligner {
    /// An aligner moving row `b` by `-delays[b]`, for windows of up to `max_samples` samples
    /// (halos included) per channel.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] for no channel or a delay that does not fit 31 bits; [`Error::Ops`]
    /// when the buffer exceeds the device's limits.
    pub fn new(client: &Client, delays: &[i32], max_samples: usize) -> Result<Self> {
        if delays.is_empty() {
            return Err(Error::Input {
                what: "channel delays",
                reason: "no channel to align".to_string(),
            });
        }
        let halo = delays.iter().map(|d| d.unsigned_abs()).max().unwrap_or(0);
        if halo > i32::MAX as u32 {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!("a delay of {halo} samples is out of range"),
            });
        }
        // `d + halo` lies in `0 ..= 2 * halo` (`halo = max |d|`), within u32.
        let shift: Vec<u32> = delays
            .iter()
            .map(|&d| (i64::from(d) + i64::from(halo)) as u32)
            .collect();
        Ok(Self {
            channels: delays.len(),
            halo: halo as usize,
            shift: upload(client, &shift)?,
            buffer: DeviceArray::empty(client, delays.len(), max_samples.max(1))?,
            current: None,
        })
    }

    /// The largest `|d_b|`: samples of halo the alignment consumes on each side.
    #[must_use]
    pub fn halo(&self) -> usize {
        self.halo
    }

    /// The local indices of an output for `window` that hold the whole aligned recording's
    /// values, in a recording of `num_samples` samples: the read range shrunk by
    /// [`halo`](Self::halo) on each side where the recording goes on past it (empty when the
    /// window is too short).
    #[must_use]
    pub fn trusted_local(&self, window: &HaloWindow, num_samples: u64) -> Range<usize> {
        let read = window.read();
        let n = window.read_len();
        let start = if read.start == 0 { 0 } else { self.halo.min(n) };
        let end = if read.end >= num_samples {
            n
        } else {
            n.saturating_sub(self.halo)
        };
        start..end.max(start)
    }

    /// `window` with its delays removed (see the type's doc), lent with the window's ranges
    /// until the next call.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when the window does not have the aligner's channels or does not fit
    /// 32-bit indices; [`Error::Ops`] when it is longer than `max_samples`.
    pub fn align(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow> {
        let array = window.array();
        if array.channels() != self.channels {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!(
                    "a window of {} channels, the delays are for {}",
                    array.channels(),
                    self.channels
                ),
            });
        }
        let n = array.samples();
        if n.checked_add(2 * self.halo)
            .is_none_or(|end| end > u32::MAX as usize)
        {
            return Err(Error::Input {
                what: "channel delays",
                reason: format!("a window of {n} samples does not fit 32-bit indices"),
            });
        }
        let out = self.buffer.front(self.channels, n)?;
        kernel::shift_rows::launch(
            client,
            cube_count(array.len()),
            CubeDim::new_1d(dspk_ops::launch::CUBE_DIM),
            array.arg(array.len()),
            self.shift.arg(self.channels),
            out.arg(out.len()),
            self.channels as u32,
            n as u32,
            self.halo as u32,
        );
        Ok(&*self
            .current
            .insert(DeviceWindow::new(out, window.window().clone())?))
    }
}
