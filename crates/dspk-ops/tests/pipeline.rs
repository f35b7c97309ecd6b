//! A `Pipeline` run by `PipelineWorkspace` on stored windows equals the stages' `f64` host
//! references chained, and allocates nothing on the device after the first window.

use dspk_core::SampleFormat;
use dspk_core::test_util::{Rng, assert_close, for_each_runtime};
use dspk_ops::design::{Band, butter, host};
use dspk_ops::{
    ChannelMixing, CommonReference, Pipeline, PipelineWorkspace, Reference, SosFilter, Whitening,
    linalg,
};

#[test]
fn workspace_runs_the_pipeline_on_every_window() {
    for_each_runtime(|target, client| {
        let (channels, max_samples) = (5, 1500);
        let mut rng = Rng::new(21);
        let gains: Vec<f64> = (0..channels).map(|_| rng.uniform(0.1, 3.0)).collect();
        let offsets: Vec<f64> = (0..channels).map(|_| rng.uniform(-5.0, 5.0)).collect();
        let sos = butter(3, Band::Highpass(300.0), 30_000.0).unwrap();
        // A random symmetric positive-definite covariance, whitened locally over 3 channels.
        let a: Vec<f64> = (0..channels * channels)
            .map(|_| rng.uniform(-1.0, 1.0))
            .collect();
        let mut cov = vec![0.0; channels * channels];
        for i in 0..channels {
            for j in 0..channels {
                cov[i * channels + j] = (0..channels)
                    .map(|k| a[i * channels + k] * a[j * channels + k])
                    .sum::<f64>()
                    + if i == j { 0.5 } else { 0.0 };
            }
        }
        let positions: Vec<(f64, f64)> = (0..channels).map(|c| (0.0, 20.0 * c as f64)).collect();
        let white = linalg::local_zca(&cov, &positions, 3, 1e-6).unwrap();
        let indices: Vec<usize> = white.indices().iter().map(|&i| i as usize).collect();
        let mixing =
            ChannelMixing::from_sparse(client, &indices, white.weights(), channels).unwrap();

        let mut workspace = PipelineWorkspace::new(client, channels, max_samples).unwrap();
        workspace.set_stored_scaling(&gains, &offsets).unwrap();
        workspace
            .set_pipeline(
                Pipeline::new()
                    .with(CommonReference::new(Reference::Mean))
                    .with(SosFilter::zero_phase(&sos).unwrap())
                    .with(Whitening::new(mixing)),
            )
            .unwrap();
        assert_eq!(
            workspace.pipeline().stage_names(),
            ["car", "sosfiltfilt", "whitening"]
        );
        let mut after_first = None;
        for samples in [1500, 1001, 1500, 777, 1500, 999] {
            let stored: Vec<i16> = (0..channels * samples)
                .map(|_| rng.below(4000) as i16 - 2000)
                .collect();
            let bytes: Vec<u8> = stored.iter().flat_map(|v| v.to_le_bytes()).collect();
            let output = workspace
                .process_stored_chunk_in_vram(&bytes, SampleFormat::I16, samples)
                .unwrap();
            assert_eq!(output.shape(), dspk_ops::Shape::new(channels, samples));
            let actual = output.to_host(client).unwrap();

            // f64: scale, subtract the channel mean per sample, filter, mix.
            let mut x: Vec<f64> = stored
                .iter()
                .enumerate()
                .map(|(i, &v)| f64::from(v) * gains[i / samples] + offsets[i / samples])
                .collect();
            for s in 0..samples {
                let mean = (0..channels).map(|c| x[c * samples + s]).sum::<f64>() / channels as f64;
                for c in 0..channels {
                    x[c * samples + s] -= mean;
                }
            }
            let filtered: Vec<f64> = x
                .chunks(samples)
                .flat_map(|row| host::sosfiltfilt(&sos, row, None).unwrap())
                .collect();
            let expected = white.apply(&filtered, samples).unwrap();
            let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            assert_close(
                &format!("{target}: window of {samples}"),
                &actual,
                &expected,
                2e-5 * scale,
                0.0,
            );
            let allocations = workspace.device_allocations();
            match after_first {
                None => after_first = Some(allocations),
                Some(first) => assert_eq!(allocations, first, "device buffers grew"),
            }
        }
    });
}
