//! One progress bar per stage of a sort, with its ETA, on stderr when it is a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
    }
}
