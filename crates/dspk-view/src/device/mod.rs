//! The device fold: a window already on the device folded into its envelope there, only the
//! columns downloaded.

mod kernel;

use std::fmt;

use cubecl::CubeElement;
use cubecl::client::Client;
use cubecl::prelude::CubeDim;
use cubecl::server::Handle;
use dspk_ops::DeviceArray;
use dspk_ops::launch::{CUBE_DIM, cube_count};

use crate::{Columns, Envelope, Error, Result};

/// Samples one unit folds: columns longer than this are cut into parts of this length, folded
/// in parallel and merged in order. It bounds every unit's loop (lavapipe stopped kernel
/// invocations after about 65 535 loop iterations) and keeps a whole window folded into a
/// few wide columns from running on a few units.
const PART_LEN: usize = 256;

/// Partial folds one unit of a merge pass merges (a column of 2^32 samples needs four passes).
const GROUP: usize = 256;

/// Folds `[channels, samples]` `f32` arrays on the device into [`Envelope`]s, bit for bit
/// what the host fold ([`Envelope::from_samples`]) gives for the same values (the same
/// comparisons in the same order, done on the values' bits: NaN skipped and counted, of
/// `-0.0` and `0.0` the first kept, an all-NaN column `+inf` / `-inf`).
///
/// One unit folds each column of each channel; a column longer than 256 samples is cut into
/// parts of 256 folded in parallel and merged in order, so a window folded into a few wide
/// columns is as parallel as one folded into many. Only the columns (12 bytes per channel and
/// column, in three buffers each no larger than the array, so any array the device holds can
/// be folded) come back. The folder keeps its device buffers (column edges, partial folds, the
/// result) and reuses them while they are big enough.
pub struct DeviceFolder {
    client: Client,
    /// The column edges last uploaded (relative to the range's start) and their buffer.
    edges: Option<(Vec<u32>, DeviceArray<u32>)>,
    /// The result: minima's bits, maxima's bits, NaN counts.
    output: Option<[DeviceArray<u32>; 3]>,
    /// Partial folds of long columns (as the output), levels alternating between the two.
    scratch: [Option<[DeviceArray<u32>; 3]>; 2],
}

impl fmt::Debug for DeviceFolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceFolder")
            .field("device", &self.client.properties().identity.name)
            .finish_non_exhaustive()
    }
}

/// Which of the folder's buffers a pass writes.
#[derive(Clone, Copy)]
enum Target {
    Output,
    Scratch(usize),
}

impl DeviceFolder {
    /// A folder for arrays on `client`'s device (no buffer is made until the first fold).
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self {
            client,
            edges: None,
            output: None,
            scratch: [None, None],
        }
    }

    /// The envelope of `values` (`[channels, samples]`, channel-major, its samples being
    /// exactly `columns`' range) over `columns`, with the NaN counts. Waits for the device.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] for a range of more than `u32::MAX` samples; [`Error::Shape`] when
    /// `values` does not hold `columns.num_samples()` samples per channel;
    /// [`Error::InvalidRequest`] for zero channels; [`Error::Device`] when a buffer exceeds
    /// the device's limits or the device fails.
    pub fn fold(&mut self, values: &DeviceArray<f32>, columns: &Columns) -> Result<Envelope> {
        let samples = check_samples(columns)?;
        if values.samples() != samples {
            return Err(Error::Shape {
                what: "device fold: samples per channel of the array (the columns' range)",
                expected: samples,
                actual: values.samples(),
            });
        }
        let channels = values.channels();
        if channels == 0 {
            return Err(Error::invalid("device fold: channels", "zero channels"));
        }
        let width = columns.len();
        let start = columns.samples().start;
        // Edges are at most `samples <= u32::MAX` past the start.
        let edges: Vec<u32> = columns
            .edges()
            .iter()
            .map(|&edge| (edge - start) as u32)
            .collect();
        let longest = edges.windows(2).map(|e| e[1] - e[0]).max().unwrap_or(0) as usize;
        // Every column holds a sample, so rows <= channels * samples <= u32::MAX.
        let rows = channels * width;
        let mut parts = longest.div_ceil(PART_LEN).max(1);

        let edges = self.upload_edges(edges)?;
        let first = if parts == 1 {
            Target::Output
        } else {
            Target::Scratch(0)
        };
        let units = fold_count(rows, parts)?;
        let [low, high, nan] = self.buffers(first, units)?;
        kernel::fold_parts::launch(
            &self.client,
            cube_count(units),
            CubeDim::new_1d(CUBE_DIM),
            values.arg(values.len()),
            edges.arg(edges.len()),
            low.arg(units),
            high.arg(units),
            nan.arg(units),
            units as u32,
            samples as u32,
            width as u32,
            parts as u32,
            PART_LEN as u32,
        );
        let mut level = 0;
        while parts > 1 {
            let groups = parts.div_ceil(GROUP);
            let folds = rows * parts;
            let [low_in, high_in, nan_in] = self.buffers(Target::Scratch(level % 2), folds)?;
            let target = if groups == 1 {
                Target::Output
            } else {
                Target::Scratch((level + 1) % 2)
            };
            let units = fold_count(rows, groups)?;
            let [low, high, nan] = self.buffers(target, units)?;
            kernel::merge_parts::launch(
                &self.client,
                cube_count(units),
                CubeDim::new_1d(CUBE_DIM),
                low_in.arg(folds),
                high_in.arg(folds),
                nan_in.arg(folds),
                low.arg(units),
                high.arg(units),
                nan.arg(units),
                units as u32,
                parts as u32,
                groups as u32,
                GROUP as u32,
            );
            parts = groups;
            level += 1;
        }

        let [low, high, nan] = self.buffers(Target::Output, rows)?;
        let mut words = self
            .client
            .read(vec![
                front(&low, rows),
                front(&high, rows),
                front(&nan, rows),
            ])
            .map_err(dspk_ops::Error::from)?
            .into_iter()
            .map(|bytes| u32::from_bytes(&bytes)[..rows].to_vec());
        let mut next = || words.next().unwrap_or_default();
        let min = next().into_iter().map(f32::from_bits).collect();
        let max = next().into_iter().map(f32::from_bits).collect();
        let nan = next();
        Envelope::from_parts(channels, columns.clone(), min, max, Some(nan))
    }

    /// The envelope of host `values` (`[channels, samples]`, channel-major, the samples being
    /// `columns`' range): uploads them and folds them as [`fold`](Self::fold) does.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `values` is not `channels * columns.num_samples()` long; as
    /// [`fold`](Self::fold) otherwise.
    pub fn fold_host(
        &mut self,
        values: &[f32],
        channels: usize,
        columns: &Columns,
    ) -> Result<Envelope> {
        let samples = check_samples(columns)?;
        let expected = channels.checked_mul(samples).ok_or(Error::OverLimit {
            what: "device fold: values",
            requested: channels as u64 * samples as u64,
            limit: u64::from(u32::MAX),
        })?;
        if values.len() != expected {
            return Err(Error::Shape {
                what: "device fold: host values (channels x the columns' samples)",
                expected,
                actual: values.len(),
            });
        }
        let array = DeviceArray::from_host(&self.client, values, channels, samples)?;
        self.fold(&array, columns)
    }

    /// A buffer holding `edges`, uploaded unless they are the last ones.
    fn upload_edges(&mut self, edges: Vec<u32>) -> Result<DeviceArray<u32>> {
        if let Some((last, array)) = &self.edges
            && *last == edges
        {
            return Ok(array.clone());
        }
        let array = DeviceArray::from_host(&self.client, &edges, 1, edges.len())?;
        self.edges = Some((edges, array.clone()));
        Ok(array)
    }

    /// The three buffers (minima, maxima, NaN counts) of `target`, grown to hold at least
    /// `folds` words each.
    fn buffers(&mut self, target: Target, folds: usize) -> Result<[DeviceArray<u32>; 3]> {
        let slot = match target {
            Target::Output => &mut self.output,
            Target::Scratch(i) => &mut self.scratch[i],
        };
        if let Some(buffers) = slot
            && buffers[0].len() >= folds
        {
            return Ok(buffers.clone());
        }
        let make = || DeviceArray::empty(&self.client, 1, folds);
        let buffers = [make()?, make()?, make()?];
        *slot = Some(buffers.clone());
        Ok(buffers)
    }
}

/// The handle of the first `words` words of `array` (which holds at least that many).
fn front(array: &DeviceArray<u32>, words: usize) -> Handle {
    let spare = (array.len() - words) * size_of::<u32>();
    array.handle().clone().offset_end(spare as u64)
}

/// The columns' samples, refused past `u32::MAX` (kernels index with 32-bit integers).
fn check_samples(columns: &Columns) -> Result<usize> {
    let samples = columns.num_samples();
    if samples > u64::from(u32::MAX) {
        return Err(Error::OverLimit {
            what: "device fold: samples per call",
            requested: samples,
            limit: u64::from(u32::MAX),
        });
    }
    Ok(samples as usize)
}

/// `rows * parts` folds, refused past 32-bit indices.
fn fold_count(rows: usize, parts: usize) -> Result<usize> {
    rows.checked_mul(parts)
        .filter(|&n| n <= u32::MAX as usize)
        .ok_or(Error::OverLimit {
            what: "device fold: partial folds",
            requested: rows as u64 * parts as u64,
            limit: u64::from(u32::MAX),
        })
}
