//! `SosFilter`: scipy's `sosfilt` and `sosfiltfilt` on the device, many channels at once.

use cubecl::client::Client;
use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel;
use super::plan::{COEFS, Plan};
use crate::array::upload;
use crate::buffers::GrowingBuffer;
use crate::design::Sos;
use crate::design::host::sosfiltfilt_padlen;
use crate::launch::UnitLayout;
use crate::pipeline::Stage;
use crate::{DeviceArray, Error, Result, Shape};

/// Relative level below which the impulse response counts as settled (halo sizing). The error
/// a window edge leaves is bounded by the response's tail sum times the signal, so the level is
/// set well below the `f32` rounding (a 300 Hz third-order Butterworth high-pass at 30 kHz
/// settles in 450 samples).
const SETTLED: f64 = 1e-8;

/// Samples after which `sos`'s impulse response stays below [`SETTLED`] of its peak.
fn settling(sos: &Sos) -> Result<usize> {
    sos.settling_length(SETTLED)
}

/// Default samples per block. Measured on an H200 (CUDA, 384 x 60 000, zero-phase third-order
/// high-pass): blocks of 64 / 128 / 256 / 512 / 1024 samples took 3.58 / 2.37 / 1.77 / 1.56 /
/// 1.40 ms. Shorter blocks give more units but a longer sequential scan over blocks (one warp
/// per 32 channels, latency-bound at about 1 us per block); 1024 balances the two there.
const DEFAULT_BLOCK_LEN: usize = 1024;

/// The most blocks per channel and pass, and the longest block: on lavapipe a kernel
/// invocation stopped after about 65 535 loop iterations (the scan walks blocks two at a time
/// for more than four sections, a block unit eight samples at a time), so longer walks are
/// refused rather than left wrong.
pub const MAX_BLOCKS: usize = 120_000;

/// The longest block ([`SosFilter::with_block_len`]), for the reason of [`MAX_BLOCKS`].
pub const MAX_BLOCK_LEN: usize = 262_144;

/// The most sections a filter may have (an order-32 band-pass); the kernels unroll over them.
pub const MAX_SECTIONS: usize = 16;

/// How a forward filter's state starts (scipy's `zi` argument of `sosfilt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initial {
    /// All states zero (scipy's default, `zi=None`).
    Zero,
    /// The steady state for a constant input equal to each channel's first sample
    /// (`zi = sosfilt_zi(sos) * x[0]`), which removes the start-up transient of a step.
    SteadyState,
}

/// What a [`SosFilter`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `scipy.signal.sosfilt` along time.
    Forward(Initial),
    /// `scipy.signal.sosfiltfilt` along time with odd padding of `padlen` samples.
    ZeroPhase { padlen: usize },
}

/// A cascade of second-order sections applied along time to every channel of a
/// `[channels, samples]` `f32` window on the device: forward (`scipy.signal.sosfilt`) or
/// forward-backward (`scipy.signal.sosfiltfilt`, `padtype="odd"`).
///
/// The recursion runs in `f32`, each section as a balanced two-state system stored as
/// `A - I` with compensated state updates (decision 0007: scipy's direct form II transposed
/// loses everything in `f32` when poles approach `z = 1`), with time cut into blocks joined by
/// a scan (see the kernel module), so a window of 384 x 60 000 runs on tens of thousands of
/// units. Compared with scipy's `f64` output, relative to its peak: within `1e-3` for
/// Butterworth and Chebyshev I filters of orders 1-8, high-pass or band-pass, with cut-offs
/// from fs / 30 000 to fs / 4, on signals up to `10^7` samples with an offset hundreds of times
/// the signal, at any block length (measured worst `1.1e-4`, at fs / 30 000;
/// `tests/low_cut.rs`);
/// within `3e-7` for the spike-band filters (300 Hz high-pass, 300-6000 Hz band-pass, 60 Hz
/// notch at 30 kHz).
///
/// NaN propagates: a NaN sample makes every later output of its channel NaN (and, for the
/// zero-phase filter, every output of its channel).
///
/// Device buffers (coefficients, the block scan's states, the zero-phase filter's
/// intermediate) are allocated on the first run and reused while windows do not grow; a filter
/// stays on the client it first ran on.
#[derive(Debug)]
pub struct SosFilter {
    sections: Vec<[f64; 6]>,
    initial_state: Vec<f64>,
    mode: Mode,
    block_len: usize,
    settling: usize,
    decimation: usize,
    device: Option<DeviceParts>,
}

/// The filter's buffers on its device.
#[derive(Debug)]
struct DeviceParts {
    coefs: Handle,
    transition: Handle,
    /// `sosfilt_zi` for a steady-state start, zeros for a zero start.
    initial: Handle,
    states: GrowingBuffer,
    intermediate: GrowingBuffer,
}

impl SosFilter {
    /// `scipy.signal.sosfilt(sos, x)` along time (`initial` = [`Initial::Zero`]) or with
    /// `zi = sosfilt_zi(sos) * x[0]` ([`Initial::SteadyState`]). Its settling length (the
    /// halo a window needs) is where the impulse response stays below `1e-8` of its peak.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for more than [`MAX_SECTIONS`] sections, or a filter that
    /// does not settle (a pole on or outside the unit circle).
    pub fn forward(sos: &Sos, initial: Initial) -> Result<Self> {
        Self::from_parts(sos, Mode::Forward(initial), settling(sos)?)
    }

    /// `scipy.signal.sosfiltfilt(sos, x)` along time: odd padding of scipy's default `padlen`
    /// (`3 * (2 * sections + 1 - ...)`, see [`sosfiltfilt_padlen`]), each pass started from
    /// `sosfilt_zi` times its first sample. Settling length as [`forward`](Self::forward):
    /// the zero-phase response reaches as far on each side.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward), and for a section with a pole at `z = 1`.
    pub fn zero_phase(sos: &Sos) -> Result<Self> {
        let padlen = sosfiltfilt_padlen(sos);
        Self::from_parts(sos, Mode::ZeroPhase { padlen }, settling(sos)?)
    }

    /// The zero-phase filter with `padlen` samples of odd padding instead of scipy's default
    /// (`sosfiltfilt(..., padlen=padlen)`); no effect on a forward filter.
    #[must_use]
    pub fn with_padlen(mut self, padlen: usize) -> Self {
        if let Mode::ZeroPhase { .. } = self.mode {
            self.mode = Mode::ZeroPhase { padlen };
        }
        self
    }

    /// A filter from a design (its rows are finite with `a0 = 1`, checked by [`Sos::new`]), the
    /// mode and the settling length.
    fn from_parts(sos: &Sos, mode: Mode, settling: usize) -> Result<Self> {
        let sections = sos.sections();
        if sections.len() > MAX_SECTIONS {
            return Err(Error::InvalidParameter {
                what: "sos filter: sections",
                reason: format!(
                    "{} sections; at most {MAX_SECTIONS} are supported",
                    sections.len()
                ),
            });
        }
        let initial_state = match mode {
            Mode::Forward(Initial::Zero) => vec![0.0; 2 * sections.len()],
            _ => Plan::new(sections, 1).steady_state()?,
        };
        Ok(Self {
            sections: sections.to_vec(),
            initial_state,
            mode,
            block_len: DEFAULT_BLOCK_LEN,
            settling,
            decimation: 1,
            device: None,
        })
    }

    /// The same filter with time cut into blocks of `block_len` samples (default 1024).
    /// Results depend on it only through `f32` rounding, within the bound of the type's doc at
    /// every block length; tests use small blocks to exercise the scan on short inputs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for a zero block length or one over [`MAX_BLOCK_LEN`].
    pub fn with_block_len(mut self, block_len: usize) -> Result<Self> {
        if block_len == 0 || block_len > MAX_BLOCK_LEN {
            return Err(Error::InvalidParameter {
                what: "sos filter: block length",
                reason: format!("{block_len}: must be 1 to {MAX_BLOCK_LEN}"),
            });
        }
        self.block_len = block_len;
        self.device = None;
        Ok(self)
    }

    /// Keeps every `factor`-th output (`y[::factor]`), for decimation.
    pub(crate) fn with_decimation(mut self, factor: usize) -> Self {
        self.decimation = factor.max(1);
        self
    }

    /// Output samples per channel for an input of `samples`: `ceil(samples / decimation)`.
    #[must_use]
    pub fn output_len(&self, samples: usize) -> usize {
        samples.div_ceil(self.decimation)
    }

    /// The padding of the zero-phase filter (scipy's `padlen`), zero for a forward filter.
    #[must_use]
    pub fn padlen(&self) -> usize {
        match self.mode {
            Mode::ZeroPhase { padlen } => padlen,
            Mode::Forward(_) => 0,
        }
    }

    /// Device buffers this filter has allocated (constant once windows stop growing).
    #[must_use]
    pub fn device_allocations(&self) -> usize {
        // coefficients, transition and initial state, then the two scratch buffers
        self.device.as_ref().map_or(0, |d| {
            3 + d.states.allocations() + d.intermediate.allocations()
        })
    }

    /// Filters every channel of `input` into `output` (`channels x output_len(samples)`),
    /// queued on `client`.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`] when `output` is not `channels x output_len(samples)`,
    /// [`Error::InvalidParameter`] when a zero-phase filter gets `samples <= padlen` (scipy
    /// refuses those too) or a pass would cut a channel into more than [`MAX_BLOCKS`] blocks
    /// (over 1.2 x 10^8 samples at the default block length), [`Error::OverLimit`] over 32-bit
    /// indexing.
    pub fn run(
        &mut self,
        client: &Client,
        input: &DeviceArray,
        output: &DeviceArray,
    ) -> Result<()> {
        let (channels, samples) = (input.channels(), input.samples());
        let out_len = self.output_len(samples);
        output.expect_shape("sos filter: output", Shape::new(channels, out_len))?;
        if let Mode::ZeroPhase { padlen } = self.mode
            && samples <= padlen
        {
            return Err(Error::InvalidParameter {
                what: "sosfiltfilt: samples",
                reason: format!(
                    "{samples} samples per channel; the zero-phase filter needs more than \
                     padlen = {padlen} (scipy's sosfiltfilt refuses these too)"
                ),
            });
        }
        if input.is_empty() {
            return Ok(());
        }
        let (input, output) = (input.handle(), output.handle());
        let mut device = match self.device.take() {
            Some(device) => device,
            None => self.upload(client),
        };
        let result = match self.mode {
            Mode::Forward(_) => self.pass(
                client,
                &mut device,
                Pass {
                    src: input,
                    dst: output,
                    channels,
                    src_len: samples,
                    pad: 0,
                    reverse: false,
                    out_len,
                    out_offset: 0,
                    stride: self.decimation,
                },
            ),
            Mode::ZeroPhase { padlen } => {
                let extended = samples + 2 * padlen;
                Shape::new(channels, extended)
                    .values("sosfiltfilt intermediate")
                    .map(|values| device.intermediate.get(client, values))
                    .and_then(|intermediate| {
                        self.pass(
                            client,
                            &mut device,
                            Pass {
                                src: input,
                                dst: &intermediate,
                                channels,
                                src_len: samples,
                                pad: padlen,
                                reverse: false,
                                out_len: extended,
                                out_offset: 0,
                                stride: 1,
                            },
                        )?;
                        self.pass(
                            client,
                            &mut device,
                            Pass {
                                src: &intermediate,
                                dst: output,
                                channels,
                                src_len: extended,
                                pad: 0,
                                reverse: true,
                                out_len,
                                out_offset: padlen,
                                stride: self.decimation,
                            },
                        )
                    })
            }
        };
        self.device = Some(device);
        result
    }

    /// Uploads the coefficients, the block transition and the initial state.
    fn upload(&self, client: &Client) -> DeviceParts {
        let plan = Plan::new(&self.sections, self.block_len);
        let to_f32 = |values: &[f64]| -> Vec<f32> { values.iter().map(|&v| v as f32).collect() };
        DeviceParts {
            coefs: upload(client, &to_f32(&plan.coefs)),
            transition: upload(client, &to_f32(&plan.transition)),
            initial: upload(client, &to_f32(&self.initial_state)),
            states: GrowingBuffer::default(),
            intermediate: GrowingBuffer::default(),
        }
    }

    /// One direction: zero-start blocks, the scan over blocks, the finishing blocks.
    fn pass(&self, client: &Client, device: &mut DeviceParts, pass: Pass<'_>) -> Result<()> {
        let sections = self.sections.len();
        let virtual_len = pass.src_len + 2 * pass.pad;
        let blocks = virtual_len.div_ceil(self.block_len);
        if blocks > MAX_BLOCKS {
            return Err(Error::InvalidParameter {
                what: "sos filter: samples",
                reason: format!(
                    "{virtual_len} samples per channel in blocks of {} make {blocks} blocks, \
                     over {MAX_BLOCKS} (a driver loop limit): use longer blocks or shorter \
                     windows",
                    self.block_len
                ),
            });
        }
        let units = Shape::new(pass.channels, blocks).values("sos filter blocks")?;
        let state_values = Shape::new(units, 2 * sections).values("sos filter states")?;
        Shape::new(pass.channels, virtual_len).values("sos filter virtual input")?;
        let states = device.states.get(client, state_values);
        let src_values = pass.channels * pass.src_len;
        let dst_values = pass.channels * pass.out_len;
        // All sizes below fit u32: each is bounded by a checked product above.
        let (channels, src_len, pad, block_len, blocks32) = (
            pass.channels as u32,
            pass.src_len as u32,
            pass.pad as u32,
            self.block_len.min(virtual_len) as u32,
            blocks as u32,
        );
        let layout = UnitLayout::of(client);
        for finish in [false, true] {
            // SAFETY: `src` holds `src_values` and `dst` `dst_values` values (typed arrays of
            // those shapes, checked where they were made, or allocated for them), `states` holds `units * 2 * sections`, `coefs`
            // `COEFS * sections`; the kernel bounds its unit by `channels * blocks`, reads the
            // virtual sequence only inside each channel's `src_len` values (`src_len > pad`),
            // and writes only output indices below `out_len`.
            unsafe {
                kernel::sos_blocks::launch_unchecked(
                    client,
                    layout.cube_count(units),
                    layout.cube_dim(),
                    BufferArg::from_raw_parts(pass.src.clone(), src_values),
                    BufferArg::from_raw_parts(pass.dst.clone(), dst_values),
                    BufferArg::from_raw_parts(states.clone(), state_values),
                    BufferArg::from_raw_parts(device.coefs.clone(), COEFS * sections),
                    channels,
                    src_len,
                    pad,
                    block_len,
                    blocks32,
                    pass.out_len as u32,
                    pass.out_offset as u32,
                    pass.stride as u32,
                    sections,
                    pass.reverse,
                    finish,
                    layout.blocked(),
                );
            }
            if !finish {
                let dim = 2 * sections;
                // SAFETY: as above; one unit per channel, `transition` holds `dim * dim`
                // values and `initial` `dim`.
                unsafe {
                    kernel::sos_scan::launch_unchecked(
                        client,
                        layout.cube_count(pass.channels),
                        layout.cube_dim(),
                        BufferArg::from_raw_parts(pass.src.clone(), src_values),
                        BufferArg::from_raw_parts(states.clone(), state_values),
                        BufferArg::from_raw_parts(device.transition.clone(), dim * dim),
                        BufferArg::from_raw_parts(device.initial.clone(), dim),
                        channels,
                        src_len,
                        pad,
                        blocks32,
                        sections,
                        pass.reverse,
                        layout.blocked(),
                    );
                }
            }
        }
        Ok(())
    }
}

/// One direction of a filter run.
struct Pass<'a> {
    src: &'a Handle,
    dst: &'a Handle,
    channels: usize,
    src_len: usize,
    pad: usize,
    reverse: bool,
    out_len: usize,
    out_offset: usize,
    stride: usize,
}

impl Stage for SosFilter {
    fn name(&self) -> &str {
        match self.mode {
            Mode::Forward(_) => "sosfilt",
            Mode::ZeroPhase { .. } => "sosfiltfilt",
        }
    }

    fn settling(&self) -> usize {
        self.settling
    }

    fn device_allocations(&self) -> usize {
        SosFilter::device_allocations(self)
    }

    /// The block states and the zero-phase intermediate for the longest window.
    fn reserve(&mut self, client: &Client, channels: usize, max_samples: usize) -> Result<()> {
        let padlen = self.padlen();
        let virtual_len = max_samples + 2 * padlen;
        let blocks = virtual_len.div_ceil(self.block_len);
        let units = Shape::new(channels, blocks).values("sos filter blocks")?;
        let states = Shape::new(units, 2 * self.sections.len()).values("sos filter states")?;
        let intermediate = Shape::new(channels, virtual_len).values("sosfiltfilt intermediate")?;
        if self.device.is_none() {
            self.device = Some(self.upload(client));
        }
        if let Some(device) = &mut self.device {
            device.states.get(client, states);
            if padlen > 0 {
                device.intermediate.get(client, intermediate);
            }
        }
        Ok(())
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        if self.decimation != 1 {
            return Err(Error::InvalidParameter {
                what: "sos filter stage",
                reason: "a decimating filter changes the window length; use decimate()".into(),
            });
        }
        self.run(client, input, output)
    }
}

#[cfg(test)]
mod tests {
    //! The blocked kernels against an independent sample-by-sample `f64` run of the same
    //! cascade ([`crate::design::host::sosfilt`], direct form II transposed, none of the
    //! kernels' block transition matrices nor their increment form), on random stable
    //! sections (design-independent; the scipy comparisons live in `tests/filters.rs` and
    //! `tests/low_cut.rs`).
    use dspk_core::test_util::{Rng, assert_close, for_each_runtime};

    use super::*;
    use crate::design::host::sosfilt;
    use crate::design::sosfilt_zi;

    /// `n` random stable sections (pole radius 0.2 to 0.97).
    fn random_sos(rng: &mut Rng, n: usize) -> Sos {
        let sections = (0..n)
            .map(|_| {
                let (r, theta) = (rng.uniform(0.2, 0.97), rng.uniform(0.0, 3.1));
                [
                    rng.uniform(-1.0, 1.0),
                    rng.uniform(-1.0, 1.0),
                    rng.uniform(-1.0, 1.0),
                    1.0,
                    -2.0 * r * theta.cos(),
                    r * r,
                ]
            })
            .collect();
        Sos::new(sections).unwrap()
    }

    /// `f64` forward filter of `x` from `zi * x[0]` (one `[z0, z1]` per section).
    fn forward(sos: &Sos, zi: &[[f64; 2]], x: &[f64]) -> Vec<f64> {
        let mut state: Vec<[f64; 2]> = zi.iter().map(|z| [z[0] * x[0], z[1] * x[0]]).collect();
        sosfilt(sos, x, Some(&mut state)).unwrap()
    }

    /// `f64` zero-phase filter with odd padding, as scipy's `sosfiltfilt`.
    fn zero_phase(sos: &Sos, zi: &[[f64; 2]], x: &[f64], pad: usize) -> Vec<f64> {
        let n = x.len();
        let mut ext: Vec<f64> = (0..pad).rev().map(|i| 2.0 * x[0] - x[i + 1]).collect();
        ext.extend_from_slice(x);
        ext.extend((0..pad).map(|i| 2.0 * x[n - 1] - x[n - 2 - i]));
        let mut y = forward(sos, zi, &ext);
        y.reverse();
        let mut y = forward(sos, zi, &y);
        y.reverse();
        y[pad..pad + n].to_vec()
    }

    /// scipy's `sosfiltfilt` raises for `len(x) <= padlen`, empty inputs included; so must the
    /// zero-phase filter (and the IIR decimator built on it), while a forward filter of an
    /// empty window is a no-op.
    #[test]
    fn zero_phase_refuses_inputs_not_longer_than_padlen() {
        for_each_runtime(|_, client| {
            let sos = random_sos(&mut Rng::new(3), 2);
            for (channels, samples) in [(2, 0), (0, 0), (3, 15), (1, 2)] {
                let input = DeviceArray::empty(client, channels, samples).unwrap();
                let output = DeviceArray::empty(client, channels, samples).unwrap();
                let mut filter = SosFilter::zero_phase(&sos).unwrap();
                let result = filter.run(client, &input, &output);
                assert!(
                    matches!(result, Err(Error::InvalidParameter { .. })),
                    "{channels}x{samples}: {result:?}"
                );
                let mut decimate =
                    crate::Decimate::new(2, crate::design::host::DecimateFilter::Iir).unwrap();
                let decimated =
                    DeviceArray::empty(client, channels, decimate.output_len(samples)).unwrap();
                let result = decimate.run(client, &input, &decimated);
                assert!(
                    matches!(result, Err(Error::InvalidParameter { .. })),
                    "decimate {channels}x{samples}: {result:?}"
                );
                let mut forward = SosFilter::forward(&sos, Initial::SteadyState).unwrap();
                forward.run(client, &input, &output).unwrap();
            }
        });
    }

    #[test]
    fn blocked_filter_equals_sample_by_sample() {
        for_each_runtime(|_, client| {
            let mut rng = Rng::new(11);
            for (channels, samples, n_sections, block_len, pad) in [
                (1, 1, 1, 256, 0),
                (3, 17, 2, 4, 5),
                (2, 1001, 3, 64, 27),
                (5, 4099, 1, 256, 9),
                (4, 999, 4, 1, 3),
            ] {
                let sos = random_sos(&mut rng, n_sections);
                let zi = sosfilt_zi(&sos).unwrap();
                let x: Vec<f64> = (0..channels * samples)
                    .map(|_| rng.uniform(-100.0, 100.0) + 300.0)
                    .collect();
                let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
                let input = DeviceArray::from_host(client, &x32, channels, samples).unwrap();
                let output = DeviceArray::empty(client, channels, samples).unwrap();
                let mut modes = vec![
                    Mode::Forward(Initial::Zero),
                    Mode::Forward(Initial::SteadyState),
                ];
                if samples > pad {
                    modes.push(Mode::ZeroPhase { padlen: pad });
                }
                for mode in modes {
                    let mut filter = SosFilter::from_parts(&sos, mode, 0)
                        .unwrap()
                        .with_block_len(block_len)
                        .unwrap();
                    filter.run(client, &input, &output).unwrap();
                    let actual = output.to_host(client).unwrap();
                    let zero = vec![[0.0; 2]; zi.len()];
                    let expected: Vec<f64> = x
                        .chunks(samples)
                        .flat_map(|ch| match mode {
                            Mode::Forward(Initial::Zero) => forward(&sos, &zero, ch),
                            Mode::Forward(Initial::SteadyState) => forward(&sos, &zi, ch),
                            Mode::ZeroPhase { padlen } => zero_phase(&sos, &zi, ch, padlen),
                        })
                        .collect();
                    let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    assert_close(
                        &format!("{mode:?} {channels}x{samples} blocks of {block_len}"),
                        &actual,
                        &expected,
                        2e-5 * scale,
                        0.0,
                    );
                }
            }
        });
    }
}
