//! Host side of the median filter and Gaussian smoothing: checks, weights, sizes, launches,
//! and the pipeline stages.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel;
use crate::array::upload;
use crate::launch::{CUBE_DIM, cube_count};
use crate::{DeviceArray, Error, Result, Stage};

/// The longest median filter accepted: rank counting costs `k^2` comparisons per sample
/// (10 201 for `k = 101`), fine on a GPU for artefact removal; longer windows want a
/// different method.
pub const MAX_MEDFILT_KERNEL: usize = 101;

/// The largest Gaussian radius accepted (`int(truncate * sigma + 0.5)`, samples): the weights
/// are one small buffer and each output sample reads `2 * radius + 1` inputs.
pub const MAX_GAUSSIAN_RADIUS: usize = 1 << 16;

/// Median filter along time, each channel of a `[channels, samples]` `f32` window in `input`
/// into `output` (same shape, distinct buffers), as
/// `scipy.signal.medfilt(x[c], kernel_size)` for each channel: the window is centred and
/// padded with zeros beyond either end of the channel.
///
/// Exact: each output is an element of its window (or `0.0` from the padding), found by rank
/// counting (`kernel_size^2` comparisons per sample). A window that holds a NaN gives NaN;
/// scipy's result there depends on its sort and is finite (a deviation, so a NaN is never
/// hidden). Queued, not waited for.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `kernel_size` is even or above [`MAX_MEDFILT_KERNEL`],
/// [`Error::ShapeMismatch`] when `output`'s shape differs from `input`'s.
pub fn medfilt(
    client: &Client,
    input: &DeviceArray,
    output: &DeviceArray,
    kernel_size: usize,
) -> Result<()> {
    check_kernel_size(kernel_size)?;
    output.expect_shape("medfilt: output", input.shape())?;
    let (values, samples) = (input.len(), input.samples());
    if values == 0 {
        return Ok(());
    }
    let (input, output) = (input.handle(), output.handle());
    // SAFETY: both buffers hold `values` values (typed arrays); the kernel bounds its unit
    // index by `values` and reads only its own channel's row of `input`.
    unsafe {
        kernel::medfilt::launch_unchecked(
            client,
            cube_count(values),
            CubeDim::new_1d(CUBE_DIM),
            BufferArg::from_raw_parts(input.clone(), values),
            BufferArg::from_raw_parts(output.clone(), values),
            values as u32,
            samples as u32,
            (kernel_size / 2) as u32,
        );
    }
    Ok(())
}

fn check_kernel_size(kernel_size: usize) -> Result<()> {
    if kernel_size.is_multiple_of(2) || kernel_size > MAX_MEDFILT_KERNEL {
        return Err(Error::InvalidParameter {
            what: "medfilt: kernel_size",
            reason: format!("must be odd and at most {MAX_MEDFILT_KERNEL}, got {kernel_size}"),
        });
    }
    Ok(())
}

/// The weights of a Gaussian of standard deviation `sigma` samples truncated at
/// `truncate * sigma`, as scipy's `gaussian_filter1d` computes them (in `f64`): radius
/// `r = int(truncate * sigma + 0.5)`, `w[t] = exp(-0.5 * (t - r)^2 / sigma^2)` for
/// `t = 0 ..= 2r`, normalised to sum 1.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `sigma` or `truncate` is not finite and positive, or the
/// radius exceeds [`MAX_GAUSSIAN_RADIUS`].
pub fn gaussian_kernel1d(sigma: f64, truncate: f64) -> Result<Vec<f64>> {
    let bad = |what, value: f64| Error::InvalidParameter {
        what,
        reason: format!("must be finite and positive, got {value}"),
    };
    if !(sigma.is_finite() && sigma > 0.0) {
        return Err(bad("gaussian_filter1d: sigma", sigma));
    }
    if !(truncate.is_finite() && truncate > 0.0) {
        return Err(bad("gaussian_filter1d: truncate", truncate));
    }
    let radius = (truncate * sigma + 0.5).floor();
    if radius > MAX_GAUSSIAN_RADIUS as f64 {
        return Err(Error::InvalidParameter {
            what: "gaussian_filter1d: sigma",
            reason: format!(
                "radius {radius} (truncate {truncate} * sigma {sigma}) is over \
                 {MAX_GAUSSIAN_RADIUS} samples"
            ),
        });
    }
    let radius = radius as i64;
    let scale = -0.5 / (sigma * sigma);
    let weights: Vec<f64> = (-radius..=radius)
        .map(|x| (scale * (x * x) as f64).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    Ok(weights.into_iter().map(|w| w / total).collect())
}

/// Gaussian smoothing along time, each channel of a `[channels, samples]` `f32` window in
/// `input` into `output` (same shape, distinct buffers), as
/// `scipy.ndimage.gaussian_filter1d(x, sigma, axis=-1, truncate=truncate)` with its default
/// `mode='reflect'` (`d c b a | a b c d | d c b a`, repeating for a radius longer than the
/// channel). `truncate = 4.0` is scipy's default.
///
/// Weights from [`gaussian_kernel1d`] in `f64`, rounded to `f32`; the sum of `2r + 1`
/// products in `f32`: within `1e-5 * sum(|w| |x|)` of scipy's `f64` result (tested). NaN
/// propagates to every output whose window holds it. Queued, not waited for.
///
/// # Errors
///
/// As [`gaussian_kernel1d`]; [`Error::OverLimit`] when the reflected indices of a huge channel
/// exceed 32 bits, [`Error::ShapeMismatch`] when `output`'s shape differs from `input`'s.
pub fn gaussian_filter1d(
    client: &Client,
    input: &DeviceArray,
    output: &DeviceArray,
    sigma: f64,
    truncate: f64,
) -> Result<()> {
    let weights = f32_weights(&gaussian_kernel1d(sigma, truncate)?);
    let device_weights = upload(client, &weights);
    correlate(client, input, &device_weights, weights.len(), output)
}

fn f32_weights(weights: &[f64]) -> Vec<f32> {
    weights.iter().map(|&w| w as f32).collect()
}

/// Launches the reflect-mode correlation of `input` with the `taps` weights in `weights`
/// (a buffer of at least `taps` `f32`).
fn correlate(
    client: &Client,
    input: &DeviceArray,
    weights: &Handle,
    taps: usize,
    output: &DeviceArray,
) -> Result<()> {
    output.expect_shape("gaussian_filter1d: output", input.shape())?;
    let (values, samples) = (input.len(), input.samples());
    if values == 0 {
        return Ok(());
    }
    let radius = taps / 2;
    // The kernel reflects through `(s + t + shift - radius) mod 2 * samples` with `shift` a
    // multiple of the period at least `radius`: every term must fit 32 bits.
    let period = 2 * samples as u64;
    let shift = (radius as u64).div_ceil(period) * period;
    let largest = samples as u64 + taps as u64 + shift;
    if largest > u64::from(u32::MAX) {
        return Err(Error::OverLimit {
            what: "gaussian_filter1d: reflected index",
            requested: largest,
            limit: u64::from(u32::MAX),
            unit: "values",
            reason: "kernels index with 32-bit integers",
        });
    }
    let (input, output) = (input.handle(), output.handle());
    // SAFETY: `input` and `output` hold `values` values (typed arrays) and `weights` `taps`
    // (uploaded from them);
    // the kernel bounds its unit index by `values`, reads weights below `taps` and input
    // within its channel's row (reflected indices are in `0..samples`).
    unsafe {
        kernel::correlate_reflect::launch_unchecked(
            client,
            cube_count(values),
            CubeDim::new_1d(CUBE_DIM),
            BufferArg::from_raw_parts(input.clone(), values),
            BufferArg::from_raw_parts(weights.clone(), taps),
            BufferArg::from_raw_parts(output.clone(), values),
            values as u32,
            samples as u32,
            radius as u32,
            shift as u32,
        );
    }
    Ok(())
}

/// [`medfilt`] as a pipeline [`Stage`]: settling `kernel_size / 2` samples, so a window with
/// halos that long gives, outside them, the values of the whole recording filtered at once.
#[derive(Debug, Clone)]
pub struct MedianFilter {
    kernel_size: usize,
}

impl MedianFilter {
    /// A median filter of `kernel_size` samples (odd).
    ///
    /// # Errors
    ///
    /// As [`medfilt`]'s `kernel_size` check.
    pub fn new(kernel_size: usize) -> Result<Self> {
        check_kernel_size(kernel_size)?;
        Ok(Self { kernel_size })
    }

    /// The window length.
    #[must_use]
    pub fn kernel_size(&self) -> usize {
        self.kernel_size
    }
}

impl Stage for MedianFilter {
    fn name(&self) -> &str {
        "medfilt"
    }

    fn settling(&self) -> usize {
        self.kernel_size / 2
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        medfilt(client, input, output, self.kernel_size)
    }
}

/// [`gaussian_filter1d`] as a pipeline [`Stage`]: settling = the radius, so a window with
/// halos that long gives, outside them, the values of the whole recording smoothed at once.
/// The weights are computed at construction and uploaded on the first
/// [`apply`](Stage::apply), then kept (a stage is used with one client).
#[derive(Debug, Clone)]
pub struct GaussianFilter {
    weights: Vec<f32>,
    device_weights: Option<Handle>,
}

impl GaussianFilter {
    /// Gaussian smoothing with standard deviation `sigma` samples, truncated at
    /// `truncate * sigma` (scipy's default `truncate` is `4.0`).
    ///
    /// # Errors
    ///
    /// As [`gaussian_kernel1d`].
    pub fn new(sigma: f64, truncate: f64) -> Result<Self> {
        Ok(Self {
            weights: f32_weights(&gaussian_kernel1d(sigma, truncate)?),
            device_weights: None,
        })
    }

    /// The radius `int(truncate * sigma + 0.5)` in samples.
    #[must_use]
    pub fn radius(&self) -> usize {
        self.weights.len() / 2
    }
}

impl Stage for GaussianFilter {
    fn name(&self) -> &str {
        "gaussian_filter1d"
    }

    fn settling(&self) -> usize {
        self.radius()
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        let weights = self
            .device_weights
            .get_or_insert_with(|| upload(client, &self.weights));
        correlate(client, input, weights, self.weights.len(), output)
    }
}
