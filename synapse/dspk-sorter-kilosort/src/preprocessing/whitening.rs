//! Local whitening (`docs/KILOSORT4.md` §2.3): the matrix fitted over a pass of the
//! preprocessed recording, and [`Whitener`], which applies it (or drift correction times it) to
//! every window on the device.

use std::ops::Range;

use cubecl::client::Client;
use dspk_ops::linalg::{WhiteningMatrix, local_zca};
use dspk_ops::{ChannelMixing, CovarianceAccumulator, DeviceArray, DeviceWindow, mix_channels};

use crate::runner::{DeviceWindows, SortContext, WindowTransform};
use crate::{Error, Result};

/// Eigenvalue floor of the local whitening, as Kilosort4 (`1e-6`, whitened-data units²).
pub const WHITENING_EPS: f64 = 1e-6;

/// The batches whose samples enter the whitening covariance: `0, nskip, 2 nskip, ...` below
/// `batches - 1` (Kilosort4 never uses the last batch), or batch 0 when there is only one (where
/// Kilosort4 divides by zero; we use it).
#[must_use]
pub fn whitening_batches(batches: usize, nskip: usize) -> Vec<usize> {
    if batches <= 1 {
        return vec![0; batches];
    }
    (0..batches - 1).step_by(nskip.max(1)).collect()
}

/// The local whitening matrix (`Wrot`, `whitening_range` taps per row): the uncentred covariance
/// `sum Y Y^T / n` of the preprocessed samples of [`whitening_batches`] (batches of
/// `settings.batch_size` recording samples, whatever the windows are), then for each channel
/// the ZCA of its `whitening_range` nearest channels by distance (ties: the lower channel
/// index) with eigenvalue magnitudes plus [`WHITENING_EPS`] (Kilosort4's SVD form); also each
/// channel's standard deviation, `sqrt` of the covariance's diagonal. One pass, recorded in
/// `ctx`.
///
/// # Errors
///
/// [`Error::Input`] when the covariance is not finite (NaN or infinite samples); device and
/// read errors of the pass.
pub fn fit_whitening(
    ctx: &mut SortContext,
    windows: &mut DeviceWindows,
) -> Result<(WhiteningMatrix, Vec<f32>)> {
    let (client, probe, settings) = (ctx.client().clone(), ctx.probe(), ctx.settings());
    let batch = settings.batch_size;
    let batches = windows.num_samples().div_ceil(batch) as usize;
    let selected = whitening_batches(batches, settings.nskip);
    let mut covariance = CovarianceAccumulator::new(&client, probe.len())?;
    ctx.pass(windows, "whitening fit", |window| {
        for range in selected_ranges(window, &selected, batch) {
            covariance.add(&client, window.array(), range)?;
        }
        Ok(())
    })?;
    let cov = covariance.finish(&client)?;
    if let Some(i) = cov.iter().position(|v| !v.is_finite()) {
        return Err(Error::Input {
            what: "recording",
            reason: format!(
                "the whitening covariance of channels {} and {} is {}: the recording holds NaN or infinite samples",
                i / probe.len(),
                i % probe.len(),
                cov[i]
            ),
        });
    }
    let positions: Vec<(f64, f64)> = probe
        .positions()
        .iter()
        .map(|p| (f64::from(p[0]), f64::from(p[1])))
        .collect();
    let white = local_zca(&cov, &positions, settings.whitening_range, WHITENING_EPS)?;
    let n = probe.len();
    let std = (0..n)
        .map(|c| cov[c * n + c].max(0.0).sqrt() as f32)
        .collect();
    Ok((white, std))
}

/// The local index ranges of `window`'s owned samples that fall in the `selected` batches of
/// `batch` recording samples each.
pub(crate) fn selected_ranges(
    window: &DeviceWindow,
    selected: &[usize],
    batch: u64,
) -> Vec<Range<usize>> {
    let owned = window.window().valid();
    let read_start = window.window().read().start;
    let first = owned.start / batch;
    let last = owned.end.div_ceil(batch);
    (first..last)
        .filter(|b| selected.binary_search(&(*b as usize)).is_ok())
        .filter_map(|b| {
            let start = (b * batch).max(owned.start);
            let end = ((b + 1) * batch).min(owned.end);
            (start < end).then(|| (start - read_start) as usize..(end - read_start) as usize)
        })
        .collect()
}

/// Applies a channel mixing (the whitening, or drift correction times whitening) to processed
/// windows, into a buffer of its own sized for the longest window.
pub struct Whitener {
    mixing: ChannelMixing,
    buffer: DeviceArray,
    current: Option<DeviceWindow>,
}

impl Whitener {
    /// A whitener by `mixing`, for windows of up to `max_samples`.
    ///
    /// # Errors
    ///
    /// As [`DeviceArray::empty`].
    pub fn new(client: &Client, mixing: ChannelMixing, max_samples: usize) -> Result<Self> {
        Ok(Self {
            buffer: DeviceArray::empty(client, mixing.channels(), max_samples.max(1))?,
            mixing,
            current: None,
        })
    }

    /// The sparse mixing of a local whitening matrix (its taps per row only).
    ///
    /// # Errors
    ///
    /// As [`ChannelMixing::from_sparse`].
    pub fn sparse(client: &Client, white: &WhiteningMatrix) -> Result<ChannelMixing> {
        let indices: Vec<usize> = white.indices().iter().map(|&i| i as usize).collect();
        Ok(ChannelMixing::from_sparse(
            client,
            &indices,
            white.weights(),
            white.n(),
        )?)
    }

    /// Mixes by the dense `C x C` row-major `matrix` from now on (drift correction changes it
    /// per batch): written in place into the dense mixing's buffer, allocated once.
    ///
    /// # Errors
    ///
    /// As [`ChannelMixing::set_dense`] and [`ChannelMixing::from_dense`].
    pub fn set_dense(&mut self, client: &Client, matrix: &[f64]) -> Result<()> {
        if self.mixing.is_dense() {
            self.mixing.set_dense(client, matrix)?;
        } else {
            self.mixing = ChannelMixing::from_dense(client, matrix, self.mixing.channels())?;
        }
        Ok(())
    }

    /// `matrix x window`, lent with the window's ranges (valid until the next call).
    ///
    /// # Errors
    ///
    /// As [`mix_channels`]; a window longer than the buffer.
    pub fn whiten(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow> {
        let array = window.array();
        let out = self.buffer.front(array.channels(), array.samples())?;
        mix_channels(client, array, &out, &self.mixing)?;
        Ok(&*self
            .current
            .insert(DeviceWindow::new(out, window.window().clone())?))
    }
}

impl WindowTransform for Whitener {
    fn apply(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow> {
        self.whiten(client, window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitening_batches_follow_kilosort4_and_use_a_lone_batch() {
        assert_eq!(whitening_batches(0, 25), Vec::<usize>::new());
        assert_eq!(whitening_batches(1, 25), vec![0]);
        assert_eq!(whitening_batches(2, 25), vec![0]);
        assert_eq!(whitening_batches(26, 25), vec![0]);
        assert_eq!(whitening_batches(27, 25), vec![0, 25]);
        assert_eq!(whitening_batches(10, 3), vec![0, 3, 6]);
    }
}
