//! `Fir`: FIR filtering and polyphase resampling on the device (`lfilter` with `a = [1]`,
//! `resample_poly`'s `upfirdn` step).

use cubecl::client::Client;
use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel;
use crate::array::upload;
use crate::design::sos::check_coefficients;
use crate::design::{PolyphaseFilter, resample_poly_filter};
use crate::launch::{CUBE_DIM, cube_count};
use crate::pipeline::Stage;
use crate::{DeviceArray, Error, Result, Shape};

/// A finite impulse response applied along time to every channel of a `[channels, samples]`
/// `f32` window, optionally with rational resampling (`up / down`).
///
/// - [`Fir::lfilter`]: `scipy.signal.lfilter(taps, [1.0], x)` along time, zero initial state:
///   `y[t] = sum_j taps[j] x[t - j]`.
/// - [`Fir::resample`], [`Fir::resample_poly`]: `scipy.signal.resample_poly`
///   (`padtype="constant"`, zeros outside the input): output sample `m` is
///   `sum_j h[j] xu[m * down + half_len - j]` with `h` the filter's taps (already times `up`)
///   and `xu` the input upsampled by `up` with zeros; `ceil(samples * up / down)` outputs per
///   channel.
///
/// Sums run in `f32` over the taps in order; the result is within about `taps * 2^-24` of
/// the `f64` sum relative to `sum |h[j] x|`. NaN propagates to every output whose sum
/// includes it.
#[derive(Debug)]
pub struct Fir {
    taps: Vec<f64>,
    up: usize,
    down: usize,
    shift: usize,
    device: Option<Handle>,
}

impl Fir {
    /// A causal FIR filter (`lfilter(taps, [1.0], x)`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for no taps, a non-finite tap, or more than `u32::MAX` taps.
    pub fn lfilter(taps: &[f64]) -> Result<Self> {
        check_taps(taps)?;
        Ok(Self {
            taps: taps.to_vec(),
            up: 1,
            down: 1,
            shift: 0,
            device: None,
        })
    }

    /// A polyphase resampler for a designed filter:
    /// `scipy.signal.resample_poly(x, filter.up, filter.down, window=...)` with the filter
    /// [`resample_poly_filter`](crate::design::resample_poly_filter) designs by default, or
    /// any [`PolyphaseFilter`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for a zero factor, no taps, a non-finite tap, or a centre
    /// tap past the end.
    pub fn resample(filter: &PolyphaseFilter) -> Result<Self> {
        check_taps(&filter.taps)?;
        if filter.up == 0 || filter.down == 0 || filter.half_len >= filter.taps.len() {
            return Err(Error::InvalidParameter {
                what: "resample_poly: filter",
                reason: format!(
                    "up = {}, down = {}, centre {} of {} taps",
                    filter.up,
                    filter.down,
                    filter.half_len,
                    filter.taps.len()
                ),
            });
        }
        Ok(Self {
            taps: filter.taps.clone(),
            up: filter.up,
            down: filter.down,
            shift: filter.half_len,
            device: None,
        })
    }

    /// `scipy.signal.resample_poly(x, up, down)` with scipy's default filter (Kaiser window,
    /// beta 5, see [`resample_poly_filter`](crate::design::resample_poly_filter)).
    ///
    /// # Errors
    ///
    /// As [`resample_poly_filter`](crate::design::resample_poly_filter).
    pub fn resample_poly(up: usize, down: usize) -> Result<Self> {
        Self::resample(&resample_poly_filter(up, down)?)
    }

    /// Output samples per channel for `samples` input samples: `ceil(samples * up / down)`.
    #[must_use]
    pub fn output_len(&self, samples: usize) -> usize {
        (samples * self.up).div_ceil(self.down)
    }

    /// Filters (and resamples) every channel of `input` into `output` (`channels x
    /// output_len(samples)`), queued on `client`.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`] when `output` is not `channels x output_len(samples)`,
    /// [`Error::OverLimit`] over 32-bit indexing (including `samples * up`).
    pub fn run(
        &mut self,
        client: &Client,
        input: &DeviceArray,
        output: &DeviceArray,
    ) -> Result<()> {
        let (channels, samples) = (input.channels(), input.samples());
        let values = input.len();
        Shape::new(samples, self.up).values("fir upsampled input")?;
        let out_len = self.output_len(samples);
        output.expect_shape("fir: output", Shape::new(channels, out_len))?;
        let out_values = output.len();
        Shape::new(out_len, self.down).values("fir output index")?;
        if out_values == 0 {
            return Ok(());
        }
        let taps = self
            .device
            .get_or_insert_with(|| {
                let taps: Vec<f32> = self.taps.iter().map(|&t| t as f32).collect();
                upload(client, &taps)
            })
            .clone();
        // SAFETY: `input` holds `values` and `output` `out_values` values (typed arrays),
        // `taps` its length; the kernel bounds its unit by `channels * out_len`, reads only
        // source indices below `src_len` and taps below their length. `out_len * down +
        // shift` and `samples * up` fit u32 (checked above; `shift < taps <= u32::MAX`).
        unsafe {
            kernel::polyphase_fir::launch_unchecked(
                client,
                cube_count(out_values),
                CubeDim::new_1d(CUBE_DIM),
                BufferArg::from_raw_parts(input.handle().clone(), values),
                BufferArg::from_raw_parts(taps, self.taps.len()),
                BufferArg::from_raw_parts(output.handle().clone(), out_values),
                channels as u32,
                samples as u32,
                out_len as u32,
                self.taps.len() as u32,
                self.up as u32,
                self.down as u32,
                self.shift as u32,
            );
        }
        Ok(())
    }
}

impl Stage for Fir {
    fn name(&self) -> &str {
        "lfilter"
    }

    /// A causal filter of `n` taps depends on the `n - 1` samples before each output.
    fn settling(&self) -> usize {
        self.taps.len() - 1
    }

    fn device_allocations(&self) -> usize {
        usize::from(self.device.is_some())
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        if self.up != 1 || self.down != 1 {
            return Err(Error::InvalidParameter {
                what: "fir stage",
                reason: "a resampler changes the window length; call run() instead".into(),
            });
        }
        self.run(client, input, output)
    }
}

/// Taps a kernel can take: at least one, all finite (the check every design uses), and no
/// more than a 32-bit index reaches.
fn check_taps(taps: &[f64]) -> Result<()> {
    check_coefficients("fir: taps", taps)?;
    if taps.len() > u32::MAX as usize {
        return Err(Error::InvalidParameter {
            what: "fir: taps",
            reason: format!("{} taps; at most u32::MAX are supported", taps.len()),
        });
    }
    Ok(())
}
