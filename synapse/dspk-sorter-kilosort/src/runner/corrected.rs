//! [`CorrectedWindows`]: the recording as the stages after preprocessing see it, each window
//! preprocessed and then passed through the sort's [`WindowTransform`]s (whitening, drift
//! correction, EMUsort's delay alignment) on the device.

use cubecl::client::Client;
use dspk_core::HaloWindow;
use dspk_ops::DeviceWindow;

use super::report::{PassReport, Progress};
use super::windows::DeviceWindows;
use crate::Result;

/// A step applied on the device to every preprocessed window before a stage sees it, into a
/// buffer of its own (the result is lent until the next call).
pub trait WindowTransform {
    /// `window` transformed.
    ///
    /// # Errors
    ///
    /// Device errors; a window the transform was not made for.
    fn apply(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow>;
}

/// Passes over a recording's windows: [`DeviceWindows`] (preprocessed) and
/// [`CorrectedWindows`] (preprocessed, then whitened, drift-corrected, delay-aligned).
pub trait WindowPasses {
    /// Runs `visit` on the windows `select` picks, in order; `progress` hears after each
    /// window processed.
    ///
    /// # Errors
    ///
    /// The first error of a read, the device, a transform or `visit`; the pass stops there.
    fn pass_selected(
        &mut self,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        select: impl Fn(&HaloWindow) -> bool,
        visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport>;
}

impl WindowPasses for DeviceWindows {
    fn pass_selected(
        &mut self,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        select: impl Fn(&HaloWindow) -> bool,
        visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport> {
        DeviceWindows::pass_selected(self, name, progress, select, visit)
    }
}

/// The recording as the stages after preprocessing see it: every window preprocessed
/// ([`DeviceWindows`]), whitened (per batch with drift correction) and, for EMUsort,
/// delay-aligned, on the device (kept there between passes when it fits).
pub struct CorrectedWindows {
    windows: DeviceWindows,
    client: Client,
    whitening: Box<dyn WindowTransform>,
    alignment: Option<Box<dyn WindowTransform>>,
    halo: u64,
    alignment_lag: usize,
}

impl CorrectedWindows {
    /// `windows` whitened by `whitening` then aligned by `alignment` (a transform and the most
    /// samples it moves a row by) on `client`; `halo` is the samples of halo the windows carry
    /// beyond the preprocessing's settling, which the later stages check their own needs
    /// against ([`check_halo`](Self::check_halo)).
    #[must_use]
    pub fn new(
        client: &Client,
        windows: DeviceWindows,
        whitening: Box<dyn WindowTransform>,
        alignment: Option<(Box<dyn WindowTransform>, usize)>,
        halo: u64,
    ) -> Self {
        let (alignment, alignment_lag) = match alignment {
            Some((transform, lag)) => (Some(transform), lag),
            None => (None, 0),
        };
        Self {
            windows,
            client: client.clone(),
            whitening,
            alignment,
            halo,
            alignment_lag,
        }
    }

    /// Whitens by `whitening` from now on (drift correction's per-batch mixing).
    pub fn set_whitening(&mut self, whitening: Box<dyn WindowTransform>) {
        self.whitening = whitening;
    }

    /// The largest window (halos included) a pass hands out, in samples.
    #[must_use]
    pub fn max_read_len(&self) -> usize {
        self.windows.max_read_len()
    }

    /// Samples in the recording.
    #[must_use]
    pub fn num_samples(&self) -> u64 {
        self.windows.num_samples()
    }

    /// Checks that `stage`, which needs `needed` samples of halo beyond the preprocessing's
    /// settling on each side (plus what the alignment moves rows by), fits in the halo the
    /// windows carry.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`](crate::Error::Setting) on `nt` when it does not.
    pub fn check_halo(&self, stage: &str, needed: usize) -> Result<()> {
        let needed = needed + self.alignment_lag;
        if needed as u64 > self.halo {
            return Err(crate::Error::Setting {
                name: "nt",
                reason: format!(
                    "{stage} needs {needed} samples of halo, the windows carry {}",
                    self.halo
                ),
            });
        }
        Ok(())
    }
}

impl WindowPasses for CorrectedWindows {
    fn pass_selected(
        &mut self,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        select: impl Fn(&HaloWindow) -> bool,
        mut visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport> {
        let Self {
            windows,
            client,
            whitening,
            alignment,
            ..
        } = self;
        windows.pass_selected(name, progress, select, |w| {
            let white = whitening.apply(client, w)?;
            match alignment.as_mut() {
                Some(alignment) => visit(alignment.apply(client, white)?),
                None => visit(white),
            }
        })
    }
}
