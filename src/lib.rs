//! Shared helpers for dspk's runnable examples and benchmarks: progress bars, human-readable
//! sizes and rates (and the byte counts behind them), command-line flags, a stream driven with
//! a progress bar, error reports as a command-line tool prints them, the checks an example
//! makes before it allocates what it was asked for, local whitening fitted over a stream
//! ([`whitening`]), spikes detected on a stream and scored against known spikes, with the
//! bounds a score must reach ([`events`]), the synthetic recording with known spikes held in
//! memory ([`synthetic`]), sorting with a progress bar and scoring against ground truth
//! ([`sorting`]), the
//! speed of streamed passes as examples print it ([`passes`]) and
//! the arithmetic of the benchmarks' printed figures ([`figures`]). (The library crates never
//! print; examples do.)

// One function sets an environment variable, which Rust 2024 marks unsafe; it is an
// `unsafe fn` whose callers promise no other thread runs yet.
#![deny(unsafe_code)]

use std::error::Error;
use std::ffi::OsStr;
use std::fmt;
use std::process::ExitCode;
use std::time::Instant;

use dspk::SampleFormat;
use dspk::ops::{DeviceWindow, WindowStream};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub mod events;
pub mod figures;
pub mod loader_figures;
pub mod passes;
pub mod recall;
pub mod sorting;
pub mod synthetic;
pub mod view_figures;
pub mod whitening;

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

/// `bytes` in decimal units, as [`dspk::format_bytes`] writes them (`"46.08 MB"`,
/// `"1.20 GB"`), rounded to whole bytes (negative or NaN counts as 0).
#[must_use]
pub fn human_bytes(bytes: f64) -> String {
    dspk::format_bytes(bytes.max(0.0).round() as u64)
}

/// `bytes` moved in `seconds` as a decimal rate: `"6.31 GB/s"`.
#[must_use]
pub fn human_rate(bytes: f64, seconds: f64) -> String {
    format!("{}/s", human_bytes(bytes / seconds.max(f64::MIN_POSITIVE)))
}

/// The bytes of a window of `channels x samples` values stored as `format`: what crosses to
/// the device for a stored window (`2` per value for int16), and what benches count per window.
#[must_use]
pub fn window_bytes(channels: usize, samples: usize, format: SampleFormat) -> u64 {
    channels as u64 * samples as u64 * format.size() as u64
}

/// `bytes` moved in `seconds`, in GB/s (10^9 bytes per second), as the benches print it.
#[must_use]
pub fn gb_per_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(f64::MIN_POSITIVE) / 1e9
}

/// Processes every window of `stream` in order, handing each to `each`, with a progress bar
/// counting `unit` on stderr; returns the seconds from asking for the first window until the
/// device has finished the last (it waits for the device).
///
/// # Errors
///
/// The first error of the stream (a read, an upload, a kernel) or of `each`.
pub fn run_stream(
    stream: &mut WindowStream,
    unit: &str,
    mut each: impl FnMut(&DeviceWindow) -> Result<(), Box<dyn Error>>,
) -> Result<f64, Box<dyn Error>> {
    let bar = progress_bar(stream.schedule().len() as u64, unit);
    let started = Instant::now();
    while let Some(window) = stream.next_window() {
        each(window?)?;
        bar.inc(1);
    }
    stream.workspace().sync()?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(seconds)
}

/// What the command line asked for: to run, or to print the usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flags {
    /// Run with the values read.
    Run,
    /// `-h` or `--help`: print the usage and stop.
    Help,
}

/// Reads command-line arguments `args` (the program name left out) of the form `--name N`:
/// each flag named in `flags` sets its value to a positive whole number; `-h` or `--help`
/// asks for the usage (whatever follows it).
///
/// # Errors
///
/// A message naming the flag whose value is missing, not a whole number or zero, or naming
/// an argument that is not a flag in `flags`.
pub fn parse_flags(
    args: impl IntoIterator<Item = String>,
    flags: &mut [(&str, &mut u64)],
) -> Result<Flags, String> {
    parse_flags_and_fractions(args, flags, &mut [])
}

/// As [`parse_flags`], with `fractions` too: flags of the form `--name X` that set their
/// value to a number from 0 to 1 (`--min-recall 0.9`).
///
/// # Errors
///
/// [`parse_flags`]' messages, and one naming a fraction flag whose value is missing, not a
/// number, or outside 0 to 1.
pub fn parse_flags_and_fractions(
    args: impl IntoIterator<Item = String>,
    flags: &mut [(&str, &mut u64)],
    fractions: &mut [(&str, &mut f64)],
) -> Result<Flags, String> {
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Flags::Help);
        }
        if let Some((name, value)) = flags.iter_mut().find(|(name, _)| *name == arg) {
            **value = args
                .next()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .ok_or(format!("{name} needs a positive whole number"))?;
        } else if let Some((name, value)) = fractions.iter_mut().find(|(name, _)| *name == arg) {
            **value = args
                .next()
                .and_then(|v| v.parse().ok())
                .filter(|v| (0.0..=1.0).contains(v))
                .ok_or(format!("{name} needs a number from 0 to 1"))?;
        } else {
            return Err(format!("unknown argument `{arg}` (try --help)"));
        }
    }
    Ok(Flags::Run)
}

/// The value given to flag `name` (`value`, the next argument) as a whole number from
/// `least` to `most` (`--width 1600`).
///
/// # Errors
///
/// A message naming the flag and the range when the value is missing, not a whole number or
/// outside the range.
pub fn whole_number(
    name: &str,
    value: Option<std::ffi::OsString>,
    least: u64,
    most: u64,
) -> Result<u64, String> {
    value
        .and_then(|v| v.to_str()?.parse::<u64>().ok())
        .filter(|v| (least..=most).contains(v))
        .ok_or(format!(
            "{name} needs a whole number from {least} to {most}"
        ))
}

/// The exit code of an example or benchmark whose body returned `result`: success, or on an
/// error its [`error_report`] printed on stderr and failure (exit status 1).
#[must_use]
pub fn finish(result: Result<(), Box<dyn Error>>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprint!("{}", error_report(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// What a command-line tool prints for `error`: `error: <message>`, then one
/// `  caused by: <message>` line per error in its chain of sources, outermost first. A cause
/// whose message the error above it already quotes is not printed a second time.
#[must_use]
pub fn error_report(error: &(dyn Error + 'static)) -> String {
    let mut report = format!("error: {error}\n");
    let mut above = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let message = inner.to_string();
        if !above.contains(&message) {
            report.push_str(&format!("  caused by: {message}\n"));
        }
        above = message;
        cause = inner.source();
    }
    report
}

/// How a channel's stored values become physical ones, as a person reads it:
/// `"0.5 uV per unit, offset -10 uV"`; the offset is left out when it is zero, and the unit
/// when the channel has none (`"2 per unit"`).
#[must_use]
pub fn describe_scaling(gain: f64, offset: f64, unit: &str) -> String {
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    if offset == 0.0 {
        format!("{gain}{unit} per unit")
    } else {
        format!("{gain}{unit} per unit, offset {offset}{unit}")
    }
}

/// Why an example refuses what it was asked to do, before it allocates or reads anything.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The recording has no samples: there is nothing to read, detect or sort.
    NoSamples {
        /// Its channels.
        channels: usize,
    },
    /// A size computed from the arguments does not fit in 64 bits.
    Overflow {
        /// The size and the arguments it came from, e.g. `"the sample count of --seconds 10"`.
        what: String,
    },
    /// Holding what was asked for needs more memory than the machine has available.
    Memory {
        /// What would be held, with the arguments that size it.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// The limit, bytes.
        limit: MemoryLimit,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSamples { channels } => write!(
                f,
                "the recording holds no samples ({channels} channels of 0 samples): nothing to read"
            ),
            Self::Overflow { what } => {
                write!(f, "{what} does not fit in 64 bits")
            }
            Self::Memory {
                what,
                needed,
                limit,
            } => write!(
                f,
                "{what} needs {} of memory, more than the {} {}; ask for less",
                human_bytes(*needed as f64),
                human_bytes(limit.bytes as f64),
                limit.from,
            ),
        }
    }
}

impl Error for Refusal {}

/// How much memory an example may plan to hold, and where that figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Bytes.
    pub bytes: u64,
    /// Where the figure came from, worded to follow the amount (`"available (MemAvailable
    /// in /proc/meminfo)"`).
    pub from: &'static str,
}

/// The limit where the available memory cannot be read (no `/proc/meminfo`, e.g. macOS,
/// Windows): 16 GB.
pub const FALLBACK_MEMORY_LIMIT: u64 = 16_000_000_000;

impl MemoryLimit {
    /// This machine's limit: `MemAvailable` of `/proc/meminfo` on Linux (what the kernel
    /// estimates can be allocated without swapping), else [`FALLBACK_MEMORY_LIMIT`].
    #[must_use]
    pub fn of_this_machine() -> Self {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_available(&text))
            .map_or(
                Self {
                    bytes: FALLBACK_MEMORY_LIMIT,
                    from: "that examples plan for where the available memory is unknown",
                },
                |bytes| Self {
                    bytes,
                    from: "available (MemAvailable in /proc/meminfo)",
                },
            )
    }

    /// Refuses to hold `needed` bytes for `what` when they are more than this limit.
    ///
    /// # Errors
    ///
    /// [`Refusal::Memory`] naming `what`, the bytes needed and the limit.
    pub fn check(self, what: &str, needed: u64) -> Result<(), Refusal> {
        if needed > self.bytes {
            Err(Refusal::Memory {
                what: what.to_string(),
                needed,
                limit: self,
            })
        } else {
            Ok(())
        }
    }
}

/// The `MemAvailable` line of a `/proc/meminfo` text, in bytes (the file counts in kB of
/// 1024 bytes), or `None` when the line is missing or unreadable.
#[must_use]
pub fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let kilobytes: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kilobytes.checked_mul(1024)
}

/// The product of `factors`, or [`Refusal::Overflow`] naming `what` when it does not fit in
/// a `u64` (sizes computed from command-line arguments: samples, bytes).
///
/// # Errors
///
/// [`Refusal::Overflow`].
pub fn checked_product(what: &str, factors: &[u64]) -> Result<u64, Refusal> {
    factors
        .iter()
        .try_fold(1u64, |product, &factor| product.checked_mul(factor))
        .ok_or_else(|| Refusal::Overflow {
            what: what.to_string(),
        })
}

/// The sum of the products of `terms` (sizes computed from command-line arguments: the bytes
/// of several things held at once), or [`Refusal::Overflow`] naming `what` when a product or
/// the sum does not fit in a `u64`.
///
/// # Errors
///
/// [`Refusal::Overflow`].
pub fn checked_sum_of_products(what: &str, terms: &[&[u64]]) -> Result<u64, Refusal> {
    terms.iter().try_fold(0u64, |sum, factors| {
        sum.checked_add(checked_product(what, factors)?)
            .ok_or_else(|| Refusal::Overflow {
                what: what.to_string(),
            })
    })
}

/// Refuses a recording that has channels but no samples.
///
/// # Errors
///
/// [`Refusal::NoSamples`].
pub fn require_samples(info: &dspk::RecordingInfo) -> Result<(), Refusal> {
    if info.num_samples == 0 {
        Err(Refusal::NoSamples {
            channels: info.num_channels(),
        })
    } else {
        Ok(())
    }
}

/// Whether Mesa's Vulkan device-selection layer would make libwayland print `error:
/// XDG_RUNTIME_DIR is invalid or not set in the environment` (once per Vulkan instance, many
/// times per run), given the values of `XDG_RUNTIME_DIR`, `NODEVICE_SELECT`,
/// `MESA_VK_DEVICE_SELECT` and `DRI_PRIME`: true when the directory is unset or not absolute,
/// the layer is not already off, and no device choice is asked of the layer (then turning it
/// off changes nothing but the noise).
#[must_use]
pub fn device_select_layer_is_noise(
    xdg_runtime_dir: Option<&OsStr>,
    nodevice_select: Option<&OsStr>,
    mesa_vk_device_select: Option<&OsStr>,
    dri_prime: Option<&OsStr>,
) -> bool {
    let runtime_dir_valid =
        xdg_runtime_dir.is_some_and(|dir| std::path::Path::new(dir).is_absolute());
    !runtime_dir_valid
        && nodevice_select.is_none()
        && mesa_vk_device_select.is_none()
        && dri_prime.is_none()
}

/// Turns Mesa's Vulkan device-selection layer off for this process (`NODEVICE_SELECT=1`) when
/// [`device_select_layer_is_noise`] says it would only print `XDG_RUNTIME_DIR` errors: on
/// Linux without a login session (SSH, containers, CI) that layer asks libwayland for a
/// display on every Vulkan instance wgpu creates, and libwayland prints an error each time.
/// The layer only orders GPUs for desktops with several; wgpu ranks adapters itself. Does
/// nothing on other systems.
///
/// # Safety
///
/// Sets an environment variable, so no other thread may be running (or reading the
/// environment): call it first in `main`.
#[allow(unsafe_code)]
pub unsafe fn quiet_vulkan_device_select() {
    let var = std::env::var_os;
    if cfg!(target_os = "linux")
        && device_select_layer_is_noise(
            var("XDG_RUNTIME_DIR").as_deref(),
            var("NODEVICE_SELECT").as_deref(),
            var("MESA_VK_DEVICE_SELECT").as_deref(),
            var("DRI_PRIME").as_deref(),
        )
    {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_in_range_or_a_message_naming_the_flag() {
        let arg = |v: &str| Some(std::ffi::OsString::from(v));
        assert_eq!(whole_number("--width", arg("1600"), 1, 16_000), Ok(1600));
        assert_eq!(whole_number("--from", arg("0"), 0, 9), Ok(0));
        for bad in [
            arg("0"),
            arg("16001"),
            arg("-3"),
            arg("1.5"),
            arg("wide"),
            None,
        ] {
            let message = whole_number("--width", bad, 1, 16_000).unwrap_err();
            assert_eq!(message, "--width needs a whole number from 1 to 16000");
        }
    }

    /// An error that quotes its source in its own message, as thiserror's `{source}` does.
    #[derive(Debug)]
    struct Quoting(Refusal);

    impl fmt::Display for Quoting {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "data.bin: {}", self.0)
        }
    }

    impl Error for Quoting {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    /// An error that leaves its source out of its message.
    #[derive(Debug)]
    struct Wrapping(Quoting);

    impl fmt::Display for Wrapping {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("cannot open the recording")
        }
    }

    impl Error for Wrapping {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    // Guards the examples' error output: it was `Error: Library { path: .., source: .. }`
    // (the Debug dump `main` prints); now each message once, outermost first.
    #[test]
    fn error_report_prints_messages_and_causes_once() {
        let error = Wrapping(Quoting(Refusal::NoSamples { channels: 4 }));
        assert_eq!(
            error_report(&error),
            "error: cannot open the recording\n  caused by: data.bin: the recording holds no \
             samples (4 channels of 0 samples): nothing to read\n"
        );
        let boxed: Box<dyn Error> = Box::new(Refusal::Overflow { what: "x".into() });
        assert_eq!(finish(Err(boxed)), ExitCode::FAILURE);
        assert_eq!(finish(Ok(())), ExitCode::SUCCESS);
    }

    // Guards the preprocess bench's streamed figure, which counted each int16 window's bytes
    // twice (`data().len() * 2` of a buffer already in bytes): docs/PERFORMANCE.md printed
    // 6.1 GB/s for 66.1 windows/s of 384 x 60 000, which is 3.05 GB/s.
    #[test]
    fn a_stored_int16_window_counts_two_bytes_per_value() {
        assert_eq!(
            window_bytes(384, 60_000, SampleFormat::I16),
            384 * 60_000 * 2
        );
        assert_eq!(window_bytes(3, 5, SampleFormat::I16), 30);
        assert_eq!(window_bytes(3, 5, SampleFormat::F32), 60);
        let per_s = gb_per_s(window_bytes(384, 60_000, SampleFormat::I16), 1.0 / 66.1);
        assert!((per_s - 3.046).abs() < 1e-3, "{per_s}");
        assert_eq!(gb_per_s(2_000_000_000, 0.5), 4.0);
    }

    // The bytes the benches print (from `window_bytes`) are what the stream uploads: two per
    // value for a stored int16 window, four for a source without stored values.
    #[test]
    fn window_bytes_agree_with_what_a_stream_uploads() {
        use dspk::ops::{Pipeline, StreamOptions};
        use dspk::{RecordingSource, SampleRate, ScaledOnly, SyntheticRecording};
        use std::sync::Arc;

        let (channels, samples) = (6, 10_000);
        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = SyntheticRecording::new(channels, samples, rate, 3).unwrap();
        let options = StreamOptions {
            window: 3_000,
            extra_halo: 40,
            ..StreamOptions::default()
        };
        dspk::test_util::for_each_runtime(|_, client| {
            let stored: Arc<dyn RecordingSource> = Arc::new(source.clone());
            let scaled: Arc<dyn RecordingSource> = Arc::new(ScaledOnly(source.clone()));
            for (source, format) in [(stored, SampleFormat::I16), (scaled, SampleFormat::F32)] {
                let mut stream =
                    WindowStream::new(client, source, Pipeline::new(), &options).expect("stream");
                let mut counted = 0;
                run_stream(&mut stream, "windows", |window| {
                    counted += window_bytes(channels, window.window().read_len(), format);
                    Ok(())
                })
                .expect("run");
                // Four windows, each with a halo of 40 where the recording has one.
                assert_eq!(counted, window_bytes(channels, 10_000 + 6 * 40, format));
                assert_eq!(stream.uploaded_bytes(), counted, "{format}");
            }
        });
    }

    #[test]
    fn flags_read_positive_whole_numbers() {
        let args = |line: &str| {
            line.split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let (mut seconds, mut channels) = (10, 64);
        let mut parse = |line: &str| {
            parse_flags(
                args(line),
                &mut [("--seconds", &mut seconds), ("--channels", &mut channels)],
            )
        };
        assert_eq!(parse("--channels 32 --seconds 3"), Ok(Flags::Run));
        assert_eq!(parse(""), Ok(Flags::Run));
        assert_eq!(parse("--seconds 4 --help --nonsense"), Ok(Flags::Help));
        for (line, error) in [
            ("--seconds 0", "--seconds needs a positive whole number"),
            ("--seconds -1", "--seconds needs a positive whole number"),
            ("--channels", "--channels needs a positive whole number"),
            ("--units 3", "unknown argument `--units` (try --help)"),
        ] {
            assert_eq!(parse(line), Err(error.to_string()));
        }
        assert_eq!((seconds, channels), (4, 32));
    }

    // Guards detect's `--min-recall` and `--min-precision`: fractions beside whole numbers,
    // and a bound that no score can meet (above 1, NaN) refused rather than always failing.
    #[test]
    fn fraction_flags_read_numbers_from_zero_to_one() {
        let args = |line: &str| {
            line.split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let (mut seconds, mut recall, mut precision) = (10, 0.0, 0.0);
        let mut parse = |line: &str| {
            parse_flags_and_fractions(
                args(line),
                &mut [("--seconds", &mut seconds)],
                &mut [
                    ("--min-recall", &mut recall),
                    ("--min-precision", &mut precision),
                ],
            )
        };
        assert_eq!(
            parse("--seconds 3 --min-recall 0.9 --min-precision 1"),
            Ok(Flags::Run)
        );
        assert_eq!(parse("--min-recall 0"), Ok(Flags::Run));
        for (line, error) in [
            (
                "--min-recall 1.5",
                "--min-recall needs a number from 0 to 1",
            ),
            (
                "--min-recall -0.1",
                "--min-recall needs a number from 0 to 1",
            ),
            (
                "--min-precision NaN",
                "--min-precision needs a number from 0 to 1",
            ),
            (
                "--min-precision",
                "--min-precision needs a number from 0 to 1",
            ),
            ("--seconds 0.5", "--seconds needs a positive whole number"),
            (
                "--max-recall 0.5",
                "unknown argument `--max-recall` (try --help)",
            ),
        ] {
            assert_eq!(parse(line), Err(error.to_string()));
        }
        assert_eq!((seconds, recall, precision), (3, 0.0, 1.0));
    }

    // Guards inspect's gains: they were printed as `value = stored x 5e-1 + -1e1 uV`.
    #[test]
    fn scaling_reads_as_a_sentence() {
        assert_eq!(
            describe_scaling(0.5, -10.0, "uV"),
            "0.5 uV per unit, offset -10 uV"
        );
        assert_eq!(describe_scaling(0.195, 0.0, "uV"), "0.195 uV per unit");
        assert_eq!(describe_scaling(2.0, 1.5, ""), "2 per unit, offset 1.5");
    }

    // Guards inspect on a zero-sample recording, which used to exit 0 having printed nothing
    // about it.
    #[test]
    fn a_recording_without_samples_is_refused() {
        let channels = vec![dspk::ChannelInfo::new("A0", 1.0, 0.0, "uV")];
        let rate = dspk::SampleRate::from_hz(30_000).unwrap();
        let empty =
            dspk::RecordingInfo::new(channels.clone(), 0, rate, dspk::SampleFormat::I16).unwrap();
        let error = require_samples(&empty).unwrap_err();
        assert_eq!(error, Refusal::NoSamples { channels: 1 });
        assert!(
            error
                .to_string()
                .starts_with("the recording holds no samples")
        );
        let one = dspk::RecordingInfo::new(channels, 1, rate, dspk::SampleFormat::I16).unwrap();
        assert_eq!(require_samples(&one), Ok(()));
    }

    // Guards `detect --seconds 18446744073709551615`, whose sample count wrapped around and
    // was quoted as a duration.
    #[test]
    fn sizes_from_arguments_are_computed_checked() {
        let error = checked_product(
            "the sample count of --seconds 18446744073709551615 at 30000 Hz",
            &[u64::MAX, 30_000],
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the sample count of --seconds 18446744073709551615 at 30000 Hz does not fit in 64 bits"
        );
        assert_eq!(
            checked_product("bytes", &[8192, 30_000_000, 2]),
            Ok(491_520_000_000)
        );
        assert_eq!(checked_product("nothing", &[]), Ok(1));
        assert_eq!(
            checked_sum_of_products("both", &[&[32, 90_000, 2], &[24, 3, 8, 48]]),
            Ok(5_760_000 + 27_648)
        );
        for terms in [&[&[u64::MAX, 2][..]][..], &[&[u64::MAX], &[1]]] {
            let error = checked_sum_of_products("the recording", terms).unwrap_err();
            assert_eq!(error.to_string(), "the recording does not fit in 64 bits");
        }
    }

    // Guards `detect --channels 8192 --seconds 1000`, which aborted the process on a 491 GB
    // allocation: the size is compared with the limit first, and the message is readable.
    #[test]
    fn more_than_the_memory_limit_is_refused() {
        let limit = MemoryLimit {
            bytes: 16_000_000_000,
            from: "available (MemAvailable in /proc/meminfo)",
        };
        let error = limit
            .check("8192 channels x 1000 s of int16", 491_520_000_000)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "8192 channels x 1000 s of int16 needs 491.52 GB of memory, more than the 16.00 GB \
             available (MemAvailable in /proc/meminfo); ask for less"
        );
        assert_eq!(limit.check("a little", 16_000_000_000), Ok(()));
    }

    #[test]
    fn mem_available_is_read_from_meminfo() {
        let meminfo = "MemTotal:       16318456 kB\nMemFree:         1050116 kB\n\
                       MemAvailable:   12345678 kB\nBuffers:          123456 kB\n";
        assert_eq!(mem_available(meminfo), Some(12_345_678 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots\n"), None);
        // This machine's own figure is read, when there is one.
        if std::path::Path::new("/proc/meminfo").exists() {
            assert_eq!(
                MemoryLimit::of_this_machine().from,
                "available (MemAvailable in /proc/meminfo)"
            );
        }
    }

    #[test]
    fn device_select_layer_is_turned_off_only_when_it_is_noise() {
        let set = Some(OsStr::new("1"));
        let run = Some(OsStr::new("/run/user/1000"));
        assert!(device_select_layer_is_noise(None, None, None, None));
        assert!(device_select_layer_is_noise(
            Some(OsStr::new("relative")),
            None,
            None,
            None
        ));
        assert!(!device_select_layer_is_noise(run, None, None, None));
        // Already off, or asked to pick a device: left alone.
        assert!(!device_select_layer_is_noise(None, set, None, None));
        assert!(!device_select_layer_is_noise(None, None, set, None));
        assert!(!device_select_layer_is_noise(None, None, None, set));
    }
}
