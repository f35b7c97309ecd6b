//! Host side of the statistics kernels: checks, sizes and launches.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel::{self, Finish};
use crate::array::alloc;
use crate::launch::{CUBE_DIM, cube_count, cube_count_for, cube_units};
use crate::{ChannelVector, DeviceArray, Error, Result};

/// Values one unit of a tree-sum level adds (so a level has `len / 32` units per channel and
/// a 30 000-sample channel is summed in three levels).
const GROUP: usize = 32;

/// Units of the cube that computes one channel's median (fewer where the device allows fewer
/// per cube, as the cpu runtime does: one per core).
const MEDIAN_UNITS: u32 = 256;

/// The constant of [`mad_noise`]: the median of `|x|` for `x ~ N(0, 1)` is `0.6745`.
const MAD_TO_SIGMA: f32 = 0.6745;

/// A per-channel statistic.
#[derive(Clone, Copy, Debug)]
enum Statistic {
    Mean,
    Std,
    Median,
    MadNoise,
}

impl Statistic {
    fn name(self) -> &'static str {
        match self {
            Self::Mean => "channel_mean",
            Self::Std => "channel_std",
            Self::Median => "channel_median",
            Self::MadNoise => "mad_noise",
        }
    }
}

/// The mean of each channel of the `[channels, samples]` `f32` window in `input`, as
/// `np.mean(x, axis=1)`, downloaded (waits for the device).
///
/// Computed on the device with a tree of compensated (Neumaier) `f32` sums over groups of 32
/// values: the error is a few `f32` roundings of `sum(|x|) / n` (tested within `1e-6` of it),
/// not the `n * 2^-24` of a naive running sum. A NaN in a channel gives NaN; infinities give
/// what numpy gives (`inf`, or NaN for `inf - inf`). The tree's levels (about `samples / 32`
/// values per channel) are scratch buffers taken from the runtime's pool on each call.
///
/// # Errors
///
/// [`Error::InvalidParameter`] when `input` has zero samples per channel, [`Error::Device`]
/// when the device fails.
pub fn channel_mean(client: &Client, input: &DeviceArray) -> Result<Vec<f32>> {
    download(client, Statistic::Mean, input)
}

/// [`channel_mean`] written to the device vector `output` (one `f32` per channel), not waited for.
///
/// # Errors
///
/// As [`channel_mean`], and [`Error::ShapeMismatch`] when `output` does not hold one value
/// per channel of `input`.
pub fn channel_mean_into(
    client: &Client,
    input: &DeviceArray,
    output: &ChannelVector,
) -> Result<()> {
    launch(client, Statistic::Mean, input, output)
}

/// The standard deviation of each channel, as `np.std(x, axis=1)` (`ddof=0`: the root of the
/// mean squared deviation from the mean), downloaded (waits for the device).
///
/// Two passes as numpy: the mean ([`channel_mean`]), then the mean of `(x - mean)^2` with the
/// same compensated tree sum: within `1e-5` relative for offsets up to about `10^4` times the
/// standard deviation (tested). The mean is rounded to `f32` before the second pass, which
/// adds about `(offset / std * 2^-24)^2` relative beyond that: `1.5e-5` at `10^5`, `1e-3` at
/// `10^6` (tested; subtract such offsets first). NaN and infinities in a channel give NaN (as
/// numpy).
///
/// # Errors
///
/// As [`channel_mean`].
pub fn channel_std(client: &Client, input: &DeviceArray) -> Result<Vec<f32>> {
    download(client, Statistic::Std, input)
}

/// [`channel_std`] written to the device vector `output` (one `f32` per channel), not waited for.
///
/// # Errors
///
/// As [`channel_mean_into`].
pub fn channel_std_into(
    client: &Client,
    input: &DeviceArray,
    output: &ChannelVector,
) -> Result<()> {
    launch(client, Statistic::Std, input, output)
}

/// The median of each channel, as `np.median(x, axis=1)`, downloaded (waits for the device).
///
/// Exact: the middle element of the channel for an odd count; for an even count the mean of
/// the two middle elements computed in `f32` as numpy does (`(a + b) / 2`). Found on the
/// device by bisection on the order-preserving `u32` key of each value (32 counting passes
/// over the channel, one cube per channel, no sort and no scratch buffer). A channel holding
/// a NaN gives NaN (as numpy).
///
/// # Errors
///
/// As [`channel_mean`].
pub fn channel_median(client: &Client, input: &DeviceArray) -> Result<Vec<f32>> {
    download(client, Statistic::Median, input)
}

/// [`channel_median`] written to the device vector `output` (one `f32` per channel), not waited
/// for.
///
/// # Errors
///
/// As [`channel_mean_into`].
pub fn channel_median_into(
    client: &Client,
    input: &DeviceArray,
    output: &ChannelVector,
) -> Result<()> {
    launch(client, Statistic::Median, input, output)
}

/// The noise level of each channel from its median absolute value:
/// `np.median(np.abs(x), axis=1) / 0.6745` (Quiroga et al. 2004; Kilosort and SpikeInterface
/// thresholds are multiples of such a level), downloaded (waits for the device).
///
/// The median of `|x|` is exact as in [`channel_median`] (the mean of the two middle values
/// for an even count); the division by `0.6745` is one `f32` division (within 1 ulp of the
/// `f64` quotient rounded). The signal is taken as centred on zero (filtered data): this is
/// not SpikeInterface's `get_noise_levels(method="mad")`, which subtracts each channel's median
/// first and divides by `0.6744897501960817`. A channel holding a NaN gives NaN.
///
/// # Errors
///
/// As [`channel_mean`].
pub fn mad_noise(client: &Client, input: &DeviceArray) -> Result<Vec<f32>> {
    download(client, Statistic::MadNoise, input)
}

/// [`mad_noise`] written to the device vector `output` (one `f32` per channel), not waited for: a
/// per-channel threshold vector for [`PeakDetector`](crate::PeakDetector) without a round trip.
///
/// # Errors
///
/// As [`channel_mean_into`].
pub fn mad_noise_into(client: &Client, input: &DeviceArray, output: &ChannelVector) -> Result<()> {
    launch(client, Statistic::MadNoise, input, output)
}

/// Computes `statistic` into a fresh vector and downloads it.
fn download(client: &Client, statistic: Statistic, input: &DeviceArray) -> Result<Vec<f32>> {
    let output = ChannelVector::empty(client, input.channels())?;
    launch(client, statistic, input, &output)?;
    output.to_host(client)
}

/// Checks the shapes and queues the kernels of `statistic`.
fn launch(
    client: &Client,
    statistic: Statistic,
    input: &DeviceArray,
    output: &ChannelVector,
) -> Result<()> {
    let (channels, samples) = (input.channels(), input.samples());
    if samples == 0 {
        return Err(Error::InvalidParameter {
            what: statistic.name(),
            reason: "a channel needs at least one sample (got 0)".into(),
        });
    }
    output.expect_channels(statistic.name(), channels)?;
    if channels == 0 {
        return Ok(());
    }
    // Every kernel below bounds its indices by the lengths passed, which the typed arrays
    // make true of the buffers.
    let (input, output) = (input.handle(), output.handle());
    match statistic {
        Statistic::Mean => tree_sum(client, input, None, output, channels, samples),
        Statistic::Std => {
            let mean = alloc::<f32>(client, channels);
            tree_sum(client, input, None, &mean, channels, samples);
            tree_sum(client, input, Some(&mean), output, channels, samples);
        }
        Statistic::Median => median(client, input, output, channels, samples, false),
        Statistic::MadNoise => median(client, input, output, channels, samples, true),
    }
    Ok(())
}

/// Queues the tree sum of each row of `input` (`channels x samples`, checked by the caller)
/// into `output` (`channels` values): the mean, or with `center` (`channels` values) the root
/// mean square deviation from it. Each level adds groups of [`GROUP`] values per unit.
fn tree_sum(
    client: &Client,
    input: &Handle,
    center: Option<&Handle>,
    output: &Handle,
    channels: usize,
    samples: usize,
) {
    let count = samples as f32;
    let mut source = input.clone();
    let mut len = samples;
    let mut centered = center.is_some();
    loop {
        let groups = len.div_ceil(GROUP);
        let last = groups == 1;
        let units = channels * groups; // <= channels * samples <= u32::MAX
        let target = if last {
            output.clone()
        } else {
            alloc::<f32>(client, units)
        };
        let finish = match (last, center.is_some()) {
            (false, _) => Finish::Sum,
            (true, false) => Finish::Mean,
            (true, true) => Finish::RootMean,
        };
        let (center, center_len) = match center {
            Some(center) if centered => (center.clone(), channels),
            _ => (source.clone(), 1),
        };
        // SAFETY: `source` holds `channels * len` values (a typed array for the window,
        // allocated so for the levels), `center` `center_len` values and `target` `units`
        // values; the kernel reads `center` only when `centered`, bounds its unit index by
        // `units` and reads `source` within each unit's row.
        unsafe {
            kernel::sum_groups::launch_unchecked(
                client,
                cube_count(units),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(source.clone(), channels * len),
                BufferArg::from_raw_parts(center, center_len),
                BufferArg::from_raw_parts(target.clone(), units),
                units as u32,
                len as u32,
                groups as u32,
                GROUP as u32,
                count,
                centered,
                finish,
            );
        }
        if last {
            return;
        }
        source = target;
        len = groups;
        centered = false;
    }
}

/// Queues the median (of `|x|` divided by [`MAD_TO_SIGMA`] with `mad`) of each channel of
/// `input` into `output`, whose sizes the caller has checked.
fn median(
    client: &Client,
    input: &Handle,
    output: &Handle,
    channels: usize,
    samples: usize,
    mad: bool,
) {
    // The cube-wide reductions need a power of two of units, within the device's limit.
    let units = cube_units(client, MEDIAN_UNITS);
    let divisor = if mad { MAD_TO_SIGMA } else { 1.0 };
    // SAFETY: `input` holds `channels * samples` values and `output` `channels` (typed
    // arrays, see `launch`); cube `c` reads only row `c` of `input`, and cubes past `channels` do nothing.
    unsafe {
        kernel::channel_median::launch_unchecked(
            client,
            cube_count_for(channels * units as usize, units),
            CubeDim::new_1d(units),
            BufferArg::from_raw_parts(input.clone(), channels * samples),
            BufferArg::from_raw_parts(output.clone(), channels),
            channels as u32,
            samples as u32,
            divisor,
            units as usize,
            mad,
        );
    }
}
