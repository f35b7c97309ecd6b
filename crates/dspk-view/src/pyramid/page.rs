//! One page of a pyramid: its in-page levels folded from the page's samples, and how a page
//! is written to and checked in a cache file.

use dspk_core::rng::SplitMix64;

use crate::pyramid::layout::PyramidLayout;
use crate::{Envelope, Error, Result};

/// The values of one page: for each in-page level its minima `[channels, page_buckets]` then
/// its maxima (buckets past the recording's end empty), and the NaN samples of each channel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PageData {
    pub(crate) values: Box<[f32]>,
    pub(crate) nan: Box<[u32]>,
}

impl PageData {
    /// The page whose level 0 is `level0` (the envelope of the page's samples on the base
    /// bucket grid, NaN counted), with every coarser in-page level folded from it.
    pub(crate) fn from_level0(layout: &PyramidLayout, level0: &Envelope) -> Result<Self> {
        let channels = layout.channels();
        let nan_counts = level0.nan_counts().ok_or(Error::invalid(
            "pyramid: page fold",
            "the page's level-0 envelope did not count NaN samples",
        ))?;
        let width = level0.columns().len();
        if level0.channels() != channels || width > layout.page_buckets(0) {
            return Err(Error::Shape {
                what: "pyramid: page level 0 (channels x buckets)",
                expected: channels * layout.page_buckets(0),
                actual: level0.channels() * width,
            });
        }
        let mut values = vec![0f32; layout.page_values()].into_boxed_slice();
        // Level 0, copied with the full page's stride; buckets past the end stay empty.
        let stride = layout.page_buckets(0);
        let (min, max) = values[..2 * channels * stride].split_at_mut(channels * stride);
        for c in 0..channels {
            let (row_min, row_max) = (
                &mut min[c * stride..][..stride],
                &mut max[c * stride..][..stride],
            );
            row_min[..width].copy_from_slice(&level0.min()[c * width..][..width]);
            row_max[..width].copy_from_slice(&level0.max()[c * width..][..width]);
            row_min[width..].fill(f32::INFINITY);
            row_max[width..].fill(f32::NEG_INFINITY);
        }
        let factor = layout.factor() as usize;
        for level in 1..layout.page_levels() {
            let (below, above) = values.split_at_mut(layout.level_offset(level));
            let from = &below[layout.level_offset(level - 1)..];
            let (fine, wide) = (layout.page_buckets(level - 1), layout.page_buckets(level));
            let (from_min, from_max) = from.split_at(channels * fine);
            let (to_min, to_max) = above[..2 * channels * wide].split_at_mut(channels * wide);
            for c in 0..channels {
                for j in 0..wide {
                    let children = c * fine + j * factor..c * fine + (j + 1) * factor;
                    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
                    for (&cmin, &cmax) in from_min[children.clone()].iter().zip(&from_max[children])
                    {
                        merge(&mut lo, &mut hi, cmin, cmax);
                    }
                    to_min[c * wide + j] = lo;
                    to_max[c * wide + j] = hi;
                }
            }
        }
        let nan = nan_counts
            .chunks_exact(width)
            .map(|row| row.iter().fold(0u32, |a, &b| a.saturating_add(b)))
            .collect();
        Ok(Self { values, nan })
    }

    /// The minima of in-page level `level`, `[channels, page_buckets]`.
    pub(crate) fn level_min(&self, layout: &PyramidLayout, level: usize) -> &[f32] {
        let n = layout.channels() * layout.page_buckets(level);
        &self.values[layout.level_offset(level)..][..n]
    }

    /// The maxima of in-page level `level`, `[channels, page_buckets]`.
    pub(crate) fn level_max(&self, layout: &PyramidLayout, level: usize) -> &[f32] {
        let n = layout.channels() * layout.page_buckets(level);
        &self.values[layout.level_offset(level) + n..][..n]
    }

    /// The page as a cache slot: the values and NaN counts little-endian, then the checksum
    /// of those bytes (seeded with the page's index, so a slot copied to another place fails).
    pub(crate) fn encode(&self, page: u64, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(4 * (self.values.len() + self.nan.len()) + 8);
        for v in &self.values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for n in &self.nan {
            out.extend_from_slice(&n.to_le_bytes());
        }
        let sum = checksum(page, out);
        out.extend_from_slice(&sum.to_le_bytes());
    }

    /// The page from a cache slot written by [`encode`](Self::encode), or `None` when its
    /// checksum does not match (a damaged or half-written slot).
    pub(crate) fn decode(layout: &PyramidLayout, page: u64, slot: &[u8]) -> Option<Self> {
        let values = layout.page_values();
        let data_len = 4 * (values + layout.channels());
        if slot.len() != data_len + 8 {
            return None;
        }
        let (data, sum) = slot.split_at(data_len);
        if checksum(page, data).to_le_bytes() != sum {
            return None;
        }
        let (values_bytes, nan_bytes) = data.split_at(4 * values);
        Some(Self {
            values: f32s(values_bytes).collect(),
            nan: nan_bytes
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        })
    }
}

/// Folds a child's minimum and maximum into a running one: the earlier operand wins ties (as
/// the host fold keeps the first of equal samples), and an empty child (`+inf`, `-inf`)
/// changes nothing. Folding children in sample order gives the bits of folding their samples.
#[inline]
pub(crate) fn merge(min: &mut f32, max: &mut f32, child_min: f32, child_max: f32) {
    // Selects, not branches: x86's minss/maxss compute exactly these (the second operand on
    // ties and NaN), and random data would mispredict a branch.
    *min = if child_min < *min { child_min } else { *min };
    *max = if child_max > *max { child_max } else { *max };
}

/// Little-endian `f32`s of `bytes` (whose length is a multiple of 4).
pub(crate) fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// A 64-bit checksum of `bytes` seeded with `seed`: words of 8 bytes folded by
/// rotate-xor-multiply (each step a bijection of the state, so changing any one word always
/// changes the sum), the length mixed in and the state finished with [`SplitMix64::mix`]. Not
/// cryptographic: it tells damaged or torn data from what was written.
pub(crate) fn checksum(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = SplitMix64::GAMMA;
    let mut h = seed.wrapping_mul(K) ^ (bytes.len() as u64).rotate_left(32) ^ 0x6473_706B_7079_7231;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h.rotate_left(23) ^ w).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    let rest = words.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h.rotate_left(23) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    SplitMix64::mix(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_sees_every_byte_and_the_length() {
        let bytes: Vec<u8> = (0..203u32).map(|i| (i * 37 % 251) as u8).collect();
        let sum = checksum(7, &bytes);
        assert_ne!(sum, checksum(8, &bytes));
        assert_ne!(sum, checksum(7, &bytes[..202]));
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert_ne!(sum, checksum(7, &flipped), "byte {at}");
        }
    }

    #[test]
    fn checksums_keep_the_values_written_to_existing_cache_files() {
        // Computed by the checksum of the first cache files: a change here makes every cache
        // file written before it read as damaged.
        let bytes: Vec<u8> = (0..203u32).map(|i| (i * 37 % 251) as u8).collect();
        assert_eq!(checksum(7, &bytes), 0x67FD_B940_F9F1_D8BE);
        assert_eq!(checksum(0, &bytes[..96]), 0x3B1A_5460_1AA7_1314);
        assert_eq!(checksum(0, &[]), 0x316F_6EBD_3137_8C4F);
    }
}
