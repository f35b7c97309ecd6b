//! Unit merges: the global merges after the final clustering (`docs/KILOSORT4.md` §8.2,
//! [`merge_units`]) and the near-duplicate merge of the learned templates before matching
//! (§6.9, [`merge_near_duplicates`]), with the template similarity both use
//! ([`similarity`], [`similarity_matrix`]).
//!
//! Both merges are the same greedy loop: seeds in decreasing size (ties: higher id first, the
//! stable form of Kilosort's reversed argsort); for a seed, every other live unit in decreasing
//! similarity (ties: higher id first) while the similarity reaches the threshold; the first
//! candidate that passes the test is absorbed, the seed's template becomes the size-weighted
//! mean, and the seed is examined again with its new template. What differs is which seeds
//! count, the threshold, the test, and whether the absorbed unit is moved in time.
//!
//! Host code: the loop is sequential and small (a few hundred units), and the similarity of two
//! units that share no channel is 0 without arithmetic.

mod drift;
mod shift;
mod similarity;
#[cfg(test)]
mod tests;

pub use drift::{DRIFT_SPLIT_SIMILARITY, DriftSplit};
pub use similarity::{WtW, similarity, similarity_matrix};

use crate::algorithms::ccg::{acg_refractory, cross_refractory};
use crate::clustering::Clusters;
use crate::detection::universal::UniversalTemplates;
use crate::drift::DriftEstimate;
use crate::runner::SortContext;
use crate::spikes::MatchedSpikes;
use crate::{Error, KilosortSettings, Result};
use shift::{shift_matrix, shift_rows};
use similarity::Bank;

/// Kilosort's similarity threshold for the global merges (`r = 0.5`, §8.2).
pub const MERGE_SIMILARITY: f32 = 0.5;

/// Kilosort's similarity threshold for the near-duplicate merge (§6.9).
pub const NEAR_DUPLICATE_SIMILARITY: f32 = 0.9;

/// The largest relative difference of the Frobenius norms, `|2 (‖k‖ - ‖j‖) / (‖k‖ + ‖j‖)|`, at
/// which the near-duplicate merge joins two units (§6.9).
const NEAR_DUPLICATE_NORM_DIFFERENCE: f64 = 0.2;

/// The units after the global merges.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedUnits {
    /// The unit of each spike.
    pub labels: Vec<u32>,
    /// `[units, channels, p]` row-major: each unit's mean features (Kilosort's `Wall`).
    pub features: Vec<f32>,
    /// What the merges did.
    pub report: MergeReport,
}

/// The merging stage on the host (`docs/KILOSORT4.md` §8.2-8.3, recorded in `ctx`): the final
/// clusters merged by template similarity over time shifts and cross-correlogram
/// refractoriness, or by the drift-split test with the drift estimate `drift` when the
/// setting `drift_split_overlap` is on ([`merge_units`]); `spikes`' times updated in place.
///
/// # Errors
///
/// As [`WtW::new`] and [`merge_units`].
pub fn run(
    ctx: &mut SortContext,
    spikes: &mut MatchedSpikes,
    clusters: Clusters,
    templates: &UniversalTemplates,
    drift: Option<&DriftEstimate>,
) -> Result<MergedUnits> {
    ctx.host("merges", |ctx| {
        let Clusters {
            mut labels,
            mut features,
            ..
        } = clusters;
        let wtw = WtW::new(templates.wpca(), templates.nt())?;
        let settings = ctx.settings();
        let channel_y: Vec<f32> = ctx.probe().positions().iter().map(|p| p[1]).collect();
        let rules = MergeRules {
            sample_rate: ctx.sample_rate(),
            settings,
            drift: drift
                .zip(settings.drift_split_overlap)
                .map(|(estimate, overlap)| {
                    DriftSplit::new(
                        estimate,
                        &channel_y,
                        settings.batch_size,
                        settings.binning_depth,
                        overlap,
                    )
                }),
        };
        let report = merge_units(
            spikes,
            &mut labels,
            &mut features,
            ctx.probe().len(),
            &wtw,
            &rules,
        )?;
        Ok(MergedUnits {
            labels,
            features,
            report,
        })
    })
}

/// What decides the global merges ([`merge_units`]).
#[derive(Debug, Clone, Copy)]
pub struct MergeRules<'a> {
    /// Samples per second of the spikes' samples.
    pub sample_rate: f64,
    /// The sort's settings (`acg_threshold`, `ccg_threshold`).
    pub settings: &'a KilosortSettings,
    /// The drift-split test, when it is on.
    pub drift: Option<DriftSplit<'a>>,
}

/// What the global merges did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeReport {
    /// Units before the merges.
    pub units_before: usize,
    /// Units after the merges.
    pub units_after: usize,
    /// Merges done (each absorbs one unit).
    pub merges: usize,
    /// Of those, the merges of units split by the drift (not cross-refractory).
    pub drift_merges: usize,
    /// Spikes moved in time by a merge (counted once per move).
    pub shifted_spikes: usize,
}

/// The result of the near-duplicate merge.
#[derive(Debug, Clone, PartialEq)]
pub struct NearDuplicates {
    /// The new unit of each old unit (ids consecutive, in the order of the lowest old id).
    pub unit_of: Vec<u32>,
    /// The merged templates, `[new units, C, P]`.
    pub units: Vec<f32>,
    /// The summed size of each new unit.
    pub counts: Vec<u64>,
}

/// Kilosort's global merges (§8.2, "ccg" mode, time alignment on), in place.
///
/// `clusters` holds the unit of every spike, `units` the `[N, channels, P]` mean features of the
/// units (Kilosort's `Wall`), `spikes` the matched spikes with their features on their
/// templates' channels. Seeds are the units whose auto-correlogram is refractory
/// (`acg_refractory` with `acg_threshold`, once, before any merge); a candidate with
/// similarity at least [`MERGE_SIMILARITY`] is absorbed when the seed's and its trains (samples
/// over `sample_rate`) are cross-refractory (`cross_refractory` with `ccg_threshold`) or,
/// with `drift`, when the two are one unit split by the drift ([`DriftSplit::splits`] at the
/// seed's depth: similarity at least [`DRIFT_SPLIT_SIMILARITY`] and little overlap of their
/// spikes' drift shifts; dspk's own test, decision 0005). The
/// absorbed unit is first moved by `dt = nt - ℓ`, `ℓ` its best lag index against the seed: its
/// spikes' samples decrease by `dt`, and its template and its spikes' features are shifted by
/// `dt` samples in the time domain (the vacated samples take the nearest surviving value) and
/// projected back on `wPCA`. Afterwards the surviving units are numbered consecutively in the
/// order of their old ids (`units` shrinks to them) and, when the samples are out of order
/// (a spike moved), every field of `spikes` and `clusters` is re-sorted by sample, ties
/// keeping their previous order (Kilosort's sort is unstable). On an error nothing changes.
///
/// Units without spikes are never refractory and never pass the test, so they stay as they
/// are.
///
/// Host memory beyond the inputs: 16 bytes per spike (each unit's spike indices and its train
/// in seconds) during the loop; for the re-sort, 8 bytes per spike (the order) plus a copy of
/// one field at a time (at most `4 nc P` bytes per spike, the features).
///
/// # Errors
///
/// [`Error::Input`] when the fields of `spikes` disagree in length, its `P` is not `wtw`'s,
/// `clusters` does not hold one unit below `N` per spike, `units` is not whole
/// `[channels, P]` templates or holds a non-finite value; [`Error::Setting`] when
/// `sample_rate` is not positive and finite.
pub fn merge_units(
    spikes: &mut MatchedSpikes,
    clusters: &mut [u32],
    units: &mut Vec<f32>,
    channels: usize,
    wtw: &WtW,
    rules: &MergeRules<'_>,
) -> Result<MergeReport> {
    let MergeRules {
        sample_rate,
        settings,
        drift,
    } = *rules;
    check_spikes(spikes, wtw.p())?;
    if !(sample_rate.is_finite() && sample_rate > 0.0) {
        return Err(Error::Setting {
            name: "fs",
            reason: format!("the sample rate must be positive, got {sample_rate}"),
        });
    }
    let mut bank = Bank::new(units, channels, wtw.p())?;
    let n_units = bank.len();
    if clusters.len() != spikes.len() {
        return Err(Error::Input {
            what: "spike clusters",
            reason: format!("{} labels for {} spikes", clusters.len(), spikes.len()),
        });
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_units];
    for (m, &c) in clusters.iter().enumerate() {
        let Some(list) = members.get_mut(c as usize) else {
            return Err(Error::Input {
                what: "spike clusters",
                reason: format!("spike {m} has unit {c}, but there are {n_units} units"),
            });
        };
        list.push(m);
    }
    let mut trains: Vec<Vec<f64>> = members
        .iter()
        .map(|list| sorted_train(list, &spikes.sample, sample_rate))
        .collect();
    let seeds: Vec<bool> = trains
        .iter()
        .map(|t| acg_refractory(t, settings.acg_threshold).0)
        .collect();
    let mut sizes: Vec<u64> = members.iter().map(|l| l.len() as u64).collect();

    let (nt, p) = (wtw.nt(), wtw.p());
    let w = spikes.nc() * spikes.p();
    let mut shifted_spikes = 0usize;
    let mut drift_merges = 0usize;
    let absorbed = greedy_merges(
        &mut bank,
        wtw,
        &mut sizes,
        &seeds,
        MERGE_SIMILARITY,
        |bank, k, j, sim, lag| {
            if !cross_refractory(&trains[k], &trains[j], settings.ccg_threshold) {
                let split = drift.is_some_and(|d| {
                    d.splits(&members[k], &members[j], &spikes.sample, bank.unit(k), sim)
                });
                if !split {
                    return false;
                }
                drift_merges += 1;
            }
            let dt = nt as i64 - lag as i64;
            let moved = std::mem::take(&mut members[j]);
            let train_j = if dt == 0 {
                std::mem::take(&mut trains[j])
            } else {
                let s = shift_matrix(wtw.wpca(), nt, dt);
                shift_rows(bank.unit_mut(j), &s, p);
                for &m in &moved {
                    spikes.sample[m] = spikes.sample[m].saturating_sub(dt);
                    shift_rows(&mut spikes.features[m * w..(m + 1) * w], &s, p);
                }
                shifted_spikes += moved.len();
                trains[j].clear();
                sorted_train(&moved, &spikes.sample, sample_rate)
            };
            for &m in &moved {
                clusters[m] = k as u32;
            }
            members[k].extend(moved);
            trains[k] = merge_sorted(&trains[k], &train_j);
            true
        },
    );
    drop(trains);
    drop(members);

    let (unit_of, survivors) = relabel(&absorbed);
    for c in clusters.iter_mut() {
        *c = unit_of[*c as usize];
    }
    *units = survivors
        .iter()
        .flat_map(|&k| bank.unit(k).iter().copied())
        .collect();
    if !spikes.sample.is_sorted() {
        sort_by_sample(spikes, clusters);
    }
    Ok(MergeReport {
        units_before: n_units,
        units_after: survivors.len(),
        merges: n_units - survivors.len(),
        drift_merges,
        shifted_spikes,
    })
}

/// Kilosort's near-duplicate merge of the learned templates before matching (§6.9, "mu" mode):
/// the loop of [`merge_units`] with every unit a seed, similarity at least `threshold`
/// ([`NEAR_DUPLICATE_SIMILARITY`], 0.9, in Kilosort) and acceptance when the Frobenius norms of
/// the current templates differ by less than 20 % of their mean,
/// `|2 (‖k‖ - ‖j‖) / (‖k‖ + ‖j‖)| < 0.2`; nothing moves in time. `units` is `[N, channels, P]`,
/// `counts` the spikes of each unit (the weights of the template means; two units with no
/// spikes between them are averaged with equal weights).
///
/// # Errors
///
/// [`Error::Input`] when `units` is not whole `[channels, P]` templates, holds a non-finite
/// value, or `counts` is not one per unit; [`Error::Setting`] when `threshold` is not finite.
pub fn merge_near_duplicates(
    units: &[f32],
    counts: &[u64],
    channels: usize,
    wtw: &WtW,
    threshold: f32,
) -> Result<NearDuplicates> {
    if !threshold.is_finite() {
        return Err(Error::Setting {
            name: "near-duplicate similarity",
            reason: format!("the threshold must be finite, got {threshold}"),
        });
    }
    let mut bank = Bank::new(units, channels, wtw.p())?;
    if counts.len() != bank.len() {
        return Err(Error::Input {
            what: "unit counts",
            reason: format!("{} counts for {} units", counts.len(), bank.len()),
        });
    }
    let mut sizes = counts.to_vec();
    let seeds = vec![true; bank.len()];
    let absorbed = greedy_merges(
        &mut bank,
        wtw,
        &mut sizes,
        &seeds,
        threshold,
        |bank, k, j, _, _| {
            let (nk, nj) = (bank.norm(k), bank.norm(j));
            (2.0 * (nk - nj) / (nk + nj)).abs() < NEAR_DUPLICATE_NORM_DIFFERENCE
        },
    );
    let (unit_of, survivors) = relabel(&absorbed);
    Ok(NearDuplicates {
        unit_of,
        units: survivors
            .iter()
            .flat_map(|&k| bank.unit(k).iter().copied())
            .collect(),
        counts: survivors.iter().map(|&k| sizes[k]).collect(),
    })
}

/// The greedy loop of both merges. `try_merge(bank, k, j, similarity, lag)` tests candidate `j`
/// of seed `k` of that similarity at its best lag index and, when it accepts, does the caller's side of the merge (and may
/// change `j`'s template first); the loop then sets `k`'s template to the size-weighted mean and
/// moves `j`'s size to `k`. Returns, for each unit, the unit that absorbed it.
fn greedy_merges(
    bank: &mut Bank,
    wtw: &WtW,
    sizes: &mut [u64],
    seeds: &[bool],
    threshold: f32,
    mut try_merge: impl FnMut(&mut Bank, usize, usize, f32, usize) -> bool,
) -> Vec<Option<usize>> {
    let n = bank.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(b.cmp(&a)));
    let mut absorbed: Vec<Option<usize>> = vec![None; n];
    for k in order {
        if !seeds[k] || absorbed[k].is_some() {
            continue;
        }
        'examine: loop {
            let mut candidates: Vec<(f32, usize, usize)> = (0..n)
                .filter(|&j| j != k && absorbed[j].is_none())
                .map(|j| {
                    let (sim, lag) = bank.similarity(k, j, wtw);
                    (sim, j, lag)
                })
                .filter(|&(sim, _, _)| sim >= threshold)
                .collect();
            candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
            for (sim, j, lag) in candidates {
                if try_merge(bank, k, j, sim, lag) {
                    mean_into(bank, k, j, sizes[k], sizes[j]);
                    sizes[k] += sizes[j];
                    sizes[j] = 0;
                    absorbed[j] = Some(k);
                    continue 'examine;
                }
            }
            break;
        }
    }
    absorbed
}

/// `W_k ← (n_k W_k + n_j W_j) / (n_k + n_j)` in `f64` (equal weights when both are 0).
fn mean_into(bank: &mut Bank, k: usize, j: usize, nk: u64, nj: u64) {
    let total = nk + nj;
    let wj = if total == 0 {
        0.5
    } else {
        nj as f64 / total as f64
    };
    let other: Vec<f32> = bank.unit(j).to_vec();
    for (a, &b) in bank.unit_mut(k).iter_mut().zip(&other) {
        *a = (f64::from(*a) * (1.0 - wj) + f64::from(b) * wj) as f32;
    }
    bank.refresh(k);
}

/// New consecutive ids of the units no one absorbed (in old id order), and the new id of every
/// old unit through the chain of absorptions.
fn relabel(absorbed: &[Option<usize>]) -> (Vec<u32>, Vec<usize>) {
    let survivors: Vec<usize> = (0..absorbed.len())
        .filter(|&k| absorbed[k].is_none())
        .collect();
    let mut new_id = vec![0u32; absorbed.len()];
    for (i, &k) in survivors.iter().enumerate() {
        new_id[k] = i as u32;
    }
    let unit_of = (0..absorbed.len())
        .map(|mut k| {
            // Each absorber was alive when it absorbed, so the chain ends at a survivor.
            while let Some(into) = absorbed[k] {
                k = into;
            }
            new_id[k]
        })
        .collect();
    (unit_of, survivors)
}

/// The train of `members` in seconds, sorted.
fn sorted_train(members: &[usize], sample: &[i64], sample_rate: f64) -> Vec<f64> {
    let mut train: Vec<f64> = members
        .iter()
        .map(|&m| sample[m] as f64 / sample_rate)
        .collect();
    train.sort_by(f64::total_cmp);
    train
}

/// The union of two sorted trains, sorted.
fn merge_sorted(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if b[j] < a[i] {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Stable sort of every per-spike field by sample (ties keep their order), one field at a time.
fn sort_by_sample(spikes: &mut MatchedSpikes, clusters: &mut [u32]) {
    let mut order: Vec<usize> = (0..spikes.len()).collect();
    order.sort_by_key(|&m| spikes.sample[m]);
    fn permute<T: Copy>(values: &mut Vec<T>, order: &[usize]) {
        *values = order.iter().map(|&m| values[m]).collect();
    }
    permute(&mut spikes.sample, &order);
    permute(&mut spikes.template, &order);
    permute(&mut spikes.score, &order);
    permute(&mut spikes.scale, &order);
    let sorted: Vec<u32> = order.iter().map(|&m| clusters[m]).collect();
    clusters.copy_from_slice(&sorted);
    let w = spikes.nc() * spikes.p();
    spikes.features = order
        .iter()
        .flat_map(|&m| spikes.features[m * w..(m + 1) * w].iter().copied())
        .collect();
}

/// Checks that every field of `spikes` has one entry per spike and that its components are `p`.
pub(crate) fn check_spikes(spikes: &MatchedSpikes, p: usize) -> Result<()> {
    let n = spikes.len();
    let lengths = [
        ("template", spikes.template.len()),
        ("score", spikes.score.len()),
        ("scale", spikes.scale.len()),
    ];
    if let Some((name, len)) = lengths.iter().find(|(_, len)| *len != n) {
        return Err(Error::Input {
            what: "matched spikes",
            reason: format!("{len} {name} values for {n} spikes"),
        });
    }
    if spikes.features.len() != n * spikes.nc() * spikes.p() {
        return Err(Error::Input {
            what: "matched spikes",
            reason: format!(
                "{} feature values for {n} spikes of [{}, {}]",
                spikes.features.len(),
                spikes.nc(),
                spikes.p()
            ),
        });
    }
    if n > 0 && spikes.p() != p {
        return Err(Error::Input {
            what: "matched spikes",
            reason: format!("features have {} components, wPCA has {p}", spikes.p()),
        });
    }
    Ok(())
}
