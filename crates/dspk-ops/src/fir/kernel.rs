//! The polyphase FIR kernel. Layout: `[channels, samples]`, channel-major.

use cubecl::prelude::*;

/// One output per unit: `y[c, m] = sum_j h[j] * xu[m * down + shift - j]`, where `xu` is the
/// channel upsampled by `up` with zeros (`xu[i] = x[i / up]` when `i % up == 0` and
/// `i / up < src_len`, else 0; indices below zero are 0). With `up = down = 1` and
/// `shift = 0` this is a causal FIR filter from a zero state (`lfilter(h, [1], x)`); with
/// `shift = (len(h) - 1) / 2` it is scipy's `upfirdn` output as `resample_poly` keeps it.
/// Only the taps of the output's phase are visited (`ceil(taps / up)` per output). Every
/// length is passed in: a buffer's `len()` in a kernel is its allocation's, which may be
/// longer.
#[allow(clippy::too_many_arguments)]
#[cube(launch_unchecked)]
pub(super) fn polyphase_fir(
    src: &[f32],
    taps: &[f32],
    dst: &mut [f32],
    channels: u32,
    src_len: u32,
    out_len: u32,
    taps_len: u32,
    up: u32,
    down: u32,
    shift: u32,
) {
    let unit = ABSOLUTE_POS;
    let per_channel = usize::cast_from(out_len);
    if unit < usize::cast_from(channels) * per_channel {
        let channel = unit / per_channel;
        let m = u32::cast_from(unit % per_channel);
        let src_base = channel * usize::cast_from(src_len);
        let i0 = m * down + shift;
        let phase = i0 % up;
        let phase_taps = taps_len.div_ceil(up);
        let mut acc = f32::new(0.0);
        for k in 0..phase_taps {
            let j = phase + k * up;
            if j < taps_len && j <= i0 {
                let xi = (i0 - j) / up;
                if xi < src_len {
                    acc += taps[usize::cast_from(j)] * src[src_base + usize::cast_from(xi)];
                }
            }
        }
        dst[unit] = acc;
    }
}
