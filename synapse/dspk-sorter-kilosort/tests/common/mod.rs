//! What the sorter's integration tests share: small ground-truth recordings, settings with the
//! committed universal templates, the probe of a recording, a source that overwrites samples.

use std::path::Path;

use dspk_core::{ReadRequest, RecordingInfo, RecordingSource};
use dspk_sorter_kilosort::{KilosortSettings, SortProbe};
use dspk_synapse::groundtruth::{Drift, GroundTruthConfig, GroundTruthRecording};

/// `channels` channels, `samples` samples, `units` units, seed 3.
pub(crate) fn sized(
    channels: usize,
    samples: u64,
    units: usize,
    drift: Drift,
) -> GroundTruthRecording {
    GroundTruthRecording::generate(&GroundTruthConfig {
        channels,
        num_samples: samples,
        units,
        drift,
        seed: 3,
        ..GroundTruthConfig::default()
    })
    .unwrap()
}

/// Batches of 1 s, the committed closed-form universal templates.
pub(crate) fn settings(nblocks: usize) -> KilosortSettings {
    KilosortSettings {
        batch_size: 30_000,
        nblocks,
        templates_from_data: false,
        templates_file: Some(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/universal_templates.npz"),
        ),
        ..KilosortSettings::default()
    }
}

/// The probe of a generated recording, every channel sorted.
pub(crate) fn probe_of(recording: &GroundTruthRecording) -> SortProbe {
    SortProbe::from_probe(recording.probe(), recording.info().num_channels(), &[]).unwrap()
}

/// A source that changes what another returns: zeroes (or NaNs) a sample range of some
/// channels. Scaled reads only (the stored path is covered above).
pub(crate) struct Altered {
    pub(crate) inner: GroundTruthRecording,
    pub(crate) channels: std::ops::Range<usize>,
    pub(crate) samples: std::ops::Range<u64>,
    pub(crate) value: f32,
}

impl RecordingSource for Altered {
    fn info(&self) -> &RecordingInfo {
        self.inner.info()
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        self.inner.fill_scaled(request, out)?;
        let range = request.samples();
        let n = request.samples_per_channel();
        for (k, &channel) in request.channels().iter().enumerate() {
            if self.channels.contains(&channel) {
                for s in range.clone().filter(|s| self.samples.contains(s)) {
                    out[k * n + (s - range.start) as usize] = self.value;
                }
            }
        }
        Ok(())
    }
}
