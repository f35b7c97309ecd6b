//! `DSPK_KERNEL_CACHE` in child processes: CubeCL reads its configuration once per process, and
//! a cache is only worth something to the next process.
//!
//! Each test runs [`child_launches_a_kernel_on_every_test_runtime`] (ignored when run alone) in
//! child processes of this test binary with the setting under test, and reads what the child
//! printed: the cache it got and, on the runtimes that cache kernels (CUDA, HIP), how many
//! entries the cache held before and after its launches.

use std::path::{Path, PathBuf};
use std::process::Command;

use cubecl::prelude::*;
use dspk_core::test_util::test_targets;
use dspk_core::{ComputeTarget, KERNEL_CACHE_ENV, KernelCache, KernelCacheOff};

/// Set in the children, so that the child test refuses to run without a parent.
const CHILD_ENV: &str = "DSPK_KERNEL_CACHE_TEST_CHILD";

/// The child test's name, as the harness filters it.
const CHILD_TEST: &str = "child_launches_a_kernel_on_every_test_runtime";

/// `output[i] = input[i] * 3 + 1`.
#[cube(launch)]
fn affine(input: &[f32], output: &mut [f32]) {
    let i = ABSOLUTE_POS;
    if i < input.len() {
        output[i] = input[i] * 3.0 + 1.0;
    }
}

/// Whether this runtime keeps compiled kernels in CubeCL's store.
fn caches_kernels(target: ComputeTarget) -> bool {
    matches!(target, ComputeTarget::Cuda | ComputeTarget::Hip)
}

/// The entries the active CubeCL environment holds for `target`'s compiled kernels.
fn cached_kernels(target: ComputeTarget) -> u64 {
    let prefix = format!("{}/", target.name());
    cubecl::environment::namespaces()
        .iter()
        .filter(|summary| summary.namespace.starts_with(&prefix))
        .map(|summary| summary.entries)
        .sum()
}

#[test]
#[ignore = "run in child processes by the other tests of this file"]
fn child_launches_a_kernel_on_every_test_runtime() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "run by the other tests of this file (with {CHILD_ENV} set)"
    );
    let cache = KernelCache::get();
    println!("cache: {cache:?}");
    for target in test_targets() {
        let client = target
            .client()
            .unwrap_or_else(|e| panic!("cannot open {target}: {e}"));
        // The store is only opened where it is used: elsewhere it must stay untouched.
        let counted = cache.is_on() && caches_kernels(target);
        let before = counted.then(|| cached_kernels(target));
        let input: Vec<f32> = (0..100).map(|i| i as f32 - 50.0).collect();
        let input_handle = client.create_from_slice(f32::as_bytes(&input));
        let output_handle = client.create_from_slice(f32::as_bytes(&[f32::NAN; 100]));
        affine::launch(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(128),
            unsafe { BufferArg::from_raw_parts(input_handle, input.len()) },
            unsafe { BufferArg::from_raw_parts(output_handle.clone(), input.len()) },
        );
        let bytes = client.read_one(output_handle).expect("read back");
        let expected: Vec<f32> = input.iter().map(|x| x * 3.0 + 1.0).collect();
        assert_eq!(f32::from_bytes(&bytes), expected.as_slice(), "on {target}");
        match before {
            Some(before) => println!(
                "launched on {target}: cached kernels {before} -> {}",
                cached_kernels(target)
            ),
            None => println!("launched on {target}"),
        }
    }
}

/// What one child printed.
struct ChildRun {
    /// The `Debug` form of its [`KernelCache`].
    cache: String,
    /// Per runtime: its name, and the cached kernels before and after the launch where counted.
    launches: Vec<(String, Option<(u64, u64)>)>,
}

/// Runs the child test with `DSPK_KERNEL_CACHE` set to `setting`, in `cwd`.
fn run_child(setting: &Path, cwd: &Path) -> ChildRun {
    let output = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--ignored", "--exact", CHILD_TEST, "--nocapture"])
        .env(CHILD_ENV, "1")
        .env(KERNEL_CACHE_ENV, setting)
        .current_dir(cwd)
        .output()
        .expect("start the child test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut run = ChildRun {
        cache: String::new(),
        launches: Vec::new(),
    };
    for line in stdout.lines() {
        if let Some(cache) = line.strip_prefix("cache: ") {
            run.cache = cache.to_string();
        } else if let Some(launch) = line.strip_prefix("launched on ") {
            let (name, counts) = match launch.split_once(": cached kernels ") {
                Some((name, counts)) => {
                    let (before, after) = counts.split_once(" -> ").expect("two counts");
                    let count = |n: &str| n.parse::<u64>().expect("a count");
                    (name, Some((count(before), count(after))))
                }
                None => (launch, None),
            };
            run.launches.push((name.to_string(), counts));
        }
    }
    assert!(
        !run.launches.is_empty(),
        "the child launched nothing:\n{stdout}"
    );
    run
}

/// A fresh directory under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "dspk-kernel-cache-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files under `dir`, recursively (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                files_under(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

#[test]
fn a_second_process_loads_what_the_first_compiled_and_nothing_is_written_elsewhere() {
    let scratch = Scratch::new("shared");
    let directory = scratch.0.join("kernels");
    let first = run_child(&directory, &scratch.0);
    let second = run_child(&directory, &scratch.0);

    let expected = if cfg!(feature = "kernel-cache") {
        format!(
            "{:?}",
            KernelCache::On {
                directory: directory.clone()
            }
        )
    } else {
        format!("{:?}", KernelCache::Off(KernelCacheOff::NotCompiled))
    };
    assert_eq!(first.cache, expected);
    assert_eq!(second.cache, expected);

    let mut cached_somewhere = false;
    for ((name, first_counts), (_, second_counts)) in first.launches.iter().zip(&second.launches) {
        match (first_counts, second_counts) {
            (Some((before, stored)), Some((found, after))) => {
                cached_somewhere = true;
                assert_eq!(*before, 0, "{name}: the cache starts empty");
                assert!(stored > before, "{name}: the first process stored nothing");
                assert_eq!(
                    found, stored,
                    "{name}: the second process sees the first's entries"
                );
                assert_eq!(after, found, "{name}: the second process compiled again");
            }
            (None, None) => {}
            _ => panic!("{name}: counted in one process and not the other"),
        }
    }
    if !cached_somewhere {
        // WGSL and CPU kernels are not cached: the directory stays empty (no database, no
        // build records).
        assert_eq!(files_under(&directory), Vec::<PathBuf>::new());
    }
}

#[test]
fn off_or_an_unusable_directory_leaves_the_cache_off_and_writes_nothing() {
    let scratch = Scratch::new("off");
    // A Cargo.toml makes the scratch directory look like a workspace, where CubeCL's own default
    // would put its database (`target/environment`).
    std::fs::write(scratch.0.join("Cargo.toml"), "").expect("write Cargo.toml");
    let not_a_directory = scratch.0.join("file");
    std::fs::write(&not_a_directory, "").expect("write a file");

    let off = run_child(Path::new("off"), &scratch.0);
    assert_eq!(
        off.cache,
        format!("{:?}", KernelCache::Off(KernelCacheOff::Disabled))
    );

    // A directory that cannot be created (as in a read-only home): off, never an error.
    let unusable = run_child(&not_a_directory.join("kernels"), &scratch.0);
    if cfg!(feature = "kernel-cache") {
        assert!(
            unusable.cache.starts_with("Off(NoDirectory("),
            "{}",
            unusable.cache
        );
    } else {
        assert_eq!(
            unusable.cache,
            format!("{:?}", KernelCache::Off(KernelCacheOff::NotCompiled))
        );
    }

    let mut written = files_under(&scratch.0);
    written.sort();
    assert_eq!(
        written,
        [scratch.0.join("Cargo.toml"), not_a_directory],
        "files appeared in the working directory"
    );
}
