//! Progress on stderr when it is a terminal (nothing is drawn otherwise, so logs stay clean):
//! one bar per stage of a sort with its ETA ([`StageBars`]), a bar over any count
//! ([`progress_bar`]), and a stream's windows processed under a bar ([`run_stream`]).

use std::error::Error;
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

/// The bars of a sort's stages. A pass's bar counts its windows with an ETA of its own and is
/// left drawn when the pass ends; a host stage (clustering, merges), which reports only when it
/// ends, shows a spinner while it runs and then one line with its time. Nothing is drawn when
/// stderr is not a terminal (logs stay clean).
pub struct StageBars {
    shown: Option<Shown>,
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
    /// A spinner until the first report (the first stages run on the host).
    #[must_use]
    pub fn new() -> Self {
        Self {
            shown: Some(Shown::Waiting(waiting())),
        }
    }

    /// Shows that `done` of `total` windows of `stage` are done.
    pub fn update(&mut self, stage: &'static str, done: usize, total: usize) {
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

    #[test]
    fn passes_get_bars_and_host_stages_spinners() {
        let mut bars = StageBars::new();
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
