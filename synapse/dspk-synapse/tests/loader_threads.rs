//! SpikeGLX and Open Ephys read by the `WindowLoader` with several threads: they cut windows
//! as their raw files do (by sample range, through the channel map for Open Ephys) and give
//! the windows of one thread.

mod common;

use std::num::NonZeroUsize;
use std::sync::Arc;

use common::fixture;
use dspk_core::{ChunkSchedule, ConcurrentReads, LoaderOptions, RecordingSource, WindowLoader};
use dspk_synapse::openephys::OpenEphysRecording;
use dspk_synapse::spikeglx::SpikeGlxRecording;

const NP1: &str = "spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin";
const RECORDING: &str = "openephys/2024-05-01_12-00-00/Record Node 101/experiment1/recording1";
const MAIN: &str = "Acquisition_Board-100.Rhythm Data";

/// Every window's stored bytes and scaled values (as bits), channels in reverse order.
fn load(source: &Arc<dyn RecordingSource>, threads: usize) -> Vec<(Vec<u8>, Vec<u32>)> {
    let n = source.info().num_samples;
    let schedule = ChunkSchedule::new(n, n.div_ceil(2) + 7, 3, 5).unwrap();
    let channels: Vec<usize> = source.info().all_channels().into_iter().rev().collect();
    let options = LoaderOptions {
        threads: NonZeroUsize::new(threads),
        read_ahead: true,
        ..LoaderOptions::default()
    };
    let stored = WindowLoader::<u8>::new(source.clone(), channels.clone(), schedule, options);
    let scaled = WindowLoader::<f32>::new(source.clone(), channels, schedule, options);
    stored
        .unwrap()
        .zip(scaled.unwrap())
        .map(|(stored, scaled)| {
            let (stored, scaled) = (stored.unwrap(), scaled.unwrap());
            let bits = scaled.data().iter().map(|v| v.to_bits()).collect();
            (stored.data().to_vec(), bits)
        })
        .collect()
}

#[test]
fn spikeglx_and_open_ephys_give_the_windows_of_one_thread() {
    let sources: [Arc<dyn RecordingSource>; 2] = [
        Arc::new(SpikeGlxRecording::open(fixture(NP1)).unwrap()),
        Arc::new(OpenEphysRecording::open(fixture(RECORDING), MAIN).unwrap()),
    ];
    for source in &sources {
        assert_eq!(
            source.concurrent_reads(),
            ConcurrentReads::ByTime { align: 1 }
        );
        let one = load(source, 1);
        assert_eq!(one.len(), 2);
        for threads in [2, 3, 5] {
            assert!(load(source, threads) == one, "{threads} threads");
        }
    }
}
