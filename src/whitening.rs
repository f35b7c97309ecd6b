//! Local whitening fitted over a stream, as Kilosort4 fits it: the channel covariance of the
//! processed recording accumulated on the device, then each channel whitened from its nearest.

use std::error::Error;
use std::time::Instant;

use dspk::cubecl::client::Client;
use dspk::ops::{ChannelMixing, CovarianceAccumulator, Whitening, WindowStream, linalg};

use crate::run_stream;

/// Streams every window of `stream` (progress counted as `unit`), accumulating on the device
/// the channel covariance (second moment) over the samples each window owns, and returns the
/// local whitening of that covariance: each channel from its `nearest` channels by `positions`
/// (`[x, y]` um, one per channel), regularised by `eps` ([`linalg::local_zca`]). With it come
/// the seconds from asking for the first window until the whitening is on the device (the
/// pass, as [`run_stream`] times it, then the solve).
///
/// # Errors
///
/// The stream's errors; [`linalg::local_zca`]'s (positions not one per channel, `nearest`
/// zero); [`ChannelMixing::from_sparse`]'s (a weight not finite in `f32`).
pub fn fit_local_whitening(
    client: &Client,
    stream: &mut WindowStream,
    unit: &str,
    positions: &[[f64; 2]],
    nearest: usize,
    eps: f64,
) -> Result<(Whitening, f64), Box<dyn Error>> {
    let channels = stream.workspace().channels();
    let mut covariance = CovarianceAccumulator::new(client, channels)?;
    let pass = run_stream(stream, unit, |window| {
        Ok(covariance.add_window(client, window)?)
    })?;
    let solving = Instant::now();
    let xy: Vec<(f64, f64)> = positions.iter().map(|&[x, y]| (x, y)).collect();
    let white = linalg::local_zca(&covariance.finish(client)?, &xy, nearest, eps)?;
    let whitening = whitening_stage(client, &white)?;
    Ok((whitening, pass + solving.elapsed().as_secs_f64()))
}

/// The whitening stage of a (sparse) whitening matrix from [`linalg`], on `client`'s device.
///
/// # Errors
///
/// [`ChannelMixing::from_sparse`]'s (a weight not finite in `f32`).
pub fn whitening_stage(
    client: &Client,
    white: &linalg::WhiteningMatrix,
) -> Result<Whitening, Box<dyn Error>> {
    let indices: Vec<usize> = white.indices().iter().map(|&i| i as usize).collect();
    let mixing = ChannelMixing::from_sparse(client, &indices, white.weights(), white.n())?;
    Ok(Whitening::new(mixing))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dspk::ops::{DeviceArray, Pipeline, Stage, StreamOptions};
    use dspk::{SampleRate, SyntheticRecording};

    use super::*;

    // The covariance is summed over the samples windows own, so the whitening is the same
    // whatever the window size (a halo counted twice, or a window missed, would change it).
    #[test]
    fn the_whitening_does_not_depend_on_the_window_size() {
        let (channels, samples) = (6, 9_000);
        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = Arc::new(SyntheticRecording::new(channels, samples, rate, 5).unwrap());
        let positions: Vec<[f64; 2]> = (0..channels).map(|c| [0.0, 20.0 * c as f64]).collect();
        dspk::test_util::for_each_runtime(|_, client| {
            let mut rng = dspk::test_util::Rng::new(2);
            let input: Vec<f32> = (0..channels * 500)
                .map(|_| rng.uniform(-50.0, 50.0) as f32)
                .collect();
            let input = DeviceArray::from_host(client, &input, channels, 500).unwrap();
            let whitened = |window: u64| -> Vec<f32> {
                let options = StreamOptions {
                    window,
                    extra_halo: 7,
                    ..StreamOptions::default()
                };
                let mut stream =
                    WindowStream::new(client, source.clone(), Pipeline::new(), &options).unwrap();
                let (mut whitening, seconds) =
                    fit_local_whitening(client, &mut stream, "windows", &positions, 3, 1e-6)
                        .unwrap();
                assert!(seconds > 0.0);
                let output = DeviceArray::empty(client, channels, 500).unwrap();
                whitening.apply(client, &input, &output).unwrap();
                output.to_host(client).unwrap()
            };
            let (whole, windowed) = (whitened(9_000), whitened(1_000));
            let scale = whole.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!(scale > 0.0);
            for (i, (a, b)) in whole.iter().zip(&windowed).enumerate() {
                assert!((a - b).abs() <= 1e-4 * scale, "value {i}: {a} vs {b}");
            }
        });
    }
}
