//! Channel covariances on the host.

use crate::{Error, Result};

/// The second moment `X X^T / samples` of `x` (`[channels, samples]` channel-major), without
/// removing the mean: the "covariance" Kilosort4 whitens with, computed on high-pass filtered
/// data whose mean is already near zero. `channels x channels` row-major.
///
/// # Errors
///
/// [`Error::Shape`] when `x.len() != channels * samples`; [`Error::InvalidParameter`] when
/// `samples` is 0.
pub fn second_moment(x: &[f64], channels: usize, samples: usize) -> Result<Vec<f64>> {
    check(
        x,
        channels,
        samples,
        1,
        ("second_moment: x", "second_moment: samples"),
    )?;
    Ok(gram(x, channels, samples, samples as f64))
}

/// The sample covariance of the channels of `x` (`[channels, samples]` channel-major):
/// `numpy.cov(x)`, each channel's mean removed and the sum divided by `samples - 1`.
/// `channels x channels` row-major.
///
/// # Errors
///
/// [`Error::Shape`] when `x.len() != channels * samples`; [`Error::InvalidParameter`] when
/// `samples` is below 2.
pub fn covariance(x: &[f64], channels: usize, samples: usize) -> Result<Vec<f64>> {
    check(
        x,
        channels,
        samples,
        2,
        ("covariance: x", "covariance: samples"),
    )?;
    let centred: Vec<f64> = x
        .chunks_exact(samples)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / samples as f64;
            row.iter().map(move |v| v - mean)
        })
        .collect();
    Ok(gram(&centred, channels, samples, (samples - 1) as f64))
}

/// `x x^T / divisor`, symmetric.
fn gram(x: &[f64], channels: usize, samples: usize, divisor: f64) -> Vec<f64> {
    let mut out = vec![0.0; channels * channels];
    for i in 0..channels {
        let xi = &x[i * samples..(i + 1) * samples];
        for j in 0..=i {
            let xj = &x[j * samples..(j + 1) * samples];
            let v = xi.iter().zip(xj).map(|(a, b)| a * b).sum::<f64>() / divisor;
            out[i * channels + j] = v;
            out[j * channels + i] = v;
        }
    }
    out
}

/// Checks the shape of `x` and that there are at least `min` samples; errors named by `what`.
fn check(
    x: &[f64],
    channels: usize,
    samples: usize,
    min: usize,
    (shape_what, samples_what): (&'static str, &'static str),
) -> Result<()> {
    let expected = channels.saturating_mul(samples);
    if x.len() != expected {
        return Err(Error::Shape {
            what: shape_what,
            expected,
            actual: x.len(),
            unit: "values (channels x samples)",
        });
    }
    if samples < min {
        return Err(Error::InvalidParameter {
            what: samples_what,
            reason: format!("{samples} samples: at least {min} needed"),
        });
    }
    Ok(())
}
