//! Host side of channel mixing: the uploaded mixing matrix, the launch and the pipeline stage.

use cubecl::prelude::*;
use cubecl::server::Handle;

use super::kernel;
use crate::array::upload;
use crate::launch::UnitLayout;
use crate::{DeviceArray, Error, Result, Shape, Stage, linalg};

/// Output channels per unit of the dense kernel (each loaded input value serves this many).
const DENSE_ROWS: usize = 8;
/// Samples per unit (each loaded weight serves this many).
const SPAN: usize = 4;
/// Samples per unit on the cpu runtime, where they are consecutive: one 8-lane vector.
const CPU_SPAN: usize = 8;
/// Units of a cube taking consecutive samples of one row (a warp on NVIDIA hardware).
const LANES: usize = 32;
/// Rows (groups of [`LANES`] units) of a cube, at the same samples: `LANES * SLOTS` is the cube.
const SLOTS: usize = 8;

/// Units covering `rows` rows of `stride` offsets, in whole cubes of [`SLOTS`] rows and
/// [`LANES`] offsets (see the kernels' `row_and_offset`).
fn mixing_units(rows: usize, stride: usize) -> usize {
    rows.div_ceil(SLOTS) * stride.div_ceil(LANES) * LANES * SLOTS
}

/// A channel-mixing matrix on the device, uploaded once and applied to many windows with
/// [`mix_channels`]: output channel `c` is `sum_k weights[c, k] * x[indices[c, k]]`, with
/// `taps` entries per output channel.
///
/// This is how whitening is applied: a full ZCA matrix is dense (`taps == channels`), a local
/// whitening (each channel from its 32 nearest) is sparse. Weights are stored as `f32`.
#[derive(Debug, Clone)]
pub struct ChannelMixing {
    channels: usize,
    taps: usize,
    weights: Handle,
    /// `None` for a dense matrix (`weights` row-major `[channels, channels]`).
    indices: Option<Handle>,
}

impl ChannelMixing {
    /// Uploads a dense `channels x channels` matrix, row-major (`matrix[c * channels + k]` is the
    /// weight of input channel `k` in output channel `c`): the product `matrix @ x`.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `matrix` does not hold `channels * channels` values,
    /// [`Error::InvalidParameter`] for zero channels or a weight that is not finite in `f32`,
    /// [`Error::OverLimit`] when the matrix exceeds `u32::MAX` values.
    pub fn from_dense(client: &Client, matrix: &[f64], channels: usize) -> Result<Self> {
        let len = Shape::new(channels, channels).values("mixing matrix")?;
        if channels == 0 {
            return Err(zero_channels());
        }
        if matrix.len() != len {
            return Err(Error::Shape {
                what: "dense mixing matrix",
                expected: len,
                actual: matrix.len(),
                unit: "values",
            });
        }
        let weights = finite_f32(matrix)?;
        Ok(Self {
            channels,
            taps: channels,
            weights: upload(client, &weights),
            indices: None,
        })
    }

    /// Replaces the weights of a dense matrix in place (`channels x channels`, row-major, as
    /// [`from_dense`](Self::from_dense)), without allocating: for a matrix that changes from
    /// window to window (drift correction times whitening). Kernels queued before read the old
    /// weights, kernels queued after the new ones. Clones share the buffer and see the change.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidParameter`] for a sparse matrix or a weight that is not finite in `f32`,
    /// [`Error::Shape`] when `matrix` does not hold `channels * channels` values.
    pub fn set_dense(&mut self, client: &Client, matrix: &[f64]) -> Result<()> {
        if self.indices.is_some() {
            return Err(Error::InvalidParameter {
                what: "channel mixing: set_dense",
                reason: "the matrix is sparse; make a dense one with from_dense".to_string(),
            });
        }
        if matrix.len() != self.channels * self.channels {
            return Err(Error::Shape {
                what: "dense mixing matrix",
                expected: self.channels * self.channels,
                actual: matrix.len(),
                unit: "values",
            });
        }
        let weights = finite_f32(matrix)?;
        client.write(&self.weights, cubecl::bytes::Bytes::from_elems(weights));
        Ok(())
    }

    /// Uploads a sparse matrix given as `taps` (input channel, weight) pairs per output channel,
    /// row-major `[channels, taps]` (`indices[c * taps + k]`, `weights[c * taps + k]`; `taps`
    /// is `indices.len() / channels`). Repeated indices in a row add up. When `taps ==
    /// channels` the matrix is stored dense (the faster kernel), which sums the same products in
    /// input-channel order.
    ///
    /// # Errors
    ///
    /// [`Error::Shape`] when `indices` and `weights` differ in length or are not a whole number
    /// of rows, [`Error::InvalidParameter`] for zero channels, zero taps, an index not below
    /// `channels` or a weight that is not finite in `f32`, [`Error::OverLimit`] over `u32::MAX`
    /// values.
    pub fn from_sparse(
        client: &Client,
        indices: &[usize],
        weights: &[f64],
        channels: usize,
    ) -> Result<Self> {
        if channels == 0 {
            return Err(zero_channels());
        }
        if indices.len() != weights.len() {
            return Err(Error::Shape {
                what: "sparse mixing weights (one per index)",
                expected: indices.len(),
                actual: weights.len(),
                unit: "values",
            });
        }
        if !indices.len().is_multiple_of(channels) {
            return Err(Error::Shape {
                what: "sparse mixing indices (the same number per channel)",
                expected: indices.len().next_multiple_of(channels),
                actual: indices.len(),
                unit: "values",
            });
        }
        let taps = indices.len() / channels;
        Shape::new(channels, taps).values("mixing matrix")?;
        if taps == 0 {
            return Err(Error::InvalidParameter {
                what: "channel mixing: taps",
                reason: "each output channel needs at least one input channel".into(),
            });
        }
        if let Some(position) = indices.iter().position(|&i| i >= channels) {
            return Err(Error::InvalidParameter {
                what: "channel mixing: index",
                reason: format!(
                    "output channel {} tap {} names input channel {}, not below {channels}",
                    position / taps,
                    position % taps,
                    indices[position]
                ),
            });
        }
        if taps == channels {
            let mut dense = vec![0.0; channels * channels];
            for (position, (&index, &weight)) in indices.iter().zip(weights).enumerate() {
                dense[(position / taps) * channels + index] += weight;
            }
            return Self::from_dense(client, &dense, channels);
        }
        let weights = finite_f32(weights)?;
        // Every index is below `channels`, which fits in u32 (the mixing matrix check above).
        let indices: Vec<u32> = indices.iter().map(|&i| i as u32).collect();
        Ok(Self {
            channels,
            taps,
            weights: upload(client, &weights),
            indices: Some(upload(client, &indices)),
        })
    }

    /// Input (and output) channels.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Input channels per output channel (`channels` when dense).
    #[must_use]
    pub fn taps(&self) -> usize {
        self.taps
    }

    /// Whether the matrix is stored dense.
    #[must_use]
    pub fn is_dense(&self) -> bool {
        self.indices.is_none()
    }
}

fn zero_channels() -> Error {
    Error::InvalidParameter {
        what: "channel mixing: channels",
        reason: "a mixing matrix needs at least one channel".into(),
    }
}

/// `values` as `f32`, refusing any that is not finite there.
fn finite_f32(values: &[f64]) -> Result<Vec<f32>> {
    values
        .iter()
        .enumerate()
        .map(|(position, &v)| {
            let w = v as f32;
            if w.is_finite() {
                Ok(w)
            } else {
                Err(Error::InvalidParameter {
                    what: "channel mixing: weight",
                    reason: format!("weight {position} is {v}, not finite in f32"),
                })
            }
        })
        .collect()
}

/// Mixes the channels of a `[channels, samples]` `f32` window (channel-major):
/// `out[c, t] = sum_k weights[c, k] * x[indices[c, k], t]`, i.e. `W @ x` with numpy for the
/// dense matrix `W` that `mixing` holds.
///
/// `input` and `output` have the same shape and distinct buffers.
///
/// Precision: each output is a sum of `taps` `f32` products in input order, within
/// `taps * 2^-24 * sum_k |w[c, k] * x[k, t]|` of the exact value (typically a few roundings;
/// tested within `1e-5` of that sum for 384 channels).
///
/// NaN: an output is NaN when any input it draws on is NaN (even with a zero weight, as in
/// numpy), so a dense matrix spreads a NaN over its whole sample; a sparse one only to the
/// outputs whose taps name the channel. No sample reaches another.
///
/// # Errors
///
/// [`Error::ShapeMismatch`] when `input` does not have the matrix's channels or `output`'s
/// shape differs from `input`'s.
pub fn mix_channels(
    client: &Client,
    input: &DeviceArray,
    output: &DeviceArray,
    mixing: &ChannelMixing,
) -> Result<()> {
    input.expect_shape(
        "channel mixing: input",
        Shape::new(mixing.channels, input.samples()),
    )?;
    output.expect_shape("channel mixing: output", input.shape())?;
    let (values, channels, samples) = (input.len(), input.channels(), input.samples());
    if values == 0 {
        return Ok(());
    }
    // The kernels bound their unit index by `units` and clamp sample indices below `samples`;
    // both arrays hold `channels * samples` values, and the matrix's buffers were sized and
    // its indices checked when it was made.
    let (input, output) = (input.handle(), output.handle());
    let layout = UnitLayout::of(client);
    let span = if layout.blocked() { CPU_SPAN } else { SPAN };
    let stride = samples.div_ceil(span);
    // Unit counts exceed `values` by less than a cube per row group and sample block; the
    // check below keeps them in u32 with the sizes.
    Shape::new(mixing_units(channels, stride), 1).values("channel mixing units")?;
    let (samples32, stride32) = (samples as u32, stride as u32);
    match &mixing.indices {
        None => {
            let units = mixing_units(channels.div_ceil(DENSE_ROWS), stride);
            // SAFETY: the buffers hold the lengths passed (typed arrays, and the matrix's own); each unit with index
            // below `units` reads rows and input channels below `channels` and samples clamped
            // below `samples`, and writes only rows below `channels`, samples below `samples`.
            unsafe {
                kernel::mix_dense::launch_unchecked(
                    client,
                    layout.cube_count_of(units, (LANES * SLOTS) as u32),
                    layout.cube_dim_of((LANES * SLOTS) as u32),
                    BufferArg::from_raw_parts(input.clone(), values),
                    BufferArg::from_raw_parts(mixing.weights.clone(), channels * channels),
                    BufferArg::from_raw_parts(output.clone(), values),
                    channels as u32,
                    samples32,
                    stride32,
                    units as u32,
                    DENSE_ROWS,
                    span,
                    LANES,
                    SLOTS,
                    layout.blocked(),
                );
            }
        }
        Some(indices) => {
            let taps = channels * mixing.taps;
            let units = mixing_units(channels, stride);
            // SAFETY: as above; every stored index is below `channels` (checked when the matrix
            // was made), so `indices[c * taps + k] * samples + t` stays inside the input.
            unsafe {
                kernel::mix_sparse::launch_unchecked(
                    client,
                    layout.cube_count_of(units, (LANES * SLOTS) as u32),
                    layout.cube_dim_of((LANES * SLOTS) as u32),
                    BufferArg::from_raw_parts(input.clone(), values),
                    BufferArg::from_raw_parts(indices.clone(), taps),
                    BufferArg::from_raw_parts(mixing.weights.clone(), taps),
                    BufferArg::from_raw_parts(output.clone(), values),
                    channels as u32,
                    samples32,
                    mixing.taps as u32,
                    stride32,
                    units as u32,
                    span,
                    LANES,
                    SLOTS,
                    layout.blocked(),
                );
            }
        }
    }
    Ok(())
}

/// Whitening (or any channel mixing) as a pipeline [`Stage`] (`"whitening"`): applies its
/// [`ChannelMixing`] with [`mix_channels`]. Works sample by sample: no settling, no scratch.
#[derive(Debug, Clone)]
pub struct Whitening {
    mixing: ChannelMixing,
}

impl Whitening {
    /// A stage applying `mixing`.
    #[must_use]
    pub fn new(mixing: ChannelMixing) -> Self {
        Self { mixing }
    }

    /// The stage applying `matrix` (from [`linalg::zca`] or [`linalg::local_zca`]: row `c`
    /// holds channel `c`'s weights on its `k` channels), uploaded to `client`'s device once
    /// ([`ChannelMixing::from_sparse`]; stored dense when `k` is every channel).
    ///
    /// # Errors
    ///
    /// As [`ChannelMixing::from_sparse`]: a weight that is not finite in `f32`, or more than
    /// `u32::MAX` values.
    pub fn from_matrix(client: &Client, matrix: &linalg::WhiteningMatrix) -> Result<Self> {
        let indices: Vec<usize> = matrix.indices().iter().map(|&i| i as usize).collect();
        let mixing = ChannelMixing::from_sparse(client, &indices, matrix.weights(), matrix.n())?;
        Ok(Self::new(mixing))
    }

    /// The matrix applied.
    #[must_use]
    pub fn mixing(&self) -> &ChannelMixing {
        &self.mixing
    }
}

impl Stage for Whitening {
    fn name(&self) -> &str {
        "whitening"
    }

    fn settling(&self) -> usize {
        0
    }

    fn apply(&mut self, client: &Client, input: &DeviceArray, output: &DeviceArray) -> Result<()> {
        mix_channels(client, input, output, &self.mixing)
    }
}
