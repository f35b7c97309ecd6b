//! Drift correction applied to the recording (`docs/KILOSORT4.md` §3.4): every window whitened
//! and moved by its batch's shifts in one channel mixing, `Kq_b (iKxx W)` for batch `b`.

use cubecl::client::Client;
use dspk_ops::DeviceWindow;
use dspk_ops::linalg::WhiteningMatrix;

use super::{DriftEstimate, ShiftInterpolation, compose};
use crate::preprocessing::Whitener;
use crate::runner::WindowTransform;
use crate::{Error, Result, SortProbe};

/// The per-batch mixing that whitens and moves the channels by the drift estimate's shifts.
struct DriftCorrection {
    estimate: DriftEstimate,
    interpolation: ShiftInterpolation,
    inverse_white: Vec<f64>,
    channels: usize,
    threads: usize,
}

impl DriftCorrection {
    fn new(
        probe: &SortProbe,
        sig_interp: f64,
        estimate: &DriftEstimate,
        whitening: &WhiteningMatrix,
        threads: usize,
    ) -> Result<Self> {
        let x: Vec<f32> = probe.positions().iter().map(|p| p[0]).collect();
        let y: Vec<f32> = probe.positions().iter().map(|p| p[1]).collect();
        let interpolation = ShiftInterpolation::new(&x, &y, sig_interp)?;
        let channels = probe.len();
        let inverse_white = compose(
            interpolation.inverse_kernel(),
            &whitening.dense(),
            channels,
            threads,
        )?;
        Ok(Self {
            estimate: estimate.clone(),
            interpolation,
            inverse_white,
            channels,
            threads,
        })
    }

    /// The mixing matrix of batch `b`, `C x C` row-major.
    fn matrix(&self, b: usize) -> Result<Vec<f64>> {
        let shifts = self.estimate.batch_shifts(b).ok_or(Error::Input {
            what: "drift",
            reason: format!("no shift for batch {b}"),
        })?;
        let target = self
            .interpolation
            .target_kernel(shifts, self.estimate.block_centres())?;
        compose(&target, &self.inverse_white, self.channels, self.threads)
    }
}

/// Whitening and drift correction in one: each window mixed by its batch's matrix (the
/// batch of its first owned sample; with drift correction windows divide the batch, so each
/// lies in one batch and its halos are mixed as that batch's padding is).
pub(super) struct DriftCorrectedWhitening {
    whitener: Whitener,
    correction: DriftCorrection,
    batch: u64,
}

impl DriftCorrectedWhitening {
    /// Corrects by `estimate` the recording whitened by `whitening`, for windows of up to
    /// `max_samples` and batches of `batch` samples, composing the matrices on up to `threads`
    /// host threads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        client: &Client,
        probe: &SortProbe,
        sig_interp: f64,
        estimate: &DriftEstimate,
        whitening: &WhiteningMatrix,
        batch: u64,
        max_samples: usize,
        threads: usize,
    ) -> Result<Self> {
        Ok(Self {
            whitener: Whitener::new(client, Whitener::sparse(client, whitening)?, max_samples)?,
            correction: DriftCorrection::new(probe, sig_interp, estimate, whitening, threads)?,
            batch,
        })
    }
}

impl WindowTransform for DriftCorrectedWhitening {
    fn apply(&mut self, client: &Client, window: &DeviceWindow) -> Result<&DeviceWindow> {
        let b = (window.window().valid().start / self.batch) as usize;
        self.whitener
            .set_dense(client, &self.correction.matrix(b)?)?;
        self.whitener.whiten(client, window)
    }
}
