//! Template centres (Kilosort4 §5.1): the grid of probe positions universal-template detection
//! scores at, each centre's nearest channels and nearest centres, and the Gaussian spatial
//! weights of its channels at every template size. Host code, computed once per probe.
//!
//! Arithmetic follows Kilosort's dtypes: positions are `f32`, and the grid, the automatic
//! `dmin` and all squared distances are computed in `f32` with numpy's `arange`, `linspace`,
//! `median` and `round` (half to even) rules; only the weights are computed in `f64` (and
//! stored as `f32`).

use std::cmp::Ordering;

pub use crate::settings::CentreSettings;
use crate::{Error, Result};

/// Most candidate centres (`|X| x |Y|`) a probe may produce: 2^24, about 10 000 times an
/// NP1.0 probe's 1532. Guards against absurd geometry or spacings (a 1 m probe with a 0.1 um
/// `dmin`) that would otherwise allocate without bound.
const MAX_CANDIDATES: usize = 1 << 24;

/// The kept template centres of a probe (Kilosort's `xcup`, `ycup`, `iC`, `iC2` and spatial
/// weights).
///
/// Nearest lists are ordered by increasing squared distance, ties broken by the lower index
/// (channel or centre): the `(distance^2, index)` rule. Kilosort's own sort may pick another
/// member of a tie at the last place; only set membership matters downstream.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateCentres {
    channels: usize,
    dmin: f32,
    positions: Vec<[f32; 2]>,
    nc: usize,
    nn: usize,
    sizes: usize,
    nearest_channels: Vec<u32>,
    nearest_centres: Vec<u32>,
    weights: Vec<f32>,
}

impl TemplateCentres {
    /// Number of kept centres (`G`).
    #[must_use]
    pub fn count(&self) -> usize {
        self.positions.len()
    }

    /// Number of channels of the probe the centres were built for.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Position `[x, y]` (um) of each centre, in Kilosort's order (x-major over the grid, the
    /// dropped centres left out).
    #[must_use]
    pub fn positions(&self) -> &[[f32; 2]] {
        &self.positions
    }

    /// Position `[x, y]` (um) of centre `g`.
    ///
    /// # Panics
    ///
    /// When `g >= count()`.
    #[must_use]
    pub fn position(&self, g: usize) -> [f32; 2] {
        self.positions[g]
    }

    /// The `dmin` used (the setting, or the one picked from the probe).
    #[must_use]
    pub fn dmin(&self) -> f32 {
        self.dmin
    }

    /// Channels per centre (`nearest_chans` capped at the channel count).
    #[must_use]
    pub fn nc(&self) -> usize {
        self.nc
    }

    /// Centres per spatial max-pool (`nearest_templates` capped at [`count`](Self::count)).
    #[must_use]
    pub fn nn(&self) -> usize {
        self.nn
    }

    /// Number of spatial sizes (`template_sizes`, `S`).
    #[must_use]
    pub fn sizes(&self) -> usize {
        self.sizes
    }

    /// The nearest channels of each centre, `[G, nc]` row-major: `nearest_channels()[g * nc +
    /// i]` is Kilosort's `iC[i, g]`, nearest first.
    #[must_use]
    pub fn nearest_channels(&self) -> &[u32] {
        &self.nearest_channels
    }

    /// The nearest centres of each centre, `[G, nn]` row-major (`iC2[i, g]` at `g * nn + i`),
    /// the centre itself first.
    #[must_use]
    pub fn nearest_centres(&self) -> &[u32] {
        &self.nearest_centres
    }

    /// Spatial weights `[S, G, nc]` row-major: `weights()[(s * G + g) * nc + i]` is `w[s, i,
    /// g] = exp(-d^2 / sigma_s^2)` for the squared distance `d^2` from centre `g` to its `i`-th
    /// nearest channel and `sigma_s = min_template_size * (s + 1)`, normalised to unit L2 over
    /// `i`.
    #[must_use]
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }
}

/// The template centres of a probe with channels at `positions` (`[x, y]` in um) on shanks
/// `shanks` (Kilosort's `kcoords`; any ids), by Kilosort4 §5.1:
///
/// 1. per shank, `ys = arange(ymin, ymax + 0.01, dmin / 2)` and `xs = linspace(xmin, xmax,
///    round((xmax - xmin) / (dminx / 2)) + 1)` (numpy semantics in `f32`, rounding half to
///    even); `Y` and `X` are the sorted unions over shanks;
/// 2. the candidates are all of `X x Y`, x-major (candidate `ix * |Y| + iy`);
/// 3. each candidate's `nc` nearest channels by `(distance^2, channel)`; a candidate is kept
///    when its nearest channel is within `max_channel_distance` (`d^2 <= max^2`);
/// 4. each kept centre's `nn` nearest kept centres by `(distance^2, centre)`, itself first;
/// 5. the spatial weights (see [`TemplateCentres::weights`]). They are computed as
///    `exp(-(d^2 - d0^2) / sigma^2)` with `d0` the nearest channel's distance, which the L2
///    normalisation makes equal to Kilosort's while never underflowing to `0 / 0`.
///
/// # Errors
///
/// [`Error::Input`] for no channels, `positions` and `shanks` of different lengths, a
/// non-finite position, more candidates than 2^24 or no centre kept; [`Error::Setting`] for a
/// zero count or a spacing, distance or size that is not finite and positive.
pub fn template_centres(
    positions: &[[f32; 2]],
    shanks: &[u32],
    settings: &CentreSettings,
) -> Result<TemplateCentres> {
    check_settings(settings)?;
    let channels = positions.len();
    if channels == 0 {
        return Err(Error::Input {
            what: "probe",
            reason: "no channels".into(),
        });
    }
    if shanks.len() != channels {
        return Err(Error::Input {
            what: "probe",
            reason: format!(
                "{channels} channel positions but {} shank ids",
                shanks.len()
            ),
        });
    }
    if u32::try_from(channels).is_err() {
        return Err(Error::Input {
            what: "probe",
            reason: format!("{channels} channels do not fit 32-bit channel indices"),
        });
    }
    if let Some(c) = positions
        .iter()
        .position(|p| !p.iter().all(|v| v.is_finite()))
    {
        return Err(Error::Input {
            what: "probe",
            reason: format!("channel {c} has position {:?}", positions[c]),
        });
    }

    let dmin = match settings.dmin {
        Some(dmin) => dmin as f32,
        None => auto_dmin(positions),
    };
    let (xs, ys) = grid(positions, shanks, dmin, settings.dminx as f32)?;

    let nc = settings.nearest_chans.min(channels);
    let max_d2 = settings.max_channel_distance * settings.max_channel_distance;
    let mut kept = Vec::new();
    let mut nearest_channels = Vec::new();
    let mut nearest_d2 = Vec::new();
    let mut scratch = Vec::with_capacity(channels);
    for &x in &xs {
        for &y in &ys {
            scratch.clear();
            scratch.extend(
                positions
                    .iter()
                    .enumerate()
                    .map(|(c, p)| (squared_distance([x, y], *p), c)),
            );
            nearest(&mut scratch, nc);
            if f64::from(scratch[0].0) <= max_d2 {
                kept.push([x, y]);
                nearest_channels.extend(scratch[..nc].iter().map(|&(_, c)| c as u32));
                nearest_d2.extend(scratch[..nc].iter().map(|&(d2, _)| d2));
            }
        }
    }
    let g_count = kept.len();
    if g_count == 0 {
        return Err(Error::Input {
            what: "probe",
            reason: format!(
                "no template centre lies within max_channel_distance = {} um of a channel",
                settings.max_channel_distance
            ),
        });
    }

    let nn = settings.nearest_templates.min(g_count);
    let mut nearest_centres = Vec::with_capacity(g_count * nn);
    let mut scratch = Vec::with_capacity(g_count);
    for &centre in &kept {
        scratch.clear();
        scratch.extend(
            kept.iter()
                .enumerate()
                .map(|(h, p)| (squared_distance(centre, *p), h)),
        );
        nearest(&mut scratch, nn);
        nearest_centres.extend(scratch[..nn].iter().map(|&(_, h)| h as u32));
    }

    let sizes = settings.template_sizes;
    let mut weights = Vec::with_capacity(sizes * g_count * nc);
    let mut w = vec![0.0f64; nc];
    for s in 0..sizes {
        let sigma = settings.min_template_size * (s + 1) as f64;
        for d2 in nearest_d2.chunks_exact(nc) {
            let d0 = f64::from(d2[0]);
            for (wi, &d) in w.iter_mut().zip(d2) {
                *wi = (-(f64::from(d) - d0) / (sigma * sigma)).exp();
            }
            let norm = w.iter().map(|v| v * v).sum::<f64>().sqrt();
            weights.extend(w.iter().map(|v| (v / norm) as f32));
        }
    }

    Ok(TemplateCentres {
        channels,
        dmin,
        positions: kept,
        nc,
        nn,
        sizes,
        nearest_channels,
        nearest_centres,
        weights,
    })
}

/// Checks every setting is a positive count or a finite positive length.
fn check_settings(settings: &CentreSettings) -> Result<()> {
    let lengths = [
        ("dmin", settings.dmin.unwrap_or(1.0)),
        ("dminx", settings.dminx),
        ("max_channel_distance", settings.max_channel_distance),
        ("min_template_size", settings.min_template_size),
    ];
    for (name, value) in lengths {
        if !(value.is_finite() && value > 0.0) {
            return Err(Error::Setting {
                name,
                reason: format!("must be finite and positive, got {value}"),
            });
        }
    }
    let counts = [
        ("nearest_chans", settings.nearest_chans),
        ("nearest_templates", settings.nearest_templates),
        ("template_sizes", settings.template_sizes),
    ];
    for (name, value) in counts {
        if value == 0 {
            return Err(Error::Setting {
                name,
                reason: "must be at least 1".into(),
            });
        }
    }
    Ok(())
}

/// `dmin` from the probe: the `f32` median (numpy's: the mean of the two middle values for an
/// even count) of the gaps between consecutive distinct channel y values, or 1 when all
/// channels share one y.
fn auto_dmin(positions: &[[f32; 2]]) -> f32 {
    let ys = sorted_unique(positions.iter().map(|p| p[1]).collect());
    let mut gaps: Vec<f32> = ys.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.is_empty() {
        return 1.0;
    }
    gaps.sort_by(f32::total_cmp);
    let m = gaps.len() / 2;
    if !gaps.len().is_multiple_of(2) {
        gaps[m]
    } else {
        (gaps[m - 1] + gaps[m]) / 2.0
    }
}

/// The candidate grid's sorted distinct `X` and `Y`: the union over shanks of each shank's
/// `linspace` in x and `arange` in y.
fn grid(
    positions: &[[f32; 2]],
    shanks: &[u32],
    dmin: f32,
    dminx: f32,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let mut ids = shanks.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for id in ids {
        let on_shank = || {
            positions
                .iter()
                .zip(shanks)
                .filter(move |(_, s)| **s == id)
                .map(|(p, _)| *p)
        };
        let (xmin, xmax) = range(on_shank().map(|p| p[0]));
        let (ymin, ymax) = range(on_shank().map(|p| p[1]));
        let nx = ((xmax - xmin) / (dminx / 2.0)).round_ties_even() + 1.0;
        let ny = ((ymax + 0.01 - ymin) / (dmin / 2.0)).ceil();
        if nx * ny > MAX_CANDIDATES as f32 {
            return Err(too_many(nx * ny));
        }
        xs.extend(linspace(xmin, xmax, nx as usize));
        ys.extend(arange(ymin, ymax + 0.01, dmin / 2.0));
    }
    let (xs, ys) = (sorted_unique(xs), sorted_unique(ys));
    let candidates = xs.len() as f32 * ys.len() as f32;
    if candidates > MAX_CANDIDATES as f32 {
        return Err(too_many(candidates));
    }
    Ok((xs, ys))
}

/// The error for a grid of `candidates` centres.
fn too_many(candidates: f32) -> Error {
    Error::Input {
        what: "probe",
        reason: format!(
            "the template-centre grid would hold {candidates} candidates, more than \
             {MAX_CANDIDATES}: check the positions' units, dmin and dminx"
        ),
    }
}

/// The smallest and largest of `values` (not empty, finite).
fn range(values: impl Iterator<Item = f32>) -> (f32, f32) {
    values.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// numpy's `arange(start, stop, step)` in `f32`: `ceil((stop - start) / step)` values
/// `start + i * (fl(start + step) - start)`.
fn arange(start: f32, stop: f32, step: f32) -> Vec<f32> {
    let count = ((stop - start) / step).ceil().max(0.0) as usize;
    let delta = (start + step) - start;
    (0..count).map(|i| start + i as f32 * delta).collect()
}

/// numpy's `linspace(start, stop, num)` in `f32`: `start + i * ((stop - start) / (num - 1))`,
/// the last value exactly `stop`.
fn linspace(start: f32, stop: f32, num: usize) -> Vec<f32> {
    if num <= 1 {
        return vec![start; num];
    }
    let step = (stop - start) / (num - 1) as f32;
    let mut values: Vec<f32> = (0..num).map(|i| i as f32 * step + start).collect();
    values[num - 1] = stop;
    values
}

/// `values` sorted ascending without repeats.
fn sorted_unique(mut values: Vec<f32>) -> Vec<f32> {
    values.sort_by(f32::total_cmp);
    values.dedup();
    values
}

/// `(xa - xb)^2 + (ya - yb)^2` in `f32`.
fn squared_distance(a: [f32; 2], b: [f32; 2]) -> f32 {
    let (dx, dy) = (a[0] - b[0], a[1] - b[1]);
    dx * dx + dy * dy
}

/// Puts the `n` smallest `(distance^2, index)` pairs first, in increasing order (`n` is at
/// least 1 and at most `items.len()`).
fn nearest(items: &mut [(f32, usize)], n: usize) {
    let order = |a: &(f32, usize), b: &(f32, usize)| -> Ordering {
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
    };
    if n < items.len() {
        items.select_nth_unstable_by(n - 1, order);
    }
    items[..n].sort_unstable_by(order);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Neuropixels 1.0 contact `i`: `x = [43, 11, 59, 27][i % 4]`, `y = 20 * (i / 2)`.
    fn np1(channels: usize) -> Vec<[f32; 2]> {
        (0..channels)
            .map(|i| [[43.0, 11.0, 59.0, 27.0][i % 4], 20.0 * (i / 2) as f32])
            .collect()
    }

    #[test]
    fn centres_np1_without_the_reference_channel() {
        let positions: Vec<[f32; 2]> = np1(384)
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| i != 191)
            .map(|(_, p)| p)
            .collect();
        let centres = template_centres(
            &positions,
            &vec![0; positions.len()],
            &CentreSettings::default(),
        )
        .unwrap();
        assert_eq!(centres.dmin(), 20.0);
        assert_eq!(centres.count(), 1532);
        assert_eq!((centres.nc(), centres.nn(), centres.sizes()), (10, 100, 5));
        // 4 x positions, 383 y positions 0, 10, ..., 3820, x-major.
        assert_eq!(centres.positions()[0], [11.0, 0.0]);
        assert_eq!(centres.positions()[382], [11.0, 3820.0]);
        assert_eq!(centres.positions()[383], [27.0, 0.0]);
        assert_eq!(centres.positions()[1531], [59.0, 3820.0]);
        // Centre (11, 0) lies on channel 1, and is its own nearest centre.
        assert_eq!(centres.nearest_channels()[0], 1);
        assert_eq!(centres.nearest_centres()[0], 0);
        assert_eq!(centres.nearest_channels().len(), 1532 * 10);
        assert_eq!(centres.nearest_centres().len(), 1532 * 100);
        assert_eq!(centres.weights().len(), 5 * 1532 * 10);
    }

    #[test]
    fn centres_np1_first_64_channels() {
        let centres = template_centres(&np1(64), &[0; 64], &CentreSettings::default()).unwrap();
        assert_eq!(centres.dmin(), 20.0);
        assert_eq!(centres.count(), 63 * 4);
    }

    #[test]
    fn centres_weights_are_unit_norm_and_decrease_with_distance() {
        let positions = np1(64);
        let centres = template_centres(&positions, &[0; 64], &CentreSettings::default()).unwrap();
        let (g_count, nc) = (centres.count(), centres.nc());
        for s in 0..centres.sizes() {
            for g in 0..g_count {
                let w = &centres.weights()[(s * g_count + g) * nc..][..nc];
                let norm: f64 = w.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
                assert!(
                    (norm - 1.0).abs() < 1e-6,
                    "size {s} centre {g}: |w|^2 = {norm}"
                );
                assert!(
                    w.windows(2).all(|p| p[0] >= p[1]),
                    "size {s} centre {g}: {w:?}"
                );
                // Against the definition, exp(-d^2 / sigma^2) normalised.
                let [x, y] = centres.positions()[g];
                let sigma = 10.0 * (s + 1) as f64;
                let raw: Vec<f64> = centres.nearest_channels()[g * nc..][..nc]
                    .iter()
                    .map(|&c| {
                        let [cx, cy] = positions[c as usize];
                        let d2 = f64::from(cx - x).powi(2) + f64::from(cy - y).powi(2);
                        (-d2 / (sigma * sigma)).exp()
                    })
                    .collect();
                let norm = raw.iter().map(|v| v * v).sum::<f64>().sqrt();
                for (i, (&a, e)) in w.iter().zip(&raw).enumerate() {
                    let e = e / norm;
                    assert!((f64::from(a) - e).abs() < 1e-6, "{s} {g} {i}: {a} vs {e}");
                }
            }
        }
    }

    #[test]
    fn centres_ties_go_to_the_lower_index() {
        // One column, listed top down: y = 40, 20, 0. dmin 20, so centres at y = 0, 10, ..., 40.
        let positions = [[0.0, 40.0], [0.0, 20.0], [0.0, 0.0]];
        let settings = CentreSettings {
            nearest_chans: 2,
            nearest_templates: 2,
            ..CentreSettings::default()
        };
        let centres = template_centres(&positions, &[0; 3], &settings).unwrap();
        assert_eq!(centres.count(), 5);
        let ic = centres.nearest_channels();
        // Centre (0, 10) is 10 um from channels 1 and 2: channel 1 first, then 2.
        assert_eq!(&ic[2..4], &[1, 2]);
        // Centre (0, 30) is 10 um from channels 0 and 1.
        assert_eq!(&ic[6..8], &[0, 1]);
        // Centre (0, 20) is on channel 1; channels 0 and 2 tie at 20 um: 0 wins.
        assert_eq!(&ic[4..6], &[1, 0]);
        // Centre 2 (y = 20): itself, then centres 1 and 3 tie at 10 um: 1 wins.
        let ic2 = centres.nearest_centres();
        assert_eq!(&ic2[4..6], &[2, 1]);
        // Centre 0 (y = 0): itself, then centre 1.
        assert_eq!(&ic2[0..2], &[0, 1]);
    }

    #[test]
    fn centres_max_channel_distance_is_inclusive() {
        // Channels at y = 0 and 20: centres at y = 0, 10, 20; the middle one is 10 um away.
        let positions = [[0.0, 0.0], [0.0, 20.0]];
        let at = |max_channel_distance| {
            let settings = CentreSettings {
                max_channel_distance,
                ..CentreSettings::default()
            };
            template_centres(&positions, &[0, 0], &settings)
                .unwrap()
                .count()
        };
        assert_eq!(at(10.0), 3);
        assert_eq!(at(9.99), 2);
    }

    #[test]
    fn centres_on_two_shanks_take_the_product_of_both_grids() {
        // Shank 1 is 250 um to the right and 400 um higher. X and Y are the unions of both
        // shanks' grids (8 x, 7 + 7 y); of the 112 candidates only each shank's own 4 x 7 are
        // within 32 um of a channel.
        let mut positions = np1(8);
        let mut shanks = vec![0; 8];
        positions.extend(np1(8).iter().map(|[x, y]| [x + 250.0, y + 400.0]));
        shanks.extend([7; 8]);
        let centres = template_centres(&positions, &shanks, &CentreSettings::default()).unwrap();
        assert_eq!(centres.dmin(), 20.0);
        let xs = sorted_unique(centres.positions().iter().map(|p| p[0]).collect());
        assert_eq!(xs, [11.0, 27.0, 43.0, 59.0, 261.0, 277.0, 293.0, 309.0]);
        assert_eq!(centres.count(), 2 * 4 * 7);
        for &[x, y] in centres.positions() {
            let y0 = if x > 200.0 { 400.0 } else { 0.0 };
            assert!((y0..=y0 + 60.0).contains(&y), "centre ({x}, {y})");
        }
        // x-major: shank 0's first column (y = 0..60), then its second.
        assert_eq!(centres.positions()[6], [11.0, 60.0]);
        assert_eq!(centres.positions()[7], [27.0, 0.0]);
    }

    #[test]
    fn centres_reject_bad_input() {
        let ok = CentreSettings::default();
        let positions = np1(4);
        assert!(matches!(
            template_centres(&[], &[], &ok),
            Err(Error::Input { .. })
        ));
        assert!(matches!(
            template_centres(&positions, &[0; 3], &ok),
            Err(Error::Input { .. })
        ));
        let mut nan = positions.clone();
        nan[2][1] = f32::NAN;
        assert!(matches!(
            template_centres(&nan, &[0; 4], &ok),
            Err(Error::Input { .. })
        ));
        let zeroed = [
            CentreSettings {
                dmin: Some(0.0),
                ..ok.clone()
            },
            CentreSettings {
                dminx: 0.0,
                ..ok.clone()
            },
            CentreSettings {
                max_channel_distance: f64::NAN,
                ..ok.clone()
            },
            CentreSettings {
                nearest_chans: 0,
                ..ok.clone()
            },
            CentreSettings {
                nearest_templates: 0,
                ..ok.clone()
            },
            CentreSettings {
                min_template_size: -1.0,
                ..ok.clone()
            },
            CentreSettings {
                template_sizes: 0,
                ..ok.clone()
            },
        ];
        for settings in zeroed {
            assert!(
                matches!(
                    template_centres(&positions, &[0; 4], &settings),
                    Err(Error::Setting { .. })
                ),
                "{settings:?}"
            );
        }
        // Every grid point at least 3 um from both channels.
        let far = [[0.0, 10.0], [25.0, 0.0], [50.0, 10.0]];
        let settings = CentreSettings {
            dmin: Some(7.0),
            max_channel_distance: 1.0,
            ..ok.clone()
        };
        assert!(matches!(
            template_centres(&far, &[0; 3], &settings),
            Err(Error::Input { .. })
        ));
        // A probe in metres against a spacing in um would be a huge grid.
        let settings = CentreSettings {
            dmin: Some(1e-4),
            ..ok
        };
        assert!(matches!(
            template_centres(&[[0.0, 0.0], [0.0, 3840.0]], &[0, 0], &settings),
            Err(Error::Input { .. })
        ));
    }
}
