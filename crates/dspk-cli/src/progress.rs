//! Progress on stderr: one bar per stage of a sort with its ETA on a terminal, plain lines
//! every few seconds otherwise (a log, a pipe, a batch job: [`StageBars`], [`StageLines`]); a
//! bar over any count ([`progress_bar`]) and a stream's windows processed under a bar
//! ([`run_stream`]), drawn only on a terminal.

use std::error::Error;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use dspk::ops::{DeviceWindow, WindowStream};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over `len` steps counted in `unit` (e.g. `"windows"`), drawn on stderr, or
/// hidden when stderr is not a terminal.
#[must_use]
pub fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}}, eta {{eta}})"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// Processes every window of `stream` in order, handing each to `each`, with a progress bar
/// counting `unit`; returns the seconds from asking for the first window until the device has
/// finished the last (it waits for the device).
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

/// What the terminal shows now.
enum Shown {
    /// A pass over the recording: its bar.
    Pass(&'static str, ProgressBar),
    /// Between passes (a host stage runs, reported only when it ends): a spinner with the time.
    Waiting(ProgressBar),
}

/// The progress of a sort's stages on stderr. On a terminal, bars: a pass's bar counts its
/// windows with an ETA of its own and is left drawn when the pass ends; a host stage
/// (clustering, merges), which reports only when it ends, shows a spinner while it runs and then
/// one line with its time. When stderr is not a terminal, [`StageLines`] every
/// [`LINE_INTERVAL`], so a long run in a log never looks hung.
pub struct StageBars {
    shown: Option<Shown>,
    lines: Option<StageLines<std::io::Stderr>>,
}

/// How often [`StageBars`] writes a line for a running pass when stderr is not a terminal.
pub const LINE_INTERVAL: Duration = Duration::from_secs(5);

/// Progress as plain lines on `out`, each with the time since the first report: a line when a
/// pass starts, at most one per `every` while it runs (its windows and percentage), and one
/// when a stage ends (with its time: from the previous stage's end, so a host stage that only
/// reports its end is timed too). Write errors are ignored: progress never fails a sort.
pub struct StageLines<W: Write> {
    out: W,
    every: Duration,
    started: Instant,
    /// The end of the previous stage (a stage starts there).
    last_end: Instant,
    /// The running pass and when its last line was written.
    running: Option<(&'static str, Instant)>,
}

impl<W: Write> StageLines<W> {
    /// Lines on `out`, a running pass's at most every `every`.
    pub fn new(out: W, every: Duration) -> Self {
        let now = Instant::now();
        Self {
            out,
            every,
            started: now,
            last_end: now,
            running: None,
        }
    }

    /// Reports that `done` of `total` windows of `stage` are done.
    pub fn update(&mut self, stage: &'static str, done: usize, total: usize) {
        let now = Instant::now();
        let at = now.duration_since(self.started).as_secs_f64();
        if done >= total {
            let took = now.duration_since(self.last_end).as_secs_f64();
            let windows = if total > 1 {
                format!(", {total} windows")
            } else {
                String::new()
            };
            let _ = writeln!(
                self.out,
                "{at:>8.1} s  {stage}: done in {took:.1} s{windows}"
            );
            self.last_end = now;
            self.running = None;
            return;
        }
        let due = match self.running {
            Some((name, last)) if name == stage => now.duration_since(last) >= self.every,
            _ => true,
        };
        if due {
            let percent = done * 100 / total.max(1);
            let _ = writeln!(
                self.out,
                "{at:>8.1} s  {stage}: {done}/{total} windows ({percent}%)"
            );
            self.running = Some((stage, now));
        }
    }

    /// What was written (for tests and callers that keep the lines).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The bar of a pass.
fn pass_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg:>24} [{bar:30}] {pos}/{len} windows, {elapsed} (eta {eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// A spinner while a host stage runs.
fn waiting() -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    spinner.set_style(
        ProgressStyle::with_template("{msg:>24} {spinner} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message("working");
    spinner.enable_steady_tick(Duration::from_millis(200));
    spinner
}

impl Default for StageBars {
    fn default() -> Self {
        Self::new()
    }
}

impl StageBars {
    /// On a terminal, a spinner until the first report (the first stages run on the host);
    /// otherwise [`StageLines`] on stderr every [`LINE_INTERVAL`].
    #[must_use]
    pub fn new() -> Self {
        if std::io::stderr().is_terminal() {
            Self {
                shown: Some(Shown::Waiting(waiting())),
                lines: None,
            }
        } else {
            Self {
                shown: None,
                lines: Some(StageLines::new(std::io::stderr(), LINE_INTERVAL)),
            }
        }
    }

    /// Shows that `done` of `total` windows of `stage` are done.
    pub fn update(&mut self, stage: &'static str, done: usize, total: usize) {
        if let Some(lines) = &mut self.lines {
            lines.update(stage, done, total);
            return;
        }
        let ended = done >= total;
        match self.shown.take() {
            Some(Shown::Pass(name, bar)) if name == stage => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                self.shown = Some(if ended {
                    bar.abandon();
                    Shown::Waiting(waiting())
                } else {
                    Shown::Pass(name, bar)
                });
                return;
            }
            Some(Shown::Pass(_, bar)) => bar.abandon(),
            Some(Shown::Waiting(spinner)) if ended && total <= 1 => {
                // A host stage that has just ended: the spinner ran for it.
                spinner.set_style(
                    ProgressStyle::with_template("{msg:>24} done in {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                spinner.set_message(stage);
                spinner.abandon();
                self.shown = Some(Shown::Waiting(waiting()));
                return;
            }
            Some(Shown::Waiting(spinner)) => spinner.finish_and_clear(),
            None => {}
        }
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        bar.set_style(pass_style());
        bar.set_message(stage);
        bar.set_position(done as u64);
        self.shown = Some(if ended {
            bar.abandon();
            Shown::Waiting(waiting())
        } else {
            Shown::Pass(stage, bar)
        });
    }

    /// Ends the display (call when the sort returns, before printing its report).
    pub fn finish(mut self) {
        match self.shown.take() {
            Some(Shown::Pass(_, bar)) => bar.abandon(),
            Some(Shown::Waiting(spinner)) => spinner.finish_and_clear(),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(lines: StageLines<Vec<u8>>) -> Vec<String> {
        let text = String::from_utf8(lines.into_inner()).unwrap();
        // Without the time column (the first 12 characters).
        text.lines().map(|l| l[12..].to_string()).collect()
    }

    #[test]
    fn lines_report_each_pass_at_its_start_and_end_and_host_stages_at_their_end() {
        let mut lines = StageLines::new(Vec::new(), Duration::from_secs(3600));
        lines.update("whitening fit", 1, 20);
        lines.update("whitening fit", 2, 20); // within the interval: no line
        lines.update("whitening fit", 20, 20);
        lines.update("first clustering", 1, 1);
        lines.update("detection", 0, 7);
        lines.update("detection", 7, 7);
        let text = written(lines);
        assert_eq!(text.len(), 5, "{text:?}");
        assert_eq!(text[0], "whitening fit: 1/20 windows (5%)");
        assert!(
            text[1].starts_with("whitening fit: done in ") && text[1].ends_with(" s, 20 windows")
        );
        assert!(text[2].starts_with("first clustering: done in ") && text[2].ends_with(" s"));
        assert_eq!(text[3], "detection: 0/7 windows (0%)");
        assert!(text[4].starts_with("detection: done in "), "{text:?}");
        // Each line starts with the time since the first report.
        let mut lines = StageLines::new(Vec::new(), Duration::ZERO);
        lines.update("matching", 1, 3);
        lines.update("matching", 2, 3);
        let text = String::from_utf8(lines.into_inner()).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.lines().all(|l| {
            l.trim_start()
                .split(' ')
                .next()
                .unwrap()
                .parse::<f64>()
                .is_ok()
        }));
        assert!(text.ends_with("matching: 2/3 windows (66%)\n"), "{text}");
    }

    #[test]
    fn passes_get_bars_and_host_stages_spinners() {
        let mut bars = StageBars {
            shown: Some(Shown::Waiting(waiting())),
            lines: None,
        };
        assert!(matches!(bars.shown, Some(Shown::Waiting(_))));
        bars.update("preprocessing", 1, 4);
        let Some(Shown::Pass("preprocessing", first)) = &bars.shown else {
            panic!("a pass shows a bar")
        };
        let first = first.clone();
        bars.update("preprocessing", 3, 4);
        assert_eq!(first.position(), 3);
        // The pass ends: its bar stays, a spinner runs for what follows.
        bars.update("preprocessing", 4, 4);
        assert!(first.is_finished());
        assert!(matches!(bars.shown, Some(Shown::Waiting(_))));
        // A host stage reports its end: a new spinner for the next one.
        bars.update("clustering", 1, 1);
        assert!(matches!(bars.shown, Some(Shown::Waiting(_))));
        bars.update("detection", 0, 9);
        let Some(Shown::Pass(stage, bar)) = &bars.shown else {
            panic!("a pass shows a bar")
        };
        assert_eq!((*stage, bar.length()), ("detection", Some(9)));
        bars.finish();
        let bar = progress_bar(3, "runs");
        assert_eq!(bar.length(), Some(3));
    }

    // A stream run under a bar hands every window over, in order, and waits for the device.
    #[test]
    fn run_stream_hands_over_every_window() {
        use dspk::ops::{Pipeline, StreamOptions};
        use dspk::{SampleRate, SyntheticRecording};
        use std::sync::Arc;

        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = Arc::new(SyntheticRecording::new(4, 7_000, rate, 3).unwrap());
        let options = StreamOptions {
            window: 3_000,
            ..StreamOptions::default()
        };
        dspk::test_util::for_each_runtime(|_, client| {
            let mut stream =
                WindowStream::new(client, source.clone(), Pipeline::new(), &options).unwrap();
            let mut starts = Vec::new();
            let seconds = run_stream(&mut stream, "windows", |window| {
                starts.push(window.start());
                Ok(())
            })
            .unwrap();
            assert!(seconds > 0.0);
            assert_eq!(starts.len(), 3);
            assert!(
                starts.windows(2).all(|pair| pair[0] < pair[1]),
                "{starts:?}"
            );
        });
    }
}
