use super::*;
use crate::algorithms::ccg::tests::poisson;

const FS: f64 = 30_000.0;
const NT: usize = 5;
const P: usize = 2;

/// Two orthonormal components over 5 samples.
fn wpca() -> Vec<f32> {
    let s = 0.5f32.sqrt();
    vec![s, s, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
}

/// Four channels: three close together, one far away.
fn positions() -> Vec<[f32; 2]> {
    vec![[10.0, 0.0], [10.0, 20.0], [30.0, 40.0], [0.0, 200.0]]
}

/// One template per unit on channels `[1, 0, 2, 3]` (best channel 1).
fn channels(templates: usize) -> LearnedChannels {
    LearnedChannels {
        channels: [1, 0, 2, 3].repeat(templates),
        nc: 4,
    }
}

/// Spikes of template = unit `u` at `samples[u]`, features `feats` each, merged in time order.
fn spikes_of(trains: &[Vec<i64>], feats: &[f32]) -> (MatchedSpikes, Vec<u32>) {
    let mut all: Vec<(i64, u32)> = Vec::new();
    for (u, s) in trains.iter().enumerate() {
        all.extend(s.iter().map(|&t| (t, u as u32)));
    }
    all.sort();
    let mut spikes = MatchedSpikes::new(4, P);
    for &(t, u) in &all {
        spikes.sample.push(t);
        spikes.template.push(u);
        spikes.score.push(9.0);
        spikes.scale.push(1.0);
        spikes.features.extend_from_slice(feats);
    }
    (spikes, all.iter().map(|&(_, u)| u).collect())
}

/// Features `[4 channels, 2]` with norms 3, 1, 2, 5 on channels 1, 0, 2, 3.
const FEATS: [f32; 8] = [3.0, 0.0, 0.6, 0.8, 0.0, 2.0, 3.0, 4.0];

fn unit(scale: f32) -> Vec<f32> {
    // [C = 4, P = 2]: channel norms 1, 3, 2, 5 (channel order 0..4).
    [0.6, 0.8, 3.0, 0.0, 0.0, 2.0, 3.0, 4.0]
        .iter()
        .map(|v| v * scale)
        .collect()
}

/// The default settings without shadow removal: the few spikes of these tests lie within
/// `shadow_ms` of each other.
fn no_shadows() -> KilosortSettings {
    KilosortSettings {
        shadow_ms: None,
        ..KilosortSettings::default()
    }
}

fn finish(
    spikes: &MatchedSpikes,
    clusters: &[u32],
    units: &[f32],
    settings: &KilosortSettings,
) -> Result<Sorting> {
    let n = units.len() / (4 * P);
    finish_sorting(
        spikes,
        clusters,
        &channels(n),
        units,
        &wpca(),
        NT,
        2,
        &positions(),
        FS,
        1_000_000,
        settings,
    )
}

#[test]
fn duplicates_within_the_window_are_dropped_per_unit() {
    let settings = no_shadows();
    // 0.25 ms at 30 kHz: 7 samples. Unit 1's spikes in between do not reset unit 0's window.
    let (spikes, clusters) = spikes_of(&[vec![0, 3, 7, 8, 14, 20, 21], vec![1, 2, 9]], &FEATS);
    let s = finish(
        &spikes,
        &clusters,
        &[unit(1.0), unit(2.0)].concat(),
        &settings,
    )
    .unwrap();
    let kept_times: Vec<i64> = (0..spikes.len())
        .filter(|&m| s.kept[m])
        .map(|m| spikes.sample[m])
        .collect();
    assert_eq!(kept_times, vec![0, 1, 7, 9, 14, 21]);
    assert_eq!(s.spike_times, kept_times);
    assert_eq!(s.spike_clusters, vec![0, 1, 0, 1, 0, 0]);
    assert_eq!(s.trains(), vec![vec![0, 7, 14, 21], vec![1, 9]]);
    // A wider window: 0.5 ms = 15 samples.
    let wide = KilosortSettings {
        duplicate_spike_ms: 0.5,
        ..no_shadows()
    };
    let s = finish(&spikes, &clusters, &[unit(1.0), unit(2.0)].concat(), &wide).unwrap();
    assert_eq!(s.trains(), vec![vec![0, 20], vec![1]]);
}

#[test]
fn min_isi_keeps_the_larger_of_close_spikes_per_unit() {
    // Unit 0: 0 (norm 1), 40 (norm 3), 70 (norm 2), 200 (norm 1), 230 (norm 1); unit 1 at 50
    // does not interrupt unit 0. 2.5 ms at 30 kHz: 75 samples.
    let (mut spikes, clusters) = spikes_of(&[vec![0, 40, 70, 200, 230], vec![50]], &FEATS);
    let scales = [1.0f32, 3.0, 1.0, 2.0, 1.0, 1.0];
    for (m, &s) in scales.iter().enumerate() {
        for v in &mut spikes.features[m * 8..(m + 1) * 8] {
            *v *= s;
        }
    }
    let units = [unit(1.0), unit(2.0)].concat();
    let settings = KilosortSettings {
        min_isi_ms: Some(2.5),
        ..no_shadows()
    };
    let s = finish(&spikes, &clusters, &units, &settings).unwrap();
    // 40 beats 0; 70 is within 75 of 40 and smaller; 200 is far; 230 ties with 200: the
    // earlier stays.
    assert_eq!(s.trains(), vec![vec![40, 200], vec![50]]);
    assert_eq!(s.kept, vec![false, true, true, false, true, false]);
    // Off (Kilosort): every spike stays.
    let s = finish(&spikes, &clusters, &units, &no_shadows()).unwrap();
    assert_eq!(s.trains(), vec![vec![0, 40, 70, 200, 230], vec![50]]);
    let bad = KilosortSettings {
        min_isi_ms: Some(f64::NAN),
        ..no_shadows()
    };
    assert!(matches!(
        finish(&spikes, &clusters, &units, &bad),
        Err(Error::Setting {
            name: "min_isi_ms",
            ..
        })
    ));
}

#[test]
fn shadow_units_lose_their_spikes_and_the_rest_are_renumbered() {
    // Unit 1 (the smallest) repeats unit 2's spikes 6 samples later; unit 0 fires on its own.
    let big: Vec<i64> = (0..200).map(|k| 1_000 + k * 4_000).collect();
    let own: Vec<i64> = (0..150).map(|k| 2_500 + k * 5_300).collect();
    let shadow: Vec<i64> = big.iter().map(|t| t + 6).collect();
    let (spikes, clusters) = spikes_of(&[own, shadow, big.clone()], &FEATS);
    let units = [unit(1.0), unit(0.5), unit(3.0)].concat();
    let s = finish(&spikes, &clusters, &units, &KilosortSettings::default()).unwrap();
    assert_eq!(s.shadow_units, 1);
    assert_eq!(s.num_units(), 2);
    assert_eq!(s.trains()[1], big);
    assert_eq!(s.kept.iter().filter(|&&k| k).count(), 350);
    // Off: all three units stay.
    let s = finish(&spikes, &clusters, &units, &no_shadows()).unwrap();
    assert_eq!((s.shadow_units, s.num_units()), (0, 3));
    let bad = KilosortSettings {
        shadow_ms: Some(-1.0),
        ..KilosortSettings::default()
    };
    assert!(matches!(
        finish(&spikes, &clusters, &units, &bad),
        Err(Error::Setting {
            name: "shadow_ms",
            ..
        })
    ));
}

#[test]
fn refractory_units_are_good_and_poisson_units_are_mua() {
    let settings = no_shadows();
    let to_samples = |t: Vec<f64>| {
        t.iter()
            .map(|s| (s * FS).round() as i64)
            .collect::<Vec<_>>()
    };
    let good = to_samples(poisson(51, 20.0, 300.0, 0.002));
    let mua = to_samples(poisson(52, 20.0, 300.0, 0.0));
    let (spikes, clusters) = spikes_of(&[good, mua], &FEATS);
    let s = finish(
        &spikes,
        &clusters,
        &[unit(1.0), unit(1.0)].concat(),
        &settings,
    )
    .unwrap();
    assert_eq!(s.labels, vec![UnitLabel::Good, UnitLabel::Mua]);
    for (k, train) in s.trains().iter().enumerate() {
        let seconds: Vec<f64> = train.iter().map(|&t| t as f64 / FS).collect();
        let (_, m) = acg_refractory(&seconds, settings.acg_threshold);
        assert_eq!(s.contamination_pct[k], 100.0 * m.r12);
    }
    assert!(s.contamination_pct[0] < 10.0 && s.contamination_pct[1] > 50.0);
}

#[test]
fn positions_weigh_the_channels_near_the_best_one() {
    let settings = no_shadows();
    let (spikes, clusters) = spikes_of(&[vec![100]], &FEATS);
    let s = finish(&spikes, &clusters, &unit(1.0), &settings).unwrap();
    // Channel 3 is 180 µm from the best channel (1) and left out; weights 3, 1, 2 on channels
    // 1, 0, 2 at (10, 20), (10, 0), (30, 40).
    let [x, y] = s.spike_positions[0];
    assert!((x - 100.0 / 6.0).abs() < 1e-5, "{x}");
    assert!((y - 140.0 / 6.0).abs() < 1e-5, "{y}");
    // All four norms: sqrt(9 + 1 + 4 + 25).
    assert!((s.amplitudes[0] - 39f32.sqrt()).abs() < 1e-6);
    // A limit that takes in channel 3 too.
    let far = KilosortSettings {
        position_limit: 250.0,
        ..no_shadows()
    };
    let s = finish(&spikes, &clusters, &unit(1.0), &far).unwrap();
    let [x, y] = s.spike_positions[0];
    assert!((x - 100.0 / 11.0).abs() < 1e-5 && (y - 1140.0 / 11.0).abs() < 1e-4);
    // No weight at all: the best channel's position.
    let (silent, clusters) = spikes_of(&[vec![100]], &[0.0; 8]);
    let s = finish(&silent, &clusters, &unit(1.0), &settings).unwrap();
    assert_eq!(s.spike_positions[0], [10.0, 20.0]);
}

#[test]
fn every_field_has_its_shape_and_units_without_spikes_are_gone() {
    let settings = no_shadows();
    // Unit 1 has no spike: units 0 and 2 become 0 and 1.
    let (spikes, clusters) = spikes_of(&[vec![10, 40], vec![], vec![25]], &FEATS);
    let units = [unit(1.0), unit(7.0), unit(-2.0)].concat();
    let s = finish(&spikes, &clusters, &units, &settings).unwrap();
    let (n, k, c) = (3, 2, 4);
    assert_eq!((s.num_spikes(), s.num_units()), (n, k));
    assert_eq!(
        (s.channels, s.nt, s.nt0min, s.p, s.pc_channels),
        (c, NT, 2, P, 4)
    );
    assert_eq!((s.sample_rate, s.num_samples), (FS, 1_000_000));
    assert_eq!(s.spike_times, vec![10, 25, 40]);
    assert_eq!(s.spike_clusters, vec![0, 1, 0]);
    assert_eq!(s.spike_templates, vec![0, 2, 0]);
    assert_eq!(
        (s.amplitudes.len(), s.spike_positions.len(), s.kept.len()),
        (n, n, n)
    );
    assert_eq!(s.pc_features.len(), n * P * 4);
    assert_eq!(s.unit_features, [unit(1.0), unit(-2.0)].concat());
    assert_eq!(s.templates.len(), k * NT * c);
    assert_eq!(s.labels.len(), k);
    assert_eq!(s.contamination_pct.len(), k);
    assert_eq!(s.unit_amplitudes, vec![39f32.sqrt(), 2.0 * 39f32.sqrt()]);
    assert_eq!(s.similar_templates.len(), k * k);
    assert!((s.similar_templates[0] - 1.0).abs() < 1e-5);
    // Channels by descending norm of the unit's features: 3 (5), 1 (3), 2 (2), 0 (1).
    assert_eq!(s.pc_feature_ind, vec![3, 1, 2, 0, 3, 1, 2, 0]);
    // Spike 0's features on [3, 1, 2, 0], [P, 4]: component 0 then component 1.
    assert_eq!(
        &s.pc_features[..8],
        &[3.0, 3.0, 0.0, 0.6, 4.0, 0.0, 2.0, 0.8]
    );
    // templates[k, t, c] = Σ_p W[k, c, p] wPCA[p, t]: unit 0, t = 2, channel 3 is 4 * 1.
    assert!((s.templates[2 * c + 3] - 4.0).abs() < 1e-6);
    let h = 0.5f32.sqrt();
    assert!((s.templates[1] - 3.0 * h).abs() < 1e-6);
}

#[test]
fn spikes_without_a_feature_on_a_unit_channel_get_zeros() {
    let settings = no_shadows();
    let (mut spikes, clusters) = spikes_of(&[vec![5]], &FEATS);
    // Give the spike's template only channels 1, 0, 2 and a far one it shares with nobody.
    let mut chans = channels(1);
    chans.channels = vec![1, 0, 2, 4];
    let mut probe = positions();
    probe.push([0.0, 400.0]);
    spikes.features = FEATS.to_vec();
    let mut units = unit(1.0);
    units.extend_from_slice(&[0.0, 0.0]);
    let s = finish_sorting(
        &spikes,
        &clusters,
        &chans,
        &units,
        &wpca(),
        NT,
        2,
        &probe,
        FS,
        100,
        &settings,
    )
    .unwrap();
    // Unit channels by norm: 3 (5), 1 (3), 2 (2), 0 (1), 4 (0); the spike has none on 3.
    assert_eq!(s.pc_feature_ind, vec![3, 1, 2, 0, 4]);
    assert_eq!(
        s.pc_features,
        vec![0.0, 3.0, 0.0, 0.6, 3.0, 0.0, 0.0, 2.0, 0.8, 4.0]
    );
}

#[test]
fn no_spikes_give_an_empty_sorting() {
    let settings = no_shadows();
    let spikes = MatchedSpikes::new(4, P);
    let s = finish(&spikes, &[], &[unit(1.0), unit(2.0)].concat(), &settings).unwrap();
    assert_eq!((s.num_spikes(), s.num_units()), (0, 0));
    assert!(s.kept.is_empty() && s.templates.is_empty() && s.similar_templates.is_empty());
    assert!(s.pc_feature_ind.is_empty() && s.unit_features.is_empty());
    assert_eq!((s.channels, s.p, s.sample_rate), (4, P, FS));
    let s = finish(&spikes, &[], &[], &settings).unwrap();
    assert_eq!(s.num_units(), 0);
}

#[test]
fn bad_input_is_refused() {
    let settings = no_shadows();
    let (mut spikes, clusters) = spikes_of(&[vec![5, 9]], &FEATS);
    let units = unit(1.0);
    assert!(matches!(
        finish(&spikes, &[1, 0], &units, &settings),
        Err(Error::Input { .. })
    ));
    spikes.sample.swap(0, 1);
    assert!(matches!(
        finish(&spikes, &clusters, &units, &settings),
        Err(Error::Input { .. })
    ));
    spikes.sample.swap(0, 1);
    spikes.template[1] = 3;
    assert!(matches!(
        finish(&spikes, &clusters, &units, &settings),
        Err(Error::Input { .. })
    ));
    spikes.template[1] = 0;
    let bad = KilosortSettings {
        duplicate_spike_ms: f64::NAN,
        ..no_shadows()
    };
    assert!(matches!(
        finish(&spikes, &clusters, &units, &bad),
        Err(Error::Setting { .. })
    ));
    assert!(matches!(
        finish(&spikes, &clusters, &units[..7], &settings),
        Err(Error::Input { .. })
    ));
}
