//! Common reference kernels: one unit per sample `t`, reading the column `x[:, t]` of a
//! channel-major `[channels, samples]` window (consecutive units read consecutive addresses).

use cubecl::prelude::*;

use crate::launch::unit_index;

/// Bits of an `f32` outside its sign: above this, a NaN.
const ABS_MASK: u32 = 0x7FFF_FFFF;
/// The exponent bits of an `f32`: all set for an infinity or a NaN.
const EXPONENT: u32 = 0x7F80_0000;

/// Channels summed into one partial before it joins the total (blocked summation: the
/// rounding error grows with `BLOCK + channels / BLOCK` rather than with `channels`).
const BLOCK: u32 = 16;
/// Channels whose loads a median pass issues together.
const CHUNK: u32 = 16;

/// `out[c, t] = x[c, t] - mean_c x[:, t]`, the mean summed in `f32` in blocks of [`BLOCK`]
/// channels. Infinities and NaN propagate as in `numpy.mean`.
#[cube(launch_unchecked)]
pub(super) fn subtract_mean(
    input: &[f32],
    output: &mut [f32],
    channels: u32,
    samples: u32,
    #[comptime] blocked: bool,
) {
    let t = unit_index(blocked);
    let n = usize::cast_from(samples);
    if t < n {
        let count = usize::cast_from(channels);
        let block = BLOCK as usize;
        let mut sum = 0.0f32;
        for start in range_stepped(0, count, block) {
            // Unrolled, so the block's loads are in flight together.
            let mut partial = 0.0f32;
            #[unroll]
            for i in 0..BLOCK {
                let c = start + i as usize;
                let value = input[min(c, count - 1) * n + t];
                partial += select(c < count, value, 0.0f32);
            }
            sum += partial;
        }
        let mean = sum / f32::cast_from(channels);
        for c in 0..count {
            let index = c * n + t;
            output[index] = input[index] - mean;
        }
    }
}

/// `out[c, t] = x[c, t] - median_c x[:, t]`, the median as `numpy.median` defines it (the mean
/// of the two middle values for an even channel count), or with `lower != 0` as `torch.median`
/// defines it (the lower of the two middle values), NaN when the column holds a NaN.
///
/// The order statistics are selected exactly on the order-preserving `u32` key of each value's
/// bits, two bits per pass over the column (16 passes, loads issued [`CHUNK`] channels at a
/// time), then one pass finds the next larger value (for an even count) and any NaN.
#[cube(launch_unchecked)]
pub(super) fn subtract_median(
    input: &[f32],
    output: &mut [f32],
    channels: u32,
    samples: u32,
    lower: u32,
    #[comptime] blocked: bool,
) {
    let t = unit_index(blocked);
    let n = usize::cast_from(samples);
    if t < n {
        let count = usize::cast_from(channels);
        // Lower middle (0-based rank) and upper middle.
        let high_rank = channels / 2;
        let low_rank = (channels - 1) / 2;
        let chunk = CHUNK as usize;

        let mut low = 0u32;
        for pass in 0..16u32 {
            let shift = 30 - 2 * pass;
            let one = low | (1u32 << shift);
            let two = low | (2u32 << shift);
            let three = low | (3u32 << shift);
            let mut below_one = 0u32;
            let mut below_two = 0u32;
            let mut below_three = 0u32;
            for start in range_stepped(0, count, chunk) {
                let mut keys = Array::<u32>::new(CHUNK as usize);
                #[unroll]
                for i in 0..CHUNK {
                    keys[i as usize] = order_key(u32::reinterpret(
                        input[min(start + i as usize, count - 1) * n + t],
                    ));
                }
                #[unroll]
                for i in 0..CHUNK {
                    let key = keys[i as usize];
                    let valid = start + (i as usize) < count;
                    below_one += select(valid && key < one, 1u32, 0u32);
                    below_two += select(valid && key < two, 1u32, 0u32);
                    below_three += select(valid && key < three, 1u32, 0u32);
                }
            }
            // The largest candidate with at most `low_rank` keys below it.
            low = select(
                below_three <= low_rank,
                three,
                select(
                    below_two <= low_rank,
                    two,
                    select(below_one <= low_rank, one, low),
                ),
            );
        }

        // Keys at or below the lower middle, the smallest key above it, and any NaN.
        let mut at_or_below = 0u32;
        let mut next = 0xFFFF_FFFFu32;
        let mut nan = false;
        for c in 0..count {
            let bits = u32::reinterpret(input[c * n + t]);
            let key = order_key(bits);
            at_or_below += select(key <= low, 1u32, 0u32);
            next = select(key > low && key < next, key, next);
            nan = nan || (bits & ABS_MASK) > EXPONENT;
        }
        let high = select(at_or_below > high_rank, low, next);
        let low_value = f32::reinterpret(key_bits(low));
        let high_value = f32::reinterpret(key_bits(high));
        // Halves first: exact (short of subnormals) and never overflowing.
        let middle = select(
            low_rank == high_rank || lower != 0,
            low_value,
            low_value * 0.5f32 + high_value * 0.5f32,
        );
        let median = select(nan, f32::reinterpret(0x7FC0_0000u32), middle);
        for c in 0..count {
            let index = c * n + t;
            output[index] = input[index] - median;
        }
    }
}

/// A key whose unsigned order is the order of the `f32` with these bits (negative values have
/// all bits flipped, non-negative ones the sign bit).
#[cube]
fn order_key(bits: u32) -> u32 {
    let negative = (bits & 0x8000_0000u32) != 0;
    bits ^ select(negative, 0xFFFF_FFFFu32, 0x8000_0000u32)
}

/// The `f32` bits of an [`order_key`].
#[cube]
fn key_bits(key: u32) -> u32 {
    let non_negative = (key & 0x8000_0000u32) != 0;
    key ^ select(non_negative, 0x8000_0000u32, 0xFFFF_FFFFu32)
}
