//! One kernel body on every runtime compiled into this test binary, against an f64 reference,
//! and the run-time choice of runtime through `DSPK_RUNTIME`.

use cubecl::prelude::*;
use dspk_core::test_util::{Rng, assert_close, for_each_runtime};
use dspk_core::{ComputeTarget, Error};

/// `output[i] = input[i] * gain + offset`: the smallest kernel that proves a runtime compiles,
/// launches, reads and writes.
#[cube(launch)]
fn affine(input: &[f32], output: &mut [f32], gain: f32, offset: f32) {
    let i = ABSOLUTE_POS;
    if i < input.len() {
        output[i] = input[i] * gain + offset;
    }
}

#[test]
fn a_trivial_kernel_matches_the_f64_reference_on_every_runtime() {
    for_each_runtime(|target, client| {
        let mut rng = Rng::new(0x5EED);
        // Odd sizes, one smaller than a cube and one spanning several.
        for len in [1usize, 7, 257, 10_007] {
            let input: Vec<f32> = (0..len).map(|_| rng.uniform(-1e3, 1e3) as f32).collect();
            let (gain, offset) = (
                rng.uniform(-3.0, 3.0) as f32,
                rng.uniform(-50.0, 50.0) as f32,
            );
            let input_handle = client.create_from_slice(f32::as_bytes(&input));
            // Fill the output with NaN so an element the kernel skips cannot pass.
            let output_handle = client.create_from_slice(f32::as_bytes(&vec![f32::NAN; len]));
            let cube = 256usize;
            affine::launch(
                client,
                CubeCount::Static(len.div_ceil(cube) as u32, 1, 1),
                CubeDim::new_1d(cube as u32),
                unsafe { BufferArg::from_raw_parts(input_handle, len) },
                unsafe { BufferArg::from_raw_parts(output_handle.clone(), len) },
                gain,
                offset,
            );
            let bytes = client.read_one(output_handle).expect("read back");
            let actual = f32::from_bytes(&bytes);
            let expected: Vec<f64> = input
                .iter()
                .map(|&x| f64::from(x) * f64::from(gain) + f64::from(offset))
                .collect();
            // One f32 multiply and one add (or a fused multiply-add): within 2 ulp of the
            // larger term.
            assert_close(
                &format!("affine on {target}, len {len}"),
                actual,
                &expected,
                1e-4,
                2.5e-7,
            );
        }
    });
}

#[test]
fn a_runtime_that_is_not_compiled_in_is_a_clear_error() {
    for target in ComputeTarget::ALL.into_iter().filter(|t| !t.is_compiled()) {
        let error = ComputeTarget::select(Some(target.name())).unwrap_err();
        assert!(matches!(error, Error::NotCompiled { .. }), "{error}");
        let message = error.to_string();
        for compiled in ComputeTarget::compiled() {
            assert!(message.contains(compiled.name()), "{message}");
        }
    }
}

/// The variable itself: this test re-runs this test binary with `DSPK_RUNTIME` set, so the
/// real `from_env` reads it (tests must not change their own process's environment).
#[test]
fn dspk_runtime_is_read_from_the_environment() {
    if let Ok(expected) = std::env::var("DSPK_FANOUT_CHILD_EXPECTS") {
        let outcome = match ComputeTarget::from_env() {
            Ok(target) => format!("ok {target}"),
            Err(Error::NotCompiled { target, .. }) => format!("not-compiled {target}"),
            Err(Error::UnknownRuntime { name, .. }) => format!("unknown {name}"),
            Err(other) => format!("other {other}"),
        };
        // The parent reads this line: it proves the child ran this check (and not zero tests).
        println!("child outcome: {outcome}");
        assert_eq!(outcome, expected);
        return;
    }
    let mut cases = vec![("opencl".to_string(), "unknown opencl".to_string())];
    for target in ComputeTarget::ALL {
        let expected = if target.is_compiled() {
            format!("ok {target}")
        } else {
            format!("not-compiled {target}")
        };
        cases.push((target.name().to_string(), expected));
    }
    let exe = std::env::current_exe().expect("test binary path");
    let name = "dspk_runtime_is_read_from_the_environment";
    for (value, expected) in cases {
        let output = std::process::Command::new(&exe)
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env("DSPK_RUNTIME", &value)
            .env("DSPK_FANOUT_CHILD_EXPECTS", &expected)
            .output()
            .expect("re-run the test binary");
        assert!(
            output.status.success(),
            "DSPK_RUNTIME={value}: expected `{expected}`:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // A filter that matches no test also succeeds: the child must have run this one test.
        let stdout = String::from_utf8_lossy(&output.stdout);
        for line in [
            format!("child outcome: {expected}"),
            format!("test {name} ... "),
            "test result: ok. 1 passed".to_string(),
        ] {
            assert!(
                stdout.contains(&line),
                "DSPK_RUNTIME={value}: the child's output lacks `{line}`:\n{stdout}"
            );
        }
    }
}
