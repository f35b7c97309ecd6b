//! From cluster means to the templates that matching uses (`docs/KILOSORT4.md` §6.9): each
//! cluster's mean features become a waveform, the waveform is aligned so that its best match to
//! the universal temporal shapes sits at the template's centre, and the result goes back to PC
//! space.
//!
//! Difference from Kilosort 4.1.7, on purpose: Kilosort concatenates all templates in time
//! before its cross-correlation (so a template's edges see its neighbours') and rolls each
//! template circularly (samples pushed off one end come back at the other). Here each template is
//! correlated on its own with zeros outside it and shifted with zeros coming in.

use crate::algorithms::rows::map_in_parallel;
use crate::clustering::Clusters;
use crate::detection::universal::UniversalTemplates;
use crate::merging::{NEAR_DUPLICATE_SIMILARITY, WtW, merge_near_duplicates};
use crate::runner::SortContext;
pub use crate::settings::Alignment;
use crate::{Error, Result};

/// The templates matching uses: `[count, p, channels]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedTemplates {
    /// `[count, p, channels]` row-major: each template's PC weights on every channel.
    pub units: Vec<f32>,
    /// Number of templates.
    pub count: usize,
}

/// The learned-templates stage on the host (`docs/KILOSORT4.md` §6.9, recorded in `ctx`): each
/// cluster's mean features aligned to the universal shapes (`template_alignment`), then
/// near-duplicates (similarity at least [`NEAR_DUPLICATE_SIMILARITY`], norms within 20 %)
/// merged.
///
/// # Errors
///
/// As [`align_templates`] and [`merge_near_duplicates`].
pub fn run(
    ctx: &mut SortContext,
    clusters: &Clusters,
    templates: &UniversalTemplates,
) -> Result<LearnedTemplates> {
    ctx.host("learned templates", |ctx| {
        let channels = ctx.probe().len();
        let p = templates.p();
        let mut units = clusters.features.clone();
        align_templates(
            &mut units,
            channels,
            p,
            templates.wpca(),
            templates.wtemp(),
            templates.nt(),
            ctx.settings().template_alignment,
            ctx.threads(),
        )?;
        let counts: Vec<u64> = clusters.sizes.iter().map(|&n| n as u64).collect();
        let wtw = WtW::new(templates.wpca(), templates.nt())?;
        let merged =
            merge_near_duplicates(&units, &counts, channels, &wtw, NEAR_DUPLICATE_SIMILARITY)?;
        Ok(LearnedTemplates {
            count: merged.counts.len(),
            units: pcs_outer(&merged.units, channels, p),
        })
    })
}

/// Aligns templates in place: `units` is `[n, channels, p]` row-major (PC features of each unit
/// on each channel), `wpca` `[p, nt]`, `wtemp` `[k, nt]`. For each unit the waveform
/// `T[t, c] = Σ_q units[u, c, q] wpca[q, t]` is correlated with every row of `wtemp` at lags
/// `-nt/2..=nt/2` on every channel (`Σ_j T[τ + j - nt/2, c] wtemp[k, j]`, zero outside), the
/// column `τ*` of the largest score (first on ties) found, the waveform shifted by
/// `nt/2 - τ*` samples (zeros coming in) and projected back on `wpca`. The score of a lag is
/// the largest magnitude over channels and shapes ([`Alignment::MaxOverChannels`], Kilosort4)
/// or, for each shape, the sum of the magnitudes over channels, the largest over shapes
/// ([`Alignment::SumOverChannels`], EMUsort: a motor unit's potential is spread over many
/// channels). Units are aligned on up to `threads` threads (the result does not depend on
/// how many). Returns the shifts.
///
/// # Errors
///
/// [`Error::Input`] when the shapes disagree.
#[expect(
    clippy::too_many_arguments,
    reason = "the shapes' three parts are what the tests vary; a struct would only rename them"
)]
pub fn align_templates(
    units: &mut [f32],
    channels: usize,
    p: usize,
    wpca: &[f32],
    wtemp: &[f32],
    nt: usize,
    alignment: Alignment,
    threads: usize,
) -> Result<Vec<i64>> {
    let per = channels * p;
    if nt == 0
        || wpca.len() != p * nt
        || !wtemp.len().is_multiple_of(nt)
        || per == 0
        || !units.len().is_multiple_of(per)
    {
        return Err(Error::Input {
            what: "template alignment",
            reason: format!(
                "{} unit values, {channels} channels x {p} components, wPCA {} and wTEMP {} values for nt = {nt}",
                units.len(),
                wpca.len(),
                wtemp.len()
            ),
        });
    }
    let count = units.len() / per;
    let aligned = map_in_parallel(
        count,
        threads,
        1,
        || (),
        |(), u| {
            align_one(
                &units[u * per..(u + 1) * per],
                channels,
                p,
                wpca,
                wtemp,
                nt,
                alignment,
            )
        },
    );
    let mut shifts = Vec::with_capacity(count);
    for (unit, (shift, moved)) in units.chunks_mut(per).zip(aligned) {
        if let Some(moved) = moved {
            unit.copy_from_slice(&moved);
        }
        shifts.push(shift);
    }
    Ok(shifts)
}

/// [`align_templates`] of one unit's `[channels, p]` features: its shift, and its aligned
/// features when the shift is not 0.
fn align_one(
    unit: &[f32],
    channels: usize,
    p: usize,
    wpca: &[f32],
    wtemp: &[f32],
    nt: usize,
    alignment: Alignment,
) -> (i64, Option<Vec<f32>>) {
    let half = (nt / 2) as i64;
    let waveform = waveform(unit, channels, p, wpca, nt);
    // Channels where the waveform is zero add nothing to any score.
    let rows: Vec<&[f64]> = waveform
        .chunks_exact(nt)
        .filter(|row| row.iter().any(|&v| v != 0.0))
        .collect();
    let mut best = (f64::NEG_INFINITY, half);
    for tau in 0..nt as i64 {
        let mut score = 0f64;
        for shape in wtemp.chunks(nt) {
            let mut over_channels = 0f64;
            for row in &rows {
                let mut sum = 0f64;
                for (j, &w) in shape.iter().enumerate() {
                    let t = tau + j as i64 - half;
                    if (0..nt as i64).contains(&t) {
                        sum += row[t as usize] * f64::from(w);
                    }
                }
                match alignment {
                    Alignment::MaxOverChannels => score = score.max(sum.abs()),
                    Alignment::SumOverChannels => over_channels += sum.abs(),
                }
            }
            score = score.max(over_channels);
        }
        if score > best.0 {
            best = (score, tau);
        }
    }
    let shift = half - best.1;
    let moved = (shift != 0).then(|| {
        let mut moved = vec![0f32; unit.len()];
        project(
            &shift_rows(&waveform, channels, nt, shift),
            &mut moved,
            channels,
            p,
            wpca,
            nt,
        );
        moved
    });
    (shift, moved)
}

/// `T[c, t] = Σ_q unit[c, q] wpca[q, t]` as `[channels, nt]` in f64.
fn waveform(unit: &[f32], channels: usize, p: usize, wpca: &[f32], nt: usize) -> Vec<f64> {
    let mut out = vec![0f64; channels * nt];
    for c in 0..channels {
        for q in 0..p {
            let a = f64::from(unit[c * p + q]);
            if a != 0.0 {
                for t in 0..nt {
                    out[c * nt + t] += a * f64::from(wpca[q * nt + t]);
                }
            }
        }
    }
    out
}

/// Each row moved `shift` samples later (`new[t] = old[t - shift]`), zeros coming in.
fn shift_rows(rows: &[f64], channels: usize, nt: usize, shift: i64) -> Vec<f64> {
    let mut out = vec![0f64; channels * nt];
    for c in 0..channels {
        for t in 0..nt as i64 {
            let from = t - shift;
            if (0..nt as i64).contains(&from) {
                out[c * nt + t as usize] = rows[c * nt + from as usize];
            }
        }
    }
    out
}

/// `unit[c, q] = Σ_t T[c, t] wpca[q, t]` (the rows of `wpca` are orthonormal).
fn project(rows: &[f64], unit: &mut [f32], channels: usize, p: usize, wpca: &[f32], nt: usize) {
    for c in 0..channels {
        for q in 0..p {
            let mut sum = 0f64;
            for t in 0..nt {
                sum += rows[c * nt + t] * f64::from(wpca[q * nt + t]);
            }
            unit[c * p + q] = sum as f32;
        }
    }
}

/// `[n, channels, p]` to `[n, p, channels]` (Kilosort's `Wall` layout to its `U` layout).
#[must_use]
pub fn pcs_outer(units: &[f32], channels: usize, p: usize) -> Vec<f32> {
    let per = channels * p;
    let mut out = vec![0f32; units.len()];
    for (u, unit) in units.chunks(per).enumerate() {
        for c in 0..channels {
            for q in 0..p {
                out[u * per + q * channels + c] = unit[c * p + q];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An orthonormal basis of `p` rows of length `nt`: shifted unit impulses.
    fn impulses(p: usize, nt: usize, first: usize) -> Vec<f32> {
        let mut w = vec![0f32; p * nt];
        for q in 0..p {
            w[q * nt + first + q] = 1.0;
        }
        w
    }

    #[test]
    fn a_late_template_moves_to_the_centre() {
        let (nt, p, channels) = (11, 11, 3);
        // Full basis (identity), so shifting and projecting back is exact.
        let wpca = impulses(p, nt, 0);
        // One shape: a trough at sample 5 (the centre).
        let mut wtemp = vec![0f32; nt];
        wtemp[5] = -1.0;
        // The unit's trough sits at sample 7 on channel 1: two samples late.
        let mut unit = vec![0f32; channels * p];
        unit[p + 7] = -3.0;
        unit[p + 8] = 1.0;
        let shifts = align_templates(
            &mut unit,
            channels,
            p,
            &wpca,
            &wtemp,
            nt,
            Alignment::MaxOverChannels,
            1,
        )
        .unwrap();
        assert_eq!(shifts, vec![-2]);
        assert_eq!(unit[p + 5], -3.0);
        assert_eq!(unit[p + 6], 1.0);
        assert_eq!(unit.iter().filter(|&&v| v != 0.0).count(), 2);
    }

    #[test]
    fn a_centred_template_is_unchanged_and_shapes_are_checked() {
        let (nt, p, channels) = (7, 7, 2);
        let wpca = impulses(p, nt, 0);
        let mut wtemp = vec![0f32; nt];
        wtemp[3] = 1.0;
        let mut unit = vec![0f32; channels * p];
        unit[3] = 2.0;
        let before = unit.clone();
        assert_eq!(
            align_templates(
                &mut unit,
                channels,
                p,
                &wpca,
                &wtemp,
                nt,
                Alignment::MaxOverChannels,
                1
            )
            .unwrap(),
            vec![0]
        );
        assert_eq!(unit, before);
        assert!(
            align_templates(
                &mut unit,
                channels,
                p,
                &wpca[1..],
                &wtemp,
                nt,
                Alignment::MaxOverChannels,
                1
            )
            .is_err()
        );
    }

    #[test]
    fn summing_over_channels_follows_the_spread_not_the_largest_channel() {
        let (nt, p, channels) = (11, 11, 4);
        let wpca = impulses(p, nt, 0);
        let mut wtemp = vec![0f32; nt];
        wtemp[5] = -1.0;
        // Channel 0 has the largest trough, two samples late; channels 1-3 together more,
        // one sample early.
        let mut unit = vec![0f32; channels * p];
        unit[7] = -3.0;
        for c in 1..4 {
            unit[c * p + 4] = -1.5;
        }
        let mut max = unit.clone();
        let shifts = align_templates(
            &mut max,
            channels,
            p,
            &wpca,
            &wtemp,
            nt,
            Alignment::MaxOverChannels,
            1,
        )
        .unwrap();
        assert_eq!(shifts, vec![-2]);
        let shifts = align_templates(
            &mut unit,
            channels,
            p,
            &wpca,
            &wtemp,
            nt,
            Alignment::SumOverChannels,
            1,
        )
        .unwrap();
        assert_eq!(shifts, vec![1]);
        assert_eq!(unit[p + 5], -1.5);
    }

    #[test]
    fn pcs_outer_transposes_each_unit() {
        // 2 units, 3 channels, 2 components.
        let units: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let out = pcs_outer(&units, 3, 2);
        assert_eq!(&out[..6], &[0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
        assert_eq!(&out[6..], &[6.0, 8.0, 10.0, 7.0, 9.0, 11.0]);
    }

    #[test]
    fn the_thread_count_does_not_change_the_alignment() {
        let (nt, p, channels, n) = (11, 11, 5, 37);
        let wpca = impulses(p, nt, 0);
        let mut wtemp = vec![0f32; 2 * nt];
        wtemp[5] = -1.0;
        wtemp[nt + 4] = 0.5;
        wtemp[nt + 6] = -0.7;
        let mut rng = dspk_core::test_util::Rng::new(3);
        let units: Vec<f32> = (0..n * channels * p)
            .map(|i| if i % 3 == 0 { 0.0 } else { rng.normal() as f32 })
            .collect();
        let run = |threads: usize| {
            let mut out = units.clone();
            let shifts = align_templates(
                &mut out,
                channels,
                p,
                &wpca,
                &wtemp,
                nt,
                Alignment::SumOverChannels,
                threads,
            )
            .unwrap();
            (out, shifts)
        };
        let one = run(1);
        assert!(one.1.iter().any(|&s| s != 0), "some unit moves");
        for threads in [2, 5, 64] {
            assert_eq!(run(threads), one, "{threads} threads");
        }
    }
}
