//! The front half of a Kilosort4 sort (`docs/KILOSORT4.md` §2-5): preprocessing fit,
//! universal templates, drift estimation and correction, detection with universal templates.
//! Every pass runs on the device through [`DeviceWindows`]; only results come back (the
//! covariance, clips, spikes).
//!
//! Differences from Kilosort 4.1.7, each on purpose:
//! - the universal templates are learned once, from the whitened recording, and used by both
//!   detection passes (Kilosort learns them again after drift correction, from a random
//!   draw that depends on the drift pass);
//! - a batch without spikes gets no drift shift (Kilosort shifts it by about -675 µm,
//!   §3.3), see [`drift`](crate::drift);
//! - the filter and offsets of [`preprocess`](crate::preprocessing), and windows whose spikes
//!   see real data across window edges (Kilosort's batches see only their own samples in the
//!   maximum over ±`nt0min` samples, so a spike near a batch edge can be found twice).

use std::sync::Arc;
use std::time::Instant;

use cubecl::client::Client;
use dspk_core::{ComputeTarget, RecordingSource};
use dspk_ops::DeviceWindow;
use dspk_ops::linalg::WhiteningMatrix;

use crate::detection::centres::{TemplateCentres, template_centres};
use crate::preprocessing::delays::{ChannelDelays, DelayAligner, DelayEstimator};
use crate::detection::{Spikes, UniversalDetector};
use crate::drift::{DriftEstimate, DriftSpikes, ShiftInterpolation, compose, estimate_drift};
use crate::preprocessing::{FitKey, PreprocessingFit};
use crate::algorithms::hdbscan::{HdbscanSettings, hdbscan_labels};
use crate::preprocessing::{
    Preprocessing, Whitener, channel_offsets, fit_whitening, selected_ranges, whitening_batches,
};
use crate::runner::{Progress, StageReport};
use crate::detection::universal::{
    ClipHarvester, ClipSettings, UniversalTemplates, learn_templates_scaled, scale_clips,
};
use crate::runner::{DeviceWindows, PassReport, resident_budget};
use crate::{Error, KilosortSettings, Result, SortProbe};

/// How the recording is cut and where it goes, beyond the settings.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Samples each window owns (`None`: `batch_size`). Another length is allowed only with
    /// drift correction off (`nblocks = 0`): drift shifts are per batch.
    pub window: Option<u64>,
    /// The device the client belongs to, so the reader can page-lock its buffers for it.
    pub target: Option<ComputeTarget>,
    /// A preprocessing fit to reuse instead of fitting one (offsets, whitening, delays): from
    /// an earlier run on the same recording and probe with the same preprocessing settings,
    /// as a parameter sweep does. Checked against the run ([`PreprocessingFit::check`]).
    pub fit: Option<Arc<PreprocessingFit>>,
}

/// What the front half found: spikes with their features on the drift-corrected recording,
/// and everything fitted on the way.
#[derive(Debug)]
pub struct FrontHalf {
    /// The detected spikes (time, centre, amplitude, position, features).
    pub spikes: Spikes,
    /// The universal templates detection used.
    pub templates: UniversalTemplates,
    /// The preprocessing fit: offsets, whitening, channel noise, channel delays (the one
    /// [`RunOptions::fit`] gave, when it gave one).
    pub fit: Arc<PreprocessingFit>,
    /// The template centres.
    pub centres: TemplateCentres,
    /// The drift estimate (`None` with `nblocks = 0`).
    pub drift: Option<DriftEstimate>,
    /// One report per stage, in order.
    pub stages: Vec<StageReport>,
}

/// Runs the front half of Kilosort4 on `source` read through `probe`, on `client`.
/// `progress` hears after every window of every pass.
///
/// # Errors
///
/// [`Error::Setting`] for settings out of range or inconsistent with the options;
/// [`Error::Input`] for a recording shorter than a template, a probe naming channels the
/// recording lacks, NaN or infinite samples; read and device errors.
pub fn run_front(
    client: &Client,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
    settings: &KilosortSettings,
    options: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<FrontHalf> {
    Ok(front_half(client, source, probe, settings, options, progress)?.0)
}

/// As [`run_front`], also handing back the recording's windows with the preprocessing,
/// whitening and drift correction the front half fitted, for the passes of the back half.
///
/// # Errors
///
/// As [`run_front`].
pub fn front_half(
    client: &Client,
    source: Arc<dyn RecordingSource>,
    probe: &SortProbe,
    settings: &KilosortSettings,
    options: &RunOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(FrontHalf, CorrectedWindows)> {
    settings.validate()?;
    let info = source.info().clone();
    check_input(&info, probe, settings)?;
    let batch = settings.batch_size;
    let window = options.window.unwrap_or(batch);
    if settings.nblocks > 0 && window != batch {
        return Err(Error::Setting {
            name: "nblocks",
            reason: format!(
                "drift correction shifts whole batches: windows of {window} samples need batch_size = {window} or nblocks = 0"
            ),
        });
    }
    let (nt, nt0min) = (settings.nt, settings.trough());
    let sample_rate = info.sample_rate.as_hz();
    let key = FitKey::new(info.num_samples, sample_rate, probe, settings);
    let reused = options.fit.clone();
    if let Some(fit) = &reused {
        fit.check(&key)?;
    }
    let mut stages = Vec::new();

    // Offsets: the mean of each channel over the first batch, read on the host.
    let offsets = match &reused {
        Some(fit) => fit.offsets.clone(),
        None => {
            let started = Instant::now();
            let sign = if settings.invert_sign { -1.0 } else { 1.0 };
            let first = 0..batch.min(info.num_samples);
            let read = probe.len() as u64 * first.end * info.stored_format.size() as u64;
            let offsets = channel_offsets(source.as_ref(), probe.channels(), first, sign)?;
            let mut pass = host_step("channel offsets", started);
            pass.read_bytes = read;
            stages.push(StageReport::new(client, pass, None));
            offsets
        }
    };
    let preprocessing = Preprocessing::new(offsets.clone(), settings, sample_rate)?;
    let delay_lag = if settings.remove_chan_delays {
        max_delay_samples(settings, sample_rate)?
    } else {
        0
    };
    let extra_halo = (nt + nt0min + delay_lag) as u64;
    let budget = resident_budget(client, settings.resident_bytes);
    let mut windows = DeviceWindows::new(
        client,
        source,
        probe.channels().to_vec(),
        window,
        extra_halo,
        options.target,
        preprocessing,
        budget,
    )?;
    let max_samples = windows.max_read_len();
    let batches = info.num_samples.div_ceil(batch) as usize;

    // Whitening and channel delays (both on the unwhitened windows).
    let fit = match reused {
        Some(fit) => fit,
        None => {
            let (whitening, channel_std, pass) =
                fit_whitening(client, &mut windows, probe, settings, progress)?;
            stages.push(StageReport::new(client, pass, None));
            let delays = if settings.remove_chan_delays {
                let (delays, pass) =
                    estimate_delays(client, &mut windows, settings, delay_lag, progress)?;
                stages.push(StageReport::new(client, pass, None));
                Some(delays)
            } else {
                None
            };
            Arc::new(PreprocessingFit {
                offsets,
                whitening,
                channel_std,
                delays,
                key,
            })
        }
    };
    let sparse = Whitener::sparse(client, &fit.whitening)?;
    let whitener = Whitener::new(client, sparse, max_samples)?;
    let aligner = match &fit.delays {
        Some(delays) => Some(DelayAligner::new(client, &delays.delays, max_samples)?),
        None => None,
    };
    let mut corrected = CorrectedWindows {
        windows,
        whitener,
        correction: None,
        aligner,
        batch,
    };

    // Universal templates.
    let templates = if settings.templates_from_data {
        let clip_settings = ClipSettings {
            thresholds: settings.th_single_ch.clone(),
            nt,
            nt0min,
            ..ClipSettings::default()
        };
        let mut harvester = ClipHarvester::new(client, probe.len(), clip_settings)?;
        check_halo("clip harvest", harvester.halo() + delay_lag, extra_halo)?;
        let stride = settings.clip_batch_stride;
        let harvested =
            |w: &dspk_core::HaloWindow| ((w.valid().start / batch) as usize).is_multiple_of(stride);
        let pass =
            corrected.pass_selected(client, "universal templates", progress, harvested, |w| {
                if !harvester.is_full() {
                    harvester.harvest(client, w)?;
                }
                Ok(())
            })?;
        stages.push(StageReport::new(client, pass, None));
        let started = Instant::now();
        let learned = learn_universal(client, harvester.clips(), settings)?;
        stages.push(StageReport::new(
            client,
            host_step("template learning", started),
            None,
        ));
        learned
    } else {
        let path = settings.templates_file.as_ref().ok_or(Error::Setting {
            name: "templates_file",
            reason: "templates_from_data is false but no file is given".to_string(),
        })?;
        let file = UniversalTemplates::from_npz(path)?;
        if file.nt() != nt {
            return Err(Error::Setting {
                name: "templates_file",
                reason: format!(
                    "{} holds templates of {} samples, nt is {nt}",
                    path.display(),
                    file.nt()
                ),
            });
        }
        file
    };

    // Centres and the detector.
    let centres = template_centres(probe.positions(), probe.shanks(), &settings.centres())?;
    let mut detector = UniversalDetector::new(
        client,
        probe.len(),
        probe.positions(),
        &centres,
        &templates,
        settings.th_universal,
    )?;
    check_halo("detection", detector.halo() + delay_lag, extra_halo)?;

    // Drift.
    let drift = if settings.nblocks > 0 {
        let mut found = Spikes::default();
        let pass = corrected.pass(client, "drift detection", progress, |w| {
            detector.detect(client, w, &mut found)
        })?;
        stages.push(StageReport::new(client, pass, Some(found.len())));
        let started = Instant::now();
        let depth: Vec<f64> = found.depth.iter().map(|&d| f64::from(d)).collect();
        let amplitude: Vec<f64> = found.amplitude.iter().map(|&a| f64::from(a)).collect();
        let batch_of: Vec<usize> = found.sample.iter().map(|&s| (s / batch) as usize).collect();
        let channel_y: Vec<f32> = probe.positions().iter().map(|p| p[1]).collect();
        let estimate = estimate_drift(
            &channel_y,
            &DriftSpikes {
                depth: &depth,
                amplitude: &amplitude,
                batch: &batch_of,
            },
            batches,
            &settings.drift(),
        )?;
        stages.push(StageReport::new(
            client,
            host_step("drift registration", started),
            None,
        ));
        Some(estimate)
    } else {
        None
    };

    // Detection on the drift-corrected recording.
    if let Some(estimate) = &drift {
        corrected.correction = Some(DriftCorrection::new(
            probe,
            settings,
            estimate,
            &fit.whitening,
        )?);
    }
    let mut spikes = Spikes::default();
    let pass = corrected.pass(client, "detection", progress, |w| {
        detector.detect(client, w, &mut spikes)
    })?;
    stages.push(StageReport::new(client, pass, Some(spikes.len())));

    Ok((
        FrontHalf {
            spikes,
            templates,
            fit,
            centres,
            drift,
            stages,
        },
        corrected,
    ))
}

/// The recording as the back half of a sort sees it: every window preprocessed, whitened,
/// drift-corrected and (EMUsort) delay-aligned on the device (kept there between passes when it
/// fits).
pub struct CorrectedWindows {
    windows: DeviceWindows,
    whitener: Whitener,
    correction: Option<DriftCorrection>,
    aligner: Option<DelayAligner>,
    batch: u64,
}

impl CorrectedWindows {
    /// Runs `visit` on every whitened, drift-corrected, delay-aligned window in order;
    /// `progress` hears after each window.
    ///
    /// # Errors
    ///
    /// The first error of a read, the device, the drift estimate (a batch it has no shift
    /// for) or `visit`; the pass stops there.
    pub fn pass(
        &mut self,
        client: &Client,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport> {
        self.pass_selected(client, name, progress, |_| true, visit)
    }

    /// As [`pass`](Self::pass), visiting only the windows `select` picks
    /// ([`DeviceWindows::pass_selected`]).
    ///
    /// # Errors
    ///
    /// As [`pass`](Self::pass).
    pub fn pass_selected(
        &mut self,
        client: &Client,
        name: &'static str,
        progress: &mut dyn FnMut(Progress),
        select: impl Fn(&dspk_core::HaloWindow) -> bool,
        mut visit: impl FnMut(&DeviceWindow) -> Result<()>,
    ) -> Result<PassReport> {
        let Self {
            windows,
            whitener,
            correction,
            aligner,
            batch,
        } = self;
        windows.pass_selected(name, progress, select, |w| {
            if let Some(correction) = correction.as_ref() {
                let b = (w.window().valid().start / *batch) as usize;
                whitener.set_dense(client, &correction.matrix(b)?)?;
            }
            let white = whitener.whiten(client, w)?;
            match aligner.as_mut() {
                Some(aligner) => visit(aligner.align(client, white)?),
                None => visit(white),
            }
        })
    }

    /// The largest window (halos included) a pass hands out, in samples.
    #[must_use]
    pub fn max_read_len(&self) -> usize {
        self.windows.max_read_len()
    }
}

/// The per-batch mixing that whitens and moves the channels by the drift estimate's shifts:
/// `Kq_b (iKxx W)` for batch `b` (`docs/KILOSORT4.md` §3.4).
struct DriftCorrection {
    estimate: DriftEstimate,
    interpolation: ShiftInterpolation,
    inverse_white: Vec<f64>,
    channels: usize,
}

impl DriftCorrection {
    fn new(
        probe: &SortProbe,
        settings: &KilosortSettings,
        estimate: &DriftEstimate,
        whitening: &WhiteningMatrix,
    ) -> Result<Self> {
        let x: Vec<f32> = probe.positions().iter().map(|p| p[0]).collect();
        let y: Vec<f32> = probe.positions().iter().map(|p| p[1]).collect();
        let interpolation = ShiftInterpolation::new(&x, &y, settings.sig_interp)?;
        let channels = probe.len();
        let inverse_white = compose(interpolation.inverse_kernel(), &whitening.dense(), channels)?;
        Ok(Self {
            estimate: estimate.clone(),
            interpolation,
            inverse_white,
            channels,
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
        compose(&target, &self.inverse_white, self.channels)
    }
}

/// The report of a host step (no windows, no bytes).
pub(crate) fn host_step(name: &'static str, started: Instant) -> PassReport {
    PassReport {
        name,
        windows: 0,
        resident_windows: 0,
        read_bytes: 0,
        uploaded_bytes: 0,
        wall: started.elapsed(),
        device: None,
    }
}

/// The recording and probe agree and the recording is long enough to sort.
fn check_input(
    info: &dspk_core::RecordingInfo,
    probe: &SortProbe,
    settings: &KilosortSettings,
) -> Result<()> {
    if let Some(&c) = probe.channels().iter().find(|&&c| c >= info.num_channels()) {
        return Err(Error::Input {
            what: "probe",
            reason: format!(
                "it names recording channel {c}, but the recording has {} channels",
                info.num_channels()
            ),
        });
    }
    if info.num_samples < settings.nt as u64 {
        return Err(Error::Input {
            what: "recording",
            reason: format!(
                "{} samples is shorter than one template ({} samples)",
                info.num_samples, settings.nt
            ),
        });
    }
    Ok(())
}

/// The longest channel delay searched, in samples: `floor(max_chan_delay_ms * fs / 1000)`
/// (EMUsort's `floor(fs / 500)` for 2 ms).
///
/// # Errors
///
/// [`Error::Setting`] when that is 0 samples.
pub fn max_delay_samples(settings: &KilosortSettings, sample_rate: f64) -> Result<usize> {
    let lag = (settings.max_chan_delay_ms * sample_rate / 1000.0).floor();
    if !(1.0..1e6).contains(&lag) {
        return Err(Error::Setting {
            name: "max_chan_delay_ms",
            reason: format!(
                "{} ms is {lag} samples at {sample_rate} Hz: the delay search needs at least one",
                settings.max_chan_delay_ms
            ),
        });
    }
    Ok(lag as usize)
}

/// EMUsort's channel delays (`docs/KILOSORT4.md` §10.1.1): lagged correlations of the
/// normalised, rectified, preprocessed (unwhitened) channels over the whitening batches, up to
/// `max_lag` samples. One pass over the windows holding those batches.
fn estimate_delays(
    client: &Client,
    windows: &mut DeviceWindows,
    settings: &KilosortSettings,
    max_lag: usize,
    progress: &mut dyn FnMut(Progress),
) -> Result<(ChannelDelays, PassReport)> {
    let batch = settings.batch_size;
    let batches = windows.num_samples().div_ceil(batch) as usize;
    let selected = whitening_batches(batches, settings.nskip);
    let channels = windows.channels();
    let mut estimator = DelayEstimator::new(client, channels, max_lag)?;
    let overlaps = |w: &dspk_core::HaloWindow| {
        let valid = w.valid();
        let (first, last) = (valid.start / batch, valid.end.div_ceil(batch));
        (first..last).any(|b| selected.binary_search(&(b as usize)).is_ok())
    };
    let report = windows.pass_selected("channel delays", progress, overlaps, |w| {
        for range in selected_ranges(w, &selected, batch) {
            // A batch's sliver at a window's edge too short to hold a lag adds nothing.
            if range.len() > max_lag {
                estimator.accumulate_range(client, w, range)?;
            }
        }
        Ok(())
    })?;
    if estimator.ranges() == 0 {
        return Err(Error::Input {
            what: "channel delays",
            reason: format!(
                "the recording ({} samples) is too short for a delay search of ±{max_lag} samples",
                windows.num_samples()
            ),
        });
    }
    let delays = estimator.finish()?;
    if all_channels_alike(&delays, channels) {
        return Err(Error::Input {
            what: "channel delays",
            reason: format!(
                "all {channels} channels carry the same signal (every pair correlates as a \
                 channel with itself, at lag 0): there are no delays to estimate"
            ),
        });
    }
    Ok((delays, report))
}

/// Whether every pair of channels correlates as each channel does with itself, at lag 0:
/// the same signal on every channel (to float rounding).
fn all_channels_alike(delays: &ChannelDelays, channels: usize) -> bool {
    (0..channels).all(|a| {
        let own = delays.peak[a * channels + a];
        (0..channels).all(|b| {
            let i = a * channels + b;
            delays.lag[i] == 0 && (delays.peak[i] - own).abs() <= 1e-6 * own.abs()
        })
    })
}

/// Universal templates from harvested clips as `settings` say: scaled per clip or globally,
/// wPCA on all, k-means on all or on those HDBSCAN does not call noise.
fn learn_universal(
    client: &Client,
    clips: &[f32],
    settings: &KilosortSettings,
) -> Result<UniversalTemplates> {
    let (nt, nt0min) = (settings.nt, settings.trough());
    let scaled = scale_clips(clips, nt, settings.clip_scaling)?;
    let n = scaled.len() / nt;
    let min_size = settings.hdbscan_min_cluster_size;
    // EMUsort removes outliers only from at least max(20, min_cluster_size) clips.
    let keep = if settings.remove_spike_outliers && n >= min_size.max(20) {
        let points: Vec<f32> = scaled.iter().map(|&v| v as f32).collect();
        let hdbscan = HdbscanSettings {
            min_cluster_size: min_size,
            min_samples: None,
        };
        let labels = hdbscan_labels(client, &points, nt, &hdbscan)?;
        Some(labels.iter().map(|&l| l >= 0).collect::<Vec<bool>>())
    } else {
        None
    };
    learn_templates_scaled(
        &scaled,
        keep.as_deref(),
        nt,
        nt0min,
        settings.n_templates,
        settings.n_pcs,
        settings.templates_seed,
    )
}

/// A stage's halo fits in the halo the windows carry.
fn check_halo(stage: &str, needed: usize, carried: u64) -> Result<()> {
    if needed as u64 > carried {
        return Err(Error::Setting {
            name: "nt",
            reason: format!("{stage} needs {needed} samples of halo, the windows carry {carried}"),
        });
    }
    Ok(())
}
