//! Host side of the common reference: checks, sizes and launches; the pipeline stage.

use cubecl::prelude::*;

use super::kernel;
use crate::launch::UnitLayout;
use crate::{DeviceArray, Result, Stage};

/// What a common reference subtracts from each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reference {
    /// The mean over channels (common average reference, `numpy.mean(x, axis=0)`).
    Mean,
    /// The median over channels (common median reference, `numpy.median(x, axis=0)`: the mean
    /// of the two middle values for an even channel count).
    Median,
    /// The lower median over channels (`torch.median(x, dim=0)`: the lower of the two middle
    /// values for an even channel count, e.g. the 192nd smallest of 384): Kilosort4's CAR.
    LowerMedian,
}

/// Subtracts the common reference of each sample from every channel:
/// `out = x - numpy.mean(x, axis=0)` ([`Reference::Mean`]) or
/// `out = x - numpy.median(x, axis=0)` ([`Reference::Median`], the mean of the two middle
/// values for an even channel count) or `x - torch.median(x, dim=0).values`
/// ([`Reference::LowerMedian`], the lower middle value), for a `[channels, samples]` `f32`
/// window, channel-major.
///
/// `input` and `output` have the same shape and distinct buffers.
///
/// Precision: the mean is summed in `f32` in blocks of 16 channels; its error is typically a
/// few `f32` roundings of the column's mean magnitude `mean(|x[:, t]|)` and at most
/// `(16 + channels / 16) * 2^-24 * mean(|x[:, t]|)` (tested within `1e-5` of it for 384
/// channels, where it is a few `1e-7`). The median is selected exactly; for an even count the
/// two middle values are halved and added in `f32` (one rounding), and each output is one `f32`
/// subtraction from it.
///
/// NaN and infinity: a column holding a NaN gives NaN for every channel of that sample (as
/// numpy does for both). Infinities follow numpy too: the mean of a column with `+inf` is
/// `+inf` (so finite channels give `-inf` and the infinite one NaN), with both signs NaN; the
/// median orders infinities as numpy does. One sample's NaN never reaches another sample.
///
/// # Errors
///
/// [`Error::ShapeMismatch`](crate::Error::ShapeMismatch) when `output`'s shape differs from
/// `input`'s.
pub fn common_reference(
    client: &Client,
    input: &DeviceArray,
    output: &DeviceArray,
    reference: Reference,
) -> Result<()> {
    output.expect_shape("common reference: output", input.shape())?;
    let (values, channels, samples) = (input.len(), input.channels(), input.samples());
    if values == 0 {
        return Ok(());
    }
    // Both fit in u32: their product does (a typed array) and neither is zero.
    let (channels32, samples32) = (channels as u32, samples as u32);
    let layout = UnitLayout::of(client);
    let (count, dim, blocked) = (
        layout.cube_count(samples),
        layout.cube_dim(),
        layout.blocked(),
    );
    // SAFETY: both buffers hold `channels * samples` values (typed arrays); each unit reads and
    // writes `c * samples + t` with `t < samples` and `c < channels` only.
    unsafe {
        let input = BufferArg::from_raw_parts(input.handle().clone(), values);
        let output = BufferArg::from_raw_parts(output.handle().clone(), values);
        match reference {
            Reference::Mean => kernel::subtract_mean::launch_unchecked(
                client, count, dim, input, output, channels32, samples32, blocked,
            ),
            Reference::Median | Reference::LowerMedian => {
                kernel::subtract_median::launch_unchecked(
                    client,
                    count,
                    dim,
                    input,
                    output,
                    channels32,
                    samples32,
                    u32::from(reference == Reference::LowerMedian),
                    blocked,
                )
            }
        }
    }
    Ok(())
}

/// The common reference as a pipeline [`Stage`] (`"car"` for the mean, `"cmr"` for the median,
/// `"cmr-lower"` for the lower median);
/// see [`common_reference`]. It works sample by sample: no settling, no scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonReference {
    /// What is subtracted.
    pub reference: Reference,
}

impl CommonReference {
    /// A stage subtracting `reference`.
    #[must_use]
    pub fn new(reference: Reference) -> Self {
        Self { reference }
    }
}

impl Stage for CommonReference {
    fn name(&self) -> &str {
        match self.reference {
            Reference::Mean => "car",
            Reference::Median => "cmr",
            Reference::LowerMedian => "cmr-lower",
        }
    }

    fn settling(&self) -> usize {
        0
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        common_reference(client, input, output, self.reference)
    }
}
