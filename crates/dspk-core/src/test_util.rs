//! Helpers for tests of dspk and of crates built on it (cargo feature `test-util`).
//!
//! - [`for_each_runtime`] runs one test body on every runtime compiled into the test binary,
//!   narrowed by `DSPK_TEST_RUNTIMES` (comma-separated names; an unknown or missing name fails);
//! - [`check_recording_source`] is the conformance suite every [`RecordingSource`] runs;
//! - [`Rng`] gives seeded random inputs; [`assert_close`] and [`assert_close_f64`] compare
//!   against an `f64` reference.

use cubecl::client::Client;

use crate::{ComputeTarget, Error, RecordingSource};

/// The variable that narrows [`for_each_runtime`]: e.g. `DSPK_TEST_RUNTIMES=cpu` or `wgpu,cpu`.
pub const TEST_RUNTIMES_ENV: &str = "DSPK_TEST_RUNTIMES";

/// The targets a test run covers.
///
/// With `DSPK_TEST_RUNTIMES` set, exactly the runtimes it names, each of which must be
/// compiled in and have a device. Without it, every compiled runtime that has a device here
/// (a runtime compiled in without a device, such as `cuda` on a machine without a GPU, is left
/// out and named on stderr).
///
/// # Panics
///
/// On an unknown name, a named runtime that is not compiled in or has no device, or when no
/// runtime is left: a test run must never pass by running nothing.
#[must_use]
pub fn test_targets() -> Vec<ComputeTarget> {
    let available = ComputeTarget::available();
    let targets: Vec<ComputeTarget> = match std::env::var(TEST_RUNTIMES_ENV) {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|name| {
                let target: ComputeTarget = name
                    .parse()
                    .unwrap_or_else(|e| panic!("{TEST_RUNTIMES_ENV}: {e}"));
                if let Err(e) = target.device() {
                    panic!("{TEST_RUNTIMES_ENV} names {target}: {e}");
                }
                target
            })
            .collect(),
        _ => {
            for target in ComputeTarget::compiled() {
                if !available.contains(&target) {
                    eprintln!("note: {target} is compiled in but has no device here; not tested");
                }
            }
            available
        }
    };
    assert!(
        !targets.is_empty(),
        "no runtime to test on (compiled in: {:?})",
        ComputeTarget::compiled()
    );
    targets
}

/// Runs `body` once on each of [`test_targets`], with that target's client.
///
/// # Panics
///
/// As [`test_targets`], and whatever `body` panics with (prefixed by the runtime's name on
/// stderr, so a failure says which runtime it was).
pub fn for_each_runtime(mut body: impl FnMut(ComputeTarget, &Client)) {
    for target in test_targets() {
        let client = target
            .client()
            .unwrap_or_else(|e| panic!("cannot open {target}: {e}"));
        eprintln!("-- on {target} ({})", client.properties().identity.name);
        body(target, &client);
    }
}

/// The seeded generator tests draw their inputs from: [`SplitMix64`](crate::rng::SplitMix64).
pub use crate::rng::SplitMix64 as Rng;

/// Asserts that `actual` matches the `f64` reference within `abs + rel * |expected|` per value,
/// as [`assert_close_f64`] on the values widened to `f64`.
///
/// # Panics
///
/// As [`assert_close_f64`].
pub fn assert_close(what: &str, actual: &[f32], expected: &[f64], abs: f64, rel: f64) {
    let actual: Vec<f64> = actual.iter().map(|&a| f64::from(a)).collect();
    assert_close_f64(what, &actual, expected, abs, rel);
}

/// The conformance suite for a [`RecordingSource`]: argument checks, `read` against
/// `read_stored * gain + offset`, empty and partial windows, and `can_read_stored` agreeing
/// with what `read_stored` does. Reads at most a few thousand samples.
///
/// # Panics
///
/// On the first violation, saying which.
pub fn check_recording_source<S: RecordingSource + ?Sized>(source: &S) {
    let info = source.info().clone();
    let num_channels = info.num_channels();
    let n = info.num_samples;
    let size = info.stored_format.size();

    // Argument checks, the same for every source.
    let error = source.read(&[num_channels], 0..0, &mut []).unwrap_err();
    assert!(
        matches!(error, Error::ChannelOutOfRange { channel, .. } if channel == num_channels),
        "{error}"
    );
    let error = source.read(&[0], n..n + 1, &mut [0.0]).unwrap_err();
    assert!(matches!(error, Error::SamplesPastEnd { .. }), "{error}");
    #[allow(clippy::reversed_empty_ranges)]
    let error = source.read(&[0], 1..0, &mut []).unwrap_err();
    assert!(
        matches!(error, Error::ReversedSampleRange { .. }),
        "{error}"
    );
    if n > 0 {
        let error = source.read(&[0], 0..1, &mut [0.0; 2]).unwrap_err();
        assert!(
            matches!(
                error,
                Error::OutputLength {
                    expected: 1,
                    actual: 2,
                    ..
                }
            ),
            "{error}"
        );
    }

    // Empty reads succeed and touch nothing.
    source
        .read(&[], 0..n, &mut [])
        .expect("reading no channels");
    source
        .read(&[0], n..n, &mut [])
        .expect("reading no samples");

    // Stored access is what the source says it is.
    let stored_ok = source.read_stored(&[0], 0..0, &mut []);
    assert_eq!(
        stored_ok.is_ok(),
        source.can_read_stored(),
        "can_read_stored() says {} but read_stored gives {stored_ok:?}",
        source.can_read_stored()
    );
    if !source.can_read_stored() {
        assert!(
            matches!(stored_ok, Err(Error::Unsupported { .. })),
            "{stored_ok:?}"
        );
    }

    // read == read_stored * gain + offset, on the edges and inside, channels in any order.
    let len = n.min(1000);
    let mut ranges = vec![0..len, n - len..n];
    if n > 7 {
        ranges.push(n / 3..n / 3 + (n / 3).min(517));
    }
    let channels: Vec<usize> = (0..num_channels)
        .rev()
        .step_by(num_channels.div_ceil(8).max(1))
        .collect();
    for range in ranges {
        let m = (range.end - range.start) as usize;
        let mut scaled = vec![f32::NAN; channels.len() * m];
        source
            .read(&channels, range.clone(), &mut scaled)
            .expect("read");
        assert!(
            scaled.iter().all(|v| !v.is_nan()),
            "read left NaN (unwritten) values"
        );
        if source.can_read_stored() {
            let mut stored = vec![0u8; channels.len() * m * size];
            source
                .read_stored(&channels, range.clone(), &mut stored)
                .expect("read_stored");
            let mut expected = vec![0.0f32; channels.len() * m];
            for (k, &channel) in channels.iter().enumerate() {
                let c = &info.channels[channel];
                info.stored_format.scale_into(
                    &stored[k * m * size..(k + 1) * m * size],
                    c.gain,
                    c.offset,
                    &mut expected[k * m..(k + 1) * m],
                );
            }
            for (i, (a, e)) in scaled.iter().zip(&expected).enumerate() {
                assert!(
                    a.to_bits() == e.to_bits(),
                    "read != read_stored * gain + offset at channel {} sample {}: {a} vs {e}",
                    channels[i / m.max(1)],
                    range.start + (i % m.max(1)) as u64
                );
            }
        }
        // A single channel read alone gives the same values as within a multi-channel read.
        if let Some(&first) = channels.first() {
            let mut alone = vec![0.0f32; m];
            source
                .read(&[first], range.clone(), &mut alone)
                .expect("read one channel");
            assert_eq!(
                alone,
                scaled[..m],
                "one-channel read differs from multi-channel read"
            );
        }
    }
}

/// Asserts that `actual` matches the reference `expected` within `abs + rel * |expected|` per
/// value. A NaN never passes (not even against a NaN reference: tests use finite references).
///
/// # Panics
///
/// On a length mismatch or the first value out of tolerance, naming the index, both values,
/// the difference and the tolerance.
pub fn assert_close_f64(what: &str, actual: &[f64], expected: &[f64], abs: f64, rel: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (index, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let tolerance = abs + rel * e.abs();
        let difference = (a - e).abs();
        assert!(
            difference <= tolerance,
            "{what}: index {index}: actual {a}, expected {e}, difference {difference:e}, \
             tolerance {tolerance:e}"
        );
    }
}

/// Asserts that `actual` matches the `f64` reference within `tol` times the largest
/// `|expected|` per value: for `f64` results (filter designs, host linear algebra) whose
/// small entries carry no relative precision of their own.
///
/// # Panics
///
/// On a length mismatch or the first value out of tolerance, naming the index, both values,
/// the difference and the tolerance.
pub fn assert_close_to_peak(what: &str, actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    let peak = expected
        .iter()
        .fold(0.0_f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    for (index, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let difference = (a - e).abs();
        assert!(
            difference <= tol * peak,
            "{what}: index {index}: actual {a:e}, expected {e:e}, difference {difference:e}, \
             tolerance {tol:e} x peak {peak:e}"
        );
    }
}

/// The stored matrix every recording fixture of the workspace holds (`tests/fixtures/README.md`,
/// "The stored matrix"), computed from its formula: [`CHANNELS`](fixture::CHANNELS) x
/// [`SAMPLES`](fixture::SAMPLES) int16 values.
pub mod fixture {
    /// Samples in every recording fixture.
    pub const SAMPLES: usize = 3000;
    /// Neural channels in every recording fixture.
    pub const CHANNELS: usize = 4;

    /// The stored value at sample `t` of channel `c`: the int16 extremes at `t = 100`
    /// (`i16::MAX`) and `t = 101` (`i16::MIN`), elsewhere
    /// `((37 (c + 1) t + 1000 c) mod 4001) - 2000 + (h >> 24) - 128`
    /// with `h = (t * 2654435761 + c * 40503) mod 2^32`.
    ///
    /// # Panics
    ///
    /// Never: the formula's values lie in `-2128..=2127`.
    #[must_use]
    pub fn matrix_value(t: usize, c: usize) -> i16 {
        if t == 100 {
            return i16::MAX;
        }
        if t == 101 {
            return i16::MIN;
        }
        let h = (t as u32)
            .wrapping_mul(2_654_435_761)
            .wrapping_add((c as u32).wrapping_mul(40_503));
        let v = ((37 * (c + 1) * t + 1000 * c) % 4001) as i32 - 2000 + ((h >> 24) as i32 - 128);
        i16::try_from(v).expect("the matrix fits in i16")
    }

    /// The matrix channel-major (`out[c * SAMPLES + t]`), as `read_stored` returns it for all
    /// channels.
    #[must_use]
    pub fn matrix_channel_major() -> Vec<i16> {
        (0..CHANNELS)
            .flat_map(|c| (0..SAMPLES).map(move |t| matrix_value(t, c)))
            .collect()
    }
}
