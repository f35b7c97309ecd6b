//! Shared helpers for dspk's runnable examples and benchmarks: progress bars and
//! human-readable sizes and rates. (The library crates never print; examples do. The synthetic
//! recording with known spikes that the `detect` example uses is
//! `dspk::synapse::groundtruth::GroundTruthRecording`.)

#![forbid(unsafe_code)]

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over `len` steps counted in `unit` (e.g. `"windows"`), drawn on stderr, or
/// hidden when stderr is not a terminal (so logs stay clean).
///
/// # Panics
///
/// Never: the template is fixed (a unit with braces in it would be a programming error).
#[must_use]
pub fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
        ))
        .expect("valid progress template")
        .progress_chars("=> "),
    );
    bar
}

/// `bytes` in decimal units: `"46.08 MB"`, `"1.20 GB"`.
#[must_use]
pub fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// `bytes` moved in `seconds` as a decimal rate: `"6.31 GB/s"`.
#[must_use]
pub fn human_rate(bytes: f64, seconds: f64) -> String {
    format!("{}/s", human_bytes(bytes / seconds.max(f64::MIN_POSITIVE)))
}
