//! The unpack kernels. Layout: `[channels, samples]`, channel-major, `samples` per channel.
//! Units are bounded by the value count passed in, never by a buffer's `len()` (in a kernel
//! that is the allocation's length, which is longer when a window is shorter than the
//! workspace's largest).

use cubecl::prelude::*;

use crate::launch::unit_index;

/// 16-bit stored values, two per little-endian 32-bit word (WGSL has no 16-bit integers): value
/// `2w` is the low half of word `w`, value `2w + 1` the high half. Each unit unpacks one word.
/// `out[v] = half * gains[c] + offsets[c]` with `c = v / samples`.
#[cube(launch_unchecked)]
pub(super) fn unpack_16(
    words: &[u32],
    gains: &[f32],
    offsets: &[f32],
    out: &mut [f32],
    values: u32,
    samples: u32,
    #[comptime] signed: bool,
    #[comptime] blocked: bool,
) {
    let word_index = unit_index(blocked);
    let values = usize::cast_from(values);
    if word_index < values.div_ceil(2) {
        let word = words[word_index];
        let first = word_index * 2;
        let per_channel = usize::cast_from(samples);
        if first < values {
            let channel = first / per_channel;
            out[first] = half_to_f32(word & 0xFFFF, signed) * gains[channel] + offsets[channel];
        }
        let second = first + 1;
        if second < values {
            let channel = second / per_channel;
            out[second] = half_to_f32(word >> 16, signed) * gains[channel] + offsets[channel];
        }
    }
}

/// A 16-bit value held in the low bits of `bits`, as `f32`: two's complement when `signed`,
/// unsigned otherwise.
///
/// Sign extension uses `(x ^ 0x8000) - 0x8000` on an `i32` in `0..65536`: a right shift of a
/// value cast from `u32` compiles to a logical shift on LLVM-backed runtimes (cpu, cuda), which
/// would turn -1 into 65535 there.
#[cube]
fn half_to_f32(bits: u32, #[comptime] signed: bool) -> f32 {
    let value = i32::cast_from(bits);
    if signed {
        f32::cast_from((value ^ 0x8000) - 0x8000)
    } else {
        f32::cast_from(value)
    }
}

/// 32-bit stored values (`i32` or `f32`), one per unit: `out[v] = values[v] * gains[c] +
/// offsets[c]`.
#[cube(launch_unchecked)]
pub(super) fn scale_32<T: Numeric>(
    values: &[T],
    gains: &[f32],
    offsets: &[f32],
    out: &mut [f32],
    count: u32,
    samples: u32,
    #[comptime] blocked: bool,
) {
    let index = unit_index(blocked);
    if index < usize::cast_from(count) {
        let channel = index / usize::cast_from(samples);
        out[index] = f32::cast_from(values[index]) * gains[channel] + offsets[channel];
    }
}
