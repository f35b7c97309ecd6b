//! What a sort fits from the recording before it looks for spikes (`docs/KILOSORT4.md` §2.3,
//! §10.1.1): channel offsets, the whitening matrix, the channels' noise and, for EMUsort, the
//! channel delays. A fit depends only on the recording, the probe and the preprocessing
//! settings, so runs that differ in other settings (a parameter sweep) can share it
//! ([`RunOptions::fit`](crate::RunOptions::fit)).

use dspk_ops::linalg::WhiteningMatrix;

use crate::preprocessing::delays::ChannelDelays;
use crate::{Error, KilosortSettings, Result, SortProbe};

/// The preprocessing a sort fitted: reusable by runs whose [`FitKey`] is the same.
#[derive(Debug, Clone)]
pub struct PreprocessingFit {
    /// The per-channel offsets subtracted before the common reference.
    pub offsets: Vec<f32>,
    /// The local whitening matrix (`Wrot`).
    pub whitening: WhiteningMatrix,
    /// The standard deviation of each preprocessed (unwhitened) channel over the whitening
    /// batches: `sqrt` of the covariance's diagonal.
    pub channel_std: Vec<f32>,
    /// The channel delays (`None` unless `remove_chan_delays`).
    pub delays: Option<ChannelDelays>,
    /// What the fit depends on.
    pub key: FitKey,
}

/// Everything a [`PreprocessingFit`] depends on: the recording's shape, the probe and the
/// preprocessing settings. Two runs with equal keys fit the same values.
#[derive(Debug, Clone, PartialEq)]
pub struct FitKey {
    num_samples: u64,
    sample_rate: f64,
    channels: Vec<usize>,
    positions: Vec<[f32; 2]>,
    settings: KilosortSettings,
}

impl FitKey {
    /// The key of a run over `num_samples` samples at `sample_rate` Hz, on `probe` with
    /// `settings`: only the settings the fit reads are kept (the rest set to defaults).
    #[must_use]
    pub fn new(
        num_samples: u64,
        sample_rate: f64,
        probe: &SortProbe,
        settings: &KilosortSettings,
    ) -> Self {
        let defaults = KilosortSettings::default();
        let fitted = KilosortSettings {
            batch_size: settings.batch_size,
            nskip: settings.nskip,
            whitening_range: settings.whitening_range,
            highpass_cutoff: settings.highpass_cutoff,
            do_car: settings.do_car,
            invert_sign: settings.invert_sign,
            bandpass: settings.bandpass,
            bandpass_order: settings.bandpass_order,
            notch_hz: settings.notch_hz,
            notch_q: settings.notch_q,
            remove_chan_delays: settings.remove_chan_delays,
            max_chan_delay_ms: settings.max_chan_delay_ms,
            ..defaults
        };
        Self {
            num_samples,
            sample_rate,
            channels: probe.channels().to_vec(),
            positions: probe.positions().to_vec(),
            settings: fitted,
        }
    }
}

impl PreprocessingFit {
    /// Checks that this fit was made for a run with `key`.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] naming what differs (the recording, the probe or a preprocessing
    /// setting).
    pub fn check(&self, key: &FitKey) -> Result<()> {
        if self.key == *key {
            return Ok(());
        }
        let what =
            if (self.key.num_samples, self.key.sample_rate) != (key.num_samples, key.sample_rate) {
                "the recording differs (length or sample rate)".to_string()
            } else if (&self.key.channels, &self.key.positions) != (&key.channels, &key.positions) {
                "the probe differs (channels or positions)".to_string()
            } else {
                let ours = serde_json::to_value(&self.key.settings).unwrap_or_default();
                let theirs = serde_json::to_value(&key.settings).unwrap_or_default();
                let differing: Vec<String> = ours
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(name, value)| theirs.get(name.as_str()) != Some(value))
                    .map(|(name, _)| name.clone())
                    .collect();
                format!("preprocessing settings differ: {}", differing.join(", "))
            };
        Err(Error::Setting {
            name: "fit",
            reason: format!("a preprocessing fit cannot be reused here: {what}"),
        })
    }

    /// The channel delay removed from channel `c` (0 without delays).
    #[must_use]
    pub fn delay(&self, c: usize) -> i64 {
        self.delays
            .as_ref()
            .and_then(|d| d.delays.get(c))
            .map_or(0, |&d| i64::from(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_ignore_the_settings_the_fit_does_not_read() {
        let probe = SortProbe::new(vec![0, 1], vec![[0.0, 0.0], [0.0, 20.0]], vec![0, 0]).unwrap();
        let settings = KilosortSettings::emusort();
        let key = FitKey::new(90_000, 30_000.0, &probe, &settings);
        let other_thresholds = KilosortSettings {
            th_universal: 7.0,
            th_learned: 6.0,
            ..settings.clone()
        };
        assert_eq!(
            key,
            FitKey::new(90_000, 30_000.0, &probe, &other_thresholds)
        );
        let fit = PreprocessingFit {
            offsets: vec![0.0; 2],
            whitening: dspk_ops::linalg::zca(&[1.0, 0.0, 0.0, 1.0], 2, 1e-6).unwrap(),
            channel_std: vec![1.0; 2],
            delays: None,
            key,
        };
        let other_filter = KilosortSettings {
            notch_hz: Some(50.0),
            ..settings.clone()
        };
        let error = fit
            .check(&FitKey::new(90_000, 30_000.0, &probe, &other_filter))
            .unwrap_err()
            .to_string();
        assert!(error.contains("notch_hz"), "{error}");
        let error = fit
            .check(&FitKey::new(60_000, 30_000.0, &probe, &settings))
            .unwrap_err()
            .to_string();
        assert!(error.contains("recording"), "{error}");
        assert_eq!(fit.delay(1), 0);
    }
}
