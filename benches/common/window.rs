//! The window the upload and preprocess benches time, and how many, from their flags.

use dspk_cli::flags::Reader;

/// `--channels` x `--samples` per window, `--windows` windows streamed, `--reps` timed calls.
pub(crate) struct WindowFlags {
    /// Channels of a window.
    pub(crate) channels: usize,
    /// Samples of a window.
    pub(crate) samples: usize,
    /// Windows streamed.
    pub(crate) windows: usize,
    /// Timed calls of each step.
    pub(crate) reps: usize,
}

impl WindowFlags {
    /// Reads `flag` and its value when it is one of these flags, or `--bench` (which `cargo
    /// bench` passes to every bench without the test harness); whether it was.
    pub(crate) fn read(&mut self, reader: &mut Reader, flag: &str) -> Result<bool, String> {
        let mut count = || reader.whole(flag, 1..=1 << 31).map(|n| n as usize);
        match flag {
            "--channels" => self.channels = count()?,
            "--samples" => self.samples = count()?,
            "--windows" => self.windows = count()?,
            "--reps" => self.reps = count()?,
            "--bench" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}
