//! The synthetic ground-truth recording the examples run on, held in memory as int16 so that
//! a timed pass measures the device chain, not the synthesis.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dspk::synapse::groundtruth::{GroundTruthConfig, GroundTruthRecording, TrueSpike};
use dspk::{MemoryRecording, RecordingSource};

use crate::{Error, MemoryLimit, checked_sum_of_products};

/// A generated recording: its truth (spikes, units, probe) and its int16 samples in memory.
pub struct InMemory {
    /// The generator, with the true spikes and the channel positions.
    pub truth: GroundTruthRecording,
    /// The stored samples, read from memory by the passes.
    pub source: Arc<MemoryRecording>,
    /// How long generating and storing took.
    pub made_in: Duration,
}

/// Bytes that holding `config`'s recording takes: its int16 samples
/// (channels x samples x 2) and its true spikes (each unit at the higher of the two firing
/// rates, rounded up), every product checked.
///
/// # Errors
///
/// [`Error::Overflow`] when a size does not fit in 64 bits.
pub fn bytes_to_hold(config: &GroundTruthConfig) -> Result<u64, Error> {
    let what = describe(config);
    let samples = [config.channels as u64, config.num_samples, 2];
    let seconds = config.num_samples.div_ceil(config.sample_rate_hz.max(1));
    let rate = config.firing_rate_hz[0]
        .max(config.firing_rate_hz[1])
        .ceil() as u64;
    let spikes = [
        config.units as u64,
        seconds,
        rate,
        size_of::<TrueSpike>() as u64,
    ];
    checked_sum_of_products(&what, &[&samples, &spikes])
}

/// What holding `config`'s recording means, for messages.
fn describe(config: &GroundTruthConfig) -> String {
    format!(
        "the recording in memory ({} channels x {} samples of int16) with its true spikes",
        config.channels, config.num_samples
    )
}

/// Generates `config`'s recording and stores its samples in memory, after checking that they
/// fit in `limit` (so an absurd request is refused before anything is allocated).
///
/// # Errors
///
/// An [`Error`] for a recording that overflows or does not fit; the generator's or the
/// reader's error otherwise.
pub fn generate_in_memory(
    config: &GroundTruthConfig,
    limit: MemoryLimit,
) -> Result<InMemory, Box<dyn std::error::Error>> {
    let needed = bytes_to_hold(config)?;
    limit.check(&describe(config), needed)?;
    let started = Instant::now();
    let truth = GroundTruthRecording::generate(config)?;
    let info = truth.info().clone();
    let mut stored = vec![0u8; info.num_channels() * info.num_samples as usize * 2];
    truth.read_stored(&info.all_channels(), 0..info.num_samples, &mut stored)?;
    let source = Arc::new(MemoryRecording::new(info, stored)?);
    Ok(InMemory {
        truth,
        source,
        made_in: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(channels: usize, num_samples: u64) -> GroundTruthConfig {
        GroundTruthConfig {
            channels,
            num_samples,
            sample_rate_hz: 30_000,
            units: 24,
            firing_rate_hz: [8.0, 8.0],
            ..GroundTruthConfig::default()
        }
    }

    #[test]
    fn holding_counts_int16_samples_and_spikes() {
        let spike = size_of::<TrueSpike>() as u64;
        // 64 channels x 10 s at 30 kHz, 24 units at 8 Hz for 10 s.
        assert_eq!(
            bytes_to_hold(&config(64, 300_000)).unwrap(),
            64 * 300_000 * 2 + 24 * 10 * 8 * spike
        );
    }

    /// `detect --channels 8192 --seconds 1000` asked for 491.52 GB and aborted the process
    /// on the allocation; it is refused before generating anything.
    #[test]
    fn a_recording_over_the_limit_is_refused_before_generating() {
        let limit = MemoryLimit {
            bytes: 24_000_000_000,
            from: "available",
        };
        let error = generate_in_memory(&config(8192, 30_000_000), limit)
            .err()
            .expect("refused");
        let refusal = error.downcast_ref::<Error>().expect("a refusal");
        assert!(matches!(refusal, Error::Memory { needed, .. } if *needed > 491_000_000_000));
    }

    #[test]
    fn sizes_that_overflow_are_refused() {
        assert!(matches!(
            bytes_to_hold(&config(8192, u64::MAX / 4)),
            Err(Error::Overflow { .. })
        ));
    }
}
