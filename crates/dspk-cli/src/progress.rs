//! One progress bar per stage of a sort, with its ETA, on stderr when it is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of a sort's stages: a stage's bar is left drawn, complete, when the next stage
/// starts, so the terminal keeps one line per stage; nothing is drawn when stderr is not a
/// terminal (logs stay clean).
pub(crate) struct StageBars {
    current: Option<(&'static str, ProgressBar)>,
    style: ProgressStyle,
}

impl StageBars {
    /// No bar yet.
    ///
    /// # Panics
    ///
    /// Never: the template is fixed.
    pub(crate) fn new() -> Self {
        let style = ProgressStyle::with_template(
            "{msg:>24} [{bar:30}] {pos}/{len} windows, {elapsed} (eta {eta})",
        )
        .expect("valid progress template")
        .progress_chars("=> ");
        Self {
            current: None,
            style,
        }
    }

    /// Shows that `done` of `total` windows of `stage` are done, starting a new bar (and so a
    /// new ETA) when the stage changes.
    pub(crate) fn update(&mut self, stage: &'static str, done: usize, total: usize) {
        if self.current.as_ref().is_none_or(|(name, _)| *name != stage) {
            self.finish_stage();
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            bar.set_style(self.style.clone());
            bar.set_message(stage);
            self.current = Some((stage, bar));
        }
        if let Some((_, bar)) = &self.current {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    /// Leaves the current stage's bar drawn as it stands.
    fn finish_stage(&mut self) {
        if let Some((_, bar)) = self.current.take() {
            bar.abandon();
        }
    }

    /// Ends the last bar (call when the sort returns, before printing its report).
    pub(crate) fn finish(mut self) {
        self.finish_stage();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_stage_starts_a_new_bar() {
        let mut bars = StageBars::new();
        bars.update("preprocessing", 1, 4);
        let first = bars.current.as_ref().unwrap().1.clone();
        bars.update("preprocessing", 3, 4);
        assert_eq!(first.position(), 3);
        bars.update("detection", 0, 9);
        let (stage, bar) = bars.current.as_ref().unwrap();
        assert_eq!((*stage, bar.length()), ("detection", Some(9)));
        assert!(first.is_finished());
        bars.finish();
    }
}
