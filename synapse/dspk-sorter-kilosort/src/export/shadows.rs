//! Shadow units (dspk's own, `shadow_ms`): units whose spikes are mostly other, larger units'
//! spikes found again.
//!
//! Matching peels one template at a time. What a larger unit's spike leaves behind (the part
//! its template does not explain, or its far field on channels its template does not cover)
//! can pass a lower threshold on a weaker template a few samples away, and a unit made of such
//! spikes follows the larger units' trains to within a fraction of a millisecond. Independent
//! units share such coincidences only by chance, at the rate of the other unit's spikes times
//! the window. Measured on the bench's cases in `docs/ACCURACY.md` ("Shadow units").

/// A larger unit is a partner of a smaller one when the share of the smaller unit's spikes
/// that have one of its spikes within the window exceeds chance by at least this much.
const SHADOW_EXCESS: f64 = 0.1;

/// A unit is a shadow when at least this share of its spikes have a partner's spike within the
/// window.
const SHADOW_SHARE: f64 = 0.5;

/// Which units are shadows, from the spikes' samples (`samples`, in time order), their units
/// (`clusters`), which spikes count (`kept`), each unit's size (`sizes`, the norm of its mean
/// features; the order in which units are judged: larger first, the lower id on a tie),
/// whether each unit's kept train is refractory (`refractory`), the `window` in samples and
/// the recording's length in samples.
///
/// Units are judged from the largest down, each against the units judged before it and kept:
/// a kept refractory unit `a` is a partner of unit `b` when the share of `b`'s spikes with a
/// spike of `a` at most `window` samples away, minus chance (`min(1, n_a (2 window + 1) /
/// num_samples)`), is at least [`SHADOW_EXCESS`]; `b` is a shadow when at least [`SHADOW_SHARE`] of its spikes
/// have a spike of some partner that close. A unit without kept spikes is not a shadow.
///
/// Cost: two scans over each spike's neighbours within the window; host memory 16 bytes per
/// kept spike (its sample, unit and place in its unit's list) and 13 bytes per unit.
pub(crate) fn shadow_units(
    samples: &[i64],
    clusters: &[u32],
    kept: &[bool],
    sizes: &[f64],
    refractory: &[bool],
    window: i64,
    num_samples: u64,
) -> Vec<bool> {
    let n_units = sizes.len();
    // The kept spikes' samples and units, in time order, and each unit's positions among them.
    let (times, units): (Vec<i64>, Vec<u32>) = samples
        .iter()
        .zip(clusters)
        .zip(kept)
        .filter(|(_, k)| **k)
        .map(|((&t, &u), _)| (t, u))
        .unzip();
    let mut of_unit: Vec<Vec<u32>> = vec![Vec::new(); n_units];
    for (i, &u) in units.iter().enumerate() {
        of_unit[u as usize].push(i as u32);
    }
    let mut order: Vec<usize> = (0..n_units).filter(|&u| !of_unit[u].is_empty()).collect();
    order.sort_by(|&a, &b| sizes[b].total_cmp(&sizes[a]).then(a.cmp(&b)));

    let chance_per_spike = (2 * window.max(0) + 1) as f64 / num_samples.max(1) as f64;
    // The units judged before `b`, kept and refractory: those that may cast shadows on it.
    let mut casts_shadows = vec![false; n_units];
    let mut shadow = vec![false; n_units];
    let mut count = vec![0u32; n_units];
    let mut seen = vec![u32::MAX; n_units];
    let mut partner = vec![false; n_units];
    for &b in &order {
        let own = &of_unit[b];
        // Per kept unit: how many of b's spikes have one of its spikes within the window.
        let mut touched: Vec<usize> = Vec::new();
        for (s, &i) in own.iter().enumerate() {
            for_each_neighbour(&times, &units, i as usize, window, |a| {
                if casts_shadows[a] && seen[a] != s as u32 {
                    seen[a] = s as u32;
                    if count[a] == 0 {
                        touched.push(a);
                    }
                    count[a] += 1;
                }
            });
        }
        let n_b = own.len() as f64;
        let mut any_partner = false;
        for &a in &touched {
            let chance = (of_unit[a].len() as f64 * chance_per_spike).min(1.0);
            if f64::from(count[a]) / n_b - chance >= SHADOW_EXCESS {
                partner[a] = true;
                any_partner = true;
            }
        }
        if any_partner {
            let locked = own
                .iter()
                .filter(|&&i| {
                    let mut hit = false;
                    for_each_neighbour(&times, &units, i as usize, window, |a| {
                        hit |= partner[a];
                    });
                    hit
                })
                .count();
            shadow[b] = locked as f64 / n_b >= SHADOW_SHARE;
        }
        for &a in &touched {
            count[a] = 0;
            seen[a] = u32::MAX;
            partner[a] = false;
        }
        casts_shadows[b] = !shadow[b] && refractory[b];
    }
    shadow
}

/// Calls `f` with the unit of every spike other than `i` at most `window` samples from it
/// (`times` in order).
fn for_each_neighbour(
    times: &[i64],
    units: &[u32],
    i: usize,
    window: i64,
    mut f: impl FnMut(usize),
) {
    let t = times[i];
    for j in (0..i).rev() {
        if t - times[j] > window {
            break;
        }
        f(units[j] as usize);
    }
    for j in i + 1..times.len() {
        if times[j] - t > window {
            break;
        }
        f(units[j] as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spikes of several trains merged in time order: (samples, units).
    fn merged(trains: &[Vec<i64>]) -> (Vec<i64>, Vec<u32>) {
        let mut all: Vec<(i64, u32)> = trains
            .iter()
            .enumerate()
            .flat_map(|(u, s)| s.iter().map(move |&t| (t, u as u32)))
            .collect();
        all.sort();
        all.into_iter().unzip()
    }

    /// `n` spikes from a seeded generator, at least `gap` samples apart, over `len` samples.
    fn train(seed: u64, n: usize, gap: i64, len: i64) -> Vec<i64> {
        let mut state = seed;
        let mut t = 0i64;
        let mean = len / n as i64;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                t += gap + ((state >> 33) as i64 % (2 * (mean - gap)).max(1));
                t
            })
            .collect()
    }

    fn judge(trains: &[Vec<i64>], sizes: &[f64], window: i64, len: u64) -> Vec<bool> {
        let (samples, clusters) = merged(trains);
        let kept = vec![true; samples.len()];
        let refractory = vec![true; sizes.len()];
        shadow_units(&samples, &clusters, &kept, sizes, &refractory, window, len)
    }

    #[test]
    fn a_unit_that_follows_a_larger_one_is_a_shadow() {
        let len = 3_000_000;
        let big = train(1, 600, 60, len);
        let other = train(2, 500, 60, len);
        // Four of five of big's spikes found again 7 samples later, one in five of other's
        // 9 samples earlier: every spike of the shadow follows one of the two.
        let mut shadow: Vec<i64> = big.iter().step_by(5).map(|t| t + 7).collect();
        shadow.extend(big.iter().skip(1).step_by(5).map(|t| t + 7));
        shadow.extend(other.iter().step_by(5).map(|t| t - 9));
        shadow.sort();
        let out = judge(&[big, other, shadow], &[10.0, 8.0, 2.0], 30, len as u64);
        assert_eq!(out, vec![false, false, true]);
    }

    #[test]
    fn independent_units_are_never_shadows() {
        let len = 3_000_000;
        let trains: Vec<Vec<i64>> = (0..8).map(|s| train(10 + s, 1500, 60, len)).collect();
        let sizes: Vec<f64> = (0..8).map(|s| 10.0 - s as f64).collect();
        assert_eq!(judge(&trains, &sizes, 30, len as u64), vec![false; 8]);
    }

    #[test]
    fn the_larger_unit_stays_and_the_smaller_goes() {
        let len = 3_000_000;
        let a = train(3, 400, 60, len);
        let b: Vec<i64> = a.iter().map(|t| t + 4).collect();
        // Whichever is larger is kept, whatever its id.
        assert_eq!(
            judge(&[a.clone(), b.clone()], &[1.0, 5.0], 30, len as u64),
            vec![true, false]
        );
        assert_eq!(
            judge(&[a, b], &[5.0, 1.0], 30, len as u64),
            vec![false, true]
        );
    }

    #[test]
    fn a_shadow_of_a_shadow_follows_the_unit_both_come_from() {
        let len = 3_000_000;
        let a = train(4, 400, 60, len);
        let b: Vec<i64> = a.iter().map(|t| t + 5).collect();
        let c: Vec<i64> = a.iter().map(|t| t + 11).collect();
        assert_eq!(
            judge(&[a, b, c], &[9.0, 4.0, 2.0], 15, len as u64),
            vec![false, true, true]
        );
    }

    #[test]
    fn spikes_beyond_the_window_or_not_kept_do_not_count() {
        let len = 3_000_000;
        let a = train(5, 400, 100, len);
        let b: Vec<i64> = a.iter().map(|t| t + 31).collect();
        assert_eq!(
            judge(&[a.clone(), b.clone()], &[9.0, 4.0], 30, len as u64),
            vec![false, false]
        );
        assert_eq!(
            judge(&[a.clone(), b.clone()], &[9.0, 4.0], 31, len as u64),
            vec![false, true]
        );
        // Only a's spikes that are not kept lie near b's.
        let (samples, clusters) = merged(&[a, b]);
        let kept: Vec<bool> = clusters.iter().map(|&u| u == 1).collect();
        let out = shadow_units(
            &samples,
            &clusters,
            &kept,
            &[9.0, 4.0],
            &[true, true],
            31,
            len as u64,
        );
        assert_eq!(out, vec![false, false]);
    }

    #[test]
    fn a_unit_that_is_not_refractory_casts_no_shadow() {
        // b repeats a's spikes, but a mixes several units (not refractory): b stays.
        let len = 3_000_000;
        let a = train(7, 400, 60, len);
        let b: Vec<i64> = a.iter().map(|t| t + 3).collect();
        let (samples, clusters) = merged(&[a, b]);
        let kept = vec![true; samples.len()];
        let judge_with = |refractory: &[bool]| {
            shadow_units(
                &samples,
                &clusters,
                &kept,
                &[9.0, 4.0],
                refractory,
                30,
                len as u64,
            )
        };
        assert_eq!(judge_with(&[false, true]), vec![false, false]);
        assert_eq!(judge_with(&[true, true]), vec![false, true]);
    }

    #[test]
    fn a_unit_as_dense_as_chance_is_no_partner() {
        // a fires every 40 samples: every spike of any unit has one of a's within 20 samples,
        // which is chance (41 / 40 > 1), so b is kept.
        let len = 400_000i64;
        let a: Vec<i64> = (1..len / 40).map(|k| k * 40).collect();
        let b = train(6, 300, 60, len);
        assert_eq!(
            judge(&[a, b], &[9.0, 4.0], 20, len as u64),
            vec![false, false]
        );
    }
}
