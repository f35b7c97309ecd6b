//! The sorter's settings: Kilosort4's names and defaults where it has them
//! (`docs/KILOSORT4.md` §1.1; the two detection thresholds are lower), and ours for what goes
//! beyond it.
//!
//! Written beside a run's output as JSON under Kilosort4's names (`Th_universal`, `nblocks`,
//! ...); read back with [`KilosortSettings::from_json`]. Unknown names are an error, so a
//! typo never silently leaves a default in place.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How clips are scaled before the universal templates are learned (setting `clip_scaling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClipScaling {
    /// Each clip to unit L2 norm; all-zero clips left out (Kilosort4).
    #[default]
    UnitNorm,
    /// Every clip divided by one scalar, `sqrt` of the population standard deviation of the
    /// clips' squared norms, keeping their relative sizes (EMUsort).
    Global,
}

/// Every setting of the sort, with Kilosort 4.1.7's defaults except where a field says
/// "Ours" (dspk's own settings, and the two detection thresholds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KilosortSettings {
    /// `batch_size`: samples each window owns (Kilosort's batch, 60 000 = 2 s at 30 kHz).
    /// Drift is estimated per window of this length.
    pub batch_size: u64,
    /// `nblocks`: drift correction; 0 off, 1 rigid (one shift per batch), `n > 1` non-rigid
    /// with `2n - 1` overlapping blocks along the probe.
    pub nblocks: usize,
    /// `Th_universal`: the universal-template score a spike must exceed (whitened units).
    /// Ours: 6 (Kilosort: 9), with `Th_learned` 5 (Kilosort: 8). Lower thresholds find
    /// smaller units, and the clusters of spikes that larger units leave behind, which made
    /// them costly in Kilosort, are removed as shadows (`shadow_ms`; see `docs/decisions`).
    #[serde(rename = "Th_universal")]
    pub th_universal: f32,
    /// `nt`: template length in samples (odd).
    pub nt: usize,
    /// `nt0min`: the trough's index inside a template (`None`: `floor(20 * nt / 61)`).
    pub nt0min: Option<usize>,
    /// `nskip`: every `nskip`-th batch enters the whitening covariance.
    pub nskip: usize,
    /// `whitening_range`: channels in each channel's local whitening neighbourhood.
    pub whitening_range: usize,
    /// `highpass_cutoff`: Hz, third-order Butterworth, zero-phase.
    pub highpass_cutoff: f64,
    /// `do_CAR`: subtract the median over channels from every sample (torch's lower median).
    #[serde(rename = "do_CAR")]
    pub do_car: bool,
    /// `invert_sign`: negate the data first.
    pub invert_sign: bool,
    /// `binning_depth`: µm per depth bin of the drift fingerprints.
    pub binning_depth: f64,
    /// `sig_interp`: µm, width of the Gaussian kernel that interpolates shifted channels.
    pub sig_interp: f64,
    /// `drift_smoothing`: Gaussian σ of the drift scores along (shift, batch, block).
    pub drift_smoothing: [f64; 3],
    /// `dmin`: µm between rows of template centres (`None`: the median vertical pitch).
    pub dmin: Option<f64>,
    /// `dminx`: µm, horizontal spacing of template centres is about `dminx / 2`.
    pub dminx: f64,
    /// `min_template_size`: µm, the smallest spatial Gaussian of the universal templates.
    pub min_template_size: f64,
    /// `template_sizes`: number of spatial scales (`min_template_size * 1, 2, ...`).
    pub template_sizes: usize,
    /// `nearest_chans`: channels per template centre (features are taken on them).
    pub nearest_chans: usize,
    /// `nearest_templates`: centres in the spatial maximum of detection.
    pub nearest_templates: usize,
    /// `max_channel_distance`: µm; centres farther than this from every channel are dropped.
    pub max_channel_distance: f64,
    /// `templates_from_data`: learn the universal templates from the recording; `false` uses
    /// [`templates_file`](Self::templates_file) (Kilosort's shipped `wTEMP.npz` layout).
    pub templates_from_data: bool,
    /// `n_templates`: universal temporal templates (k-means clusters).
    pub n_templates: usize,
    /// `n_pcs`: principal components of the spike features.
    pub n_pcs: usize,
    /// `Th_single_ch`: threshold of the single-channel peaks universal templates learn from;
    /// several (EMUsort: `[6, 9, 12, 15]`) pool the clips of every threshold, each
    /// `(channel, sample)` once. Written as a number when there is one.
    #[serde(rename = "Th_single_ch", with = "one_or_many")]
    pub th_single_ch: Vec<f32>,
    /// Ours: universal-template clips come from every `clip_batch_stride`-th batch (Kilosort4
    /// hard-codes 25; EMUsort uses `nskip`).
    pub clip_batch_stride: usize,
    /// Ours: how clips are scaled before the universal templates are learned: each to unit
    /// norm (Kilosort4) or all by one scalar (EMUsort).
    pub clip_scaling: ClipScaling,
    /// `remove_spike_outliers` (EMUsort): drop the clips HDBSCAN calls noise before the
    /// k-means of the universal templates.
    pub remove_spike_outliers: bool,
    /// `hdbscan_min_cluster_size` (EMUsort): HDBSCAN's `min_cluster_size` (and `min_samples`).
    pub hdbscan_min_cluster_size: usize,
    /// `remove_chan_delays` (EMUsort): estimate one delay per channel from lagged
    /// cross-correlations and align the channels by it after whitening.
    pub remove_chan_delays: bool,
    /// Ours: the longest channel delay searched, ms (EMUsort: 2, `floor(fs / 500)` samples).
    pub max_chan_delay_ms: f64,
    /// Ours: how learned templates are aligned to the universal shapes (Kilosort4: the best
    /// channel; EMUsort: the sum over channels).
    pub template_alignment: Alignment,
    /// Ours: `[low, high]` Hz of a zero-phase Butterworth band-pass before everything else
    /// (EMUsort's SpikeInterface front: `[250, 5000]`); `None`: none.
    pub bandpass: Option<[f64; 2]>,
    /// Ours: order of that band-pass (EMUsort: 5).
    pub bandpass_order: usize,
    /// Ours: Hz of a zero-phase notch after the band-pass (EMUsort: 60; 50 where mains is
    /// 50 Hz); `None`: none.
    pub notch_hz: Option<f64>,
    /// Ours: quality factor of the notch (`scipy.signal.iirnotch`'s `Q`; EMUsort: 30).
    pub notch_q: f64,
    /// Ours: report each unit's spike times where its template peaks (largest magnitude) on
    /// its best channel, in the recording's own time base (before channel delays), instead of
    /// at the template's trough index `nt0min` on the delay-aligned channels (EMUsort's
    /// times). The ground truth of EMG benchmarks is this peak.
    pub peak_spike_times: bool,
    /// Ours: sort the channels as one column this many µm apart in channel order, whatever
    /// the probe says (EMUsort's convention for EMG arrays: 2 µm, so every channel is its own
    /// template centre row); `None`: the probe's positions.
    pub line_probe_pitch: Option<f64>,
    /// Ours: the `.npz` holding `wTEMP` and `wPCA` when `templates_from_data` is false.
    pub templates_file: Option<std::path::PathBuf>,
    /// Ours: seed of the k-means that learns the universal templates (Kilosort seeds numpy's
    /// global generator with 1).
    pub templates_seed: u64,
    /// Ours: device bytes the recording's stored windows may occupy to stay resident between
    /// passes (the first windows that fit are read from disk once per sort, the rest once per
    /// pass). `None`: the device memory the runtime reports but a reserve for the passes'
    /// scratch ([`default_resident_budget`](crate::runner::default_resident_budget): 7/8 of an
    /// H200; off when the runtime reports none); `Some(0)`: off.
    pub resident_bytes: Option<u64>,
    /// `Th_learned`: the learned-template score a matched spike must exceed. Ours: 5
    /// (Kilosort: 8; see `Th_universal`).
    #[serde(rename = "Th_learned")]
    pub th_learned: f32,
    /// `max_peels`: matching-pursuit rounds per batch.
    pub max_peels: usize,
    /// `acg_threshold`: refractory ratio `R12` below which a unit is labelled good.
    pub acg_threshold: f64,
    /// `ccg_threshold`: refractory ratio `R12` of a cross-correlogram below which two units
    /// are merged.
    pub ccg_threshold: f64,
    /// `cluster_neighbors`: neighbours of every spike in the clustering graph.
    pub cluster_neighbors: usize,
    /// `cluster_downsampling`: every n-th spike of a group is a landmark of the graph.
    pub cluster_downsampling: usize,
    /// `max_cluster_subset`: at most this many landmarks per group.
    pub max_cluster_subset: usize,
    /// `cluster_init_seed`: seed of the clustering's k-means++ initialisation.
    pub cluster_init_seed: u64,
    /// `duplicate_spike_ms`: a unit's spikes closer than this are one spike.
    pub duplicate_spike_ms: f64,
    /// `position_limit`: µm, channels within this of the best channel place a spike.
    pub position_limit: f64,
    /// `x_centers`: number of clustering groups across the probe's width (`None`: from the
    /// channels' x positions).
    pub x_centers: Option<usize>,
    /// Ours: the smallest group the clustering splits (Kilosort 4.1.7 makes every group under
    /// 1 000 spikes one cluster; see `docs/decisions`); smaller groups are one cluster.
    pub min_cluster_group: usize,
    /// Ours: whether the final clustering's merge tree keeps two branches apart when their
    /// spike trains are cross-refractory (Kilosort 4.0.18's rule, which 4.1.7 never reaches;
    /// see `docs/decisions`); `false` is Kilosort 4.1.7's behaviour.
    pub tree_cross_refractory: bool,
    /// Ours: the fewest landmarks a clustering group's graph gets. Kilosort takes every
    /// `cluster_downsampling`-th spike whatever the group's size, so a unit needs about
    /// `cluster_neighbors x cluster_downsampling` = 200 spikes in its group to hold the 10
    /// landmarks its spikes link to, and the units of a short recording merge. A group whose
    /// stride leaves fewer landmarks takes a shorter stride (every spike at most). `None`
    /// (default): 100 on a small probe (its channels in at most 4 clustering groups, where
    /// every group holds several units), Kilosort's stride (0) on larger ones, whose groups
    /// hold about one unit each and are over-split by a finer graph (measured: `docs/ACCURACY.md`).
    pub min_cluster_landmarks: Option<usize>,
    /// Ours: a merge-tree node whose two branches hold fewer spikes than this many per feature
    /// merges without the bimodality test (a least-squares discriminant separates almost any
    /// labelling of fewer than about twice as many points as features, so the test says
    /// "bimodal" for anything so small). `None` (default): 4 where the landmark floor is on,
    /// 0 (Kilosort's test at every size) elsewhere.
    pub min_split_points_per_feature: Option<f64>,
    /// Ours: the most spikes a clustering group clusters. A larger group (hour-long
    /// recordings) clusters this many of its spikes, evenly spaced in its spike order, and
    /// gives every other spike the cluster most of its `cluster_neighbors` nearest landmarks
    /// belong to (the nearest on a tie), so the clustering's cost grows linearly with the
    /// recording rather than with the square of it (each spike's neighbours are searched among
    /// a group's landmarks, which grow with its spikes). `None`: every spike (Kilosort, and
    /// the EMUsort preset).
    pub max_cluster_spikes: Option<usize>,
    /// Ours: the global merges also join two units that drift correction left apart: template
    /// similarity at least 0.8 and spikes that fell in batches the drift estimate shifted
    /// differently, the overlap of the two units' spike shares over shift bins of
    /// `binning_depth` at most this (0: only units that never fired at the same shift; 1:
    /// every similar pair). Kriging smooths a waveform by how far between contacts its shift
    /// reads it, so the final clustering cuts a unit by drift phase into parts that fire at
    /// different times, which Kilosort's cross-correlogram test cannot join (see
    /// `docs/decisions`). `None`: Kilosort's merges only; no effect without drift correction.
    pub drift_split_overlap: Option<f64>,
    /// Ours: a unit's two spikes closer than this (ms) are one spike, and the one of larger
    /// amplitude (the norm of its features) is kept; applied after `duplicate_spike_ms`, which
    /// keeps the first. Matching a template shorter than the waveform (EMG motor unit
    /// potentials last 2-4 ms, the template 2 ms) finds the rest of the waveform again a
    /// template's length later, and a unit then holds a second, smaller spike beside most of
    /// its spikes (see `docs/decisions`). `None`: off (Kilosort); the EMUsort preset: 2.5.
    pub min_isi_ms: Option<f64>,
    /// Ours: a unit most of whose spikes lie within this (ms) of the spikes of larger units
    /// that it follows beyond chance is removed, a shadow of them: what a larger unit's spike
    /// leaves after its template is peeled (or its far field beyond the template's channels)
    /// passes a lower threshold on a weaker template a few samples away. At least half of the
    /// unit's spikes must lie that close to a partner's, and a partner is a larger, refractory
    /// (`good`) unit that shares this with at least a tenth of the unit's spikes more than
    /// chance (see `docs/decisions`). `None`: off (Kilosort keeps them).
    pub shadow_ms: Option<f64>,
}

impl Default for KilosortSettings {
    fn default() -> Self {
        Self {
            batch_size: 60_000,
            nblocks: 1,
            th_universal: 6.0,
            nt: 61,
            nt0min: None,
            nskip: 25,
            whitening_range: 32,
            highpass_cutoff: 300.0,
            do_car: true,
            invert_sign: false,
            binning_depth: 5.0,
            sig_interp: 20.0,
            drift_smoothing: [0.5, 0.5, 0.5],
            dmin: None,
            dminx: 32.0,
            min_template_size: 10.0,
            template_sizes: 5,
            nearest_chans: 10,
            nearest_templates: 100,
            max_channel_distance: 32.0,
            templates_from_data: true,
            n_templates: 6,
            n_pcs: 6,
            th_single_ch: vec![6.0],
            clip_batch_stride: 25,
            clip_scaling: ClipScaling::UnitNorm,
            remove_spike_outliers: false,
            hdbscan_min_cluster_size: 20,
            remove_chan_delays: false,
            max_chan_delay_ms: 2.0,
            template_alignment: Alignment::MaxOverChannels,
            bandpass: None,
            bandpass_order: 5,
            notch_hz: None,
            notch_q: 30.0,
            line_probe_pitch: None,
            peak_spike_times: false,
            templates_file: None,
            templates_seed: 1,
            resident_bytes: None,
            th_learned: 5.0,
            max_peels: 100,
            acg_threshold: 0.2,
            ccg_threshold: 0.25,
            cluster_neighbors: 10,
            cluster_downsampling: 20,
            max_cluster_subset: 25_000,
            cluster_init_seed: 5,
            duplicate_spike_ms: 0.25,
            position_limit: 100.0,
            x_centers: None,
            min_cluster_group: 60,
            tree_cross_refractory: true,
            min_cluster_landmarks: None,
            min_split_points_per_feature: None,
            max_cluster_spikes: Some(25_000),
            drift_split_overlap: Some(0.5),
            min_isi_ms: None,
            shadow_ms: Some(1.0),
        }
    }
}

impl KilosortSettings {
    /// EMUsort 1.1.0's defaults for intramuscular EMG (`docs/KILOSORT4.md` §10.2): 9
    /// universal templates and PCs, `nskip` 2 (whitening, clip batches and channel delays),
    /// thresholds `[6, 9, 12, 15]` pooled, no common reference, no drift correction, spikes
    /// within 0.5 ms one spike, a 250-5000 Hz fifth-order band-pass in front of Kilosort's own
    /// high-pass, channel delays removed, HDBSCAN outlier removal of clips scaled by one
    /// scalar, alignment summed over channels, the channels on one column 2 µm apart; spike
    /// times at each unit's peak on its best channel.
    ///
    /// EMUsort also notches 60 Hz (Q 30) after the band-pass; here that is `notch_hz`, off in
    /// the preset: behind the band-pass and the high-pass, 60 Hz is already attenuated by
    /// about 200 dB and the notch lowers the pass band by less than 1e-4, while its poles (radius
    /// 1 - 2e-4) need a halo of about 88 000 samples a side (`docs/decisions/0006`).
    #[must_use]
    pub fn emusort() -> Self {
        Self {
            n_templates: 9,
            n_pcs: 9,
            nskip: 2,
            th_single_ch: vec![6.0, 9.0, 12.0, 15.0],
            clip_batch_stride: 2,
            clip_scaling: ClipScaling::Global,
            remove_spike_outliers: true,
            hdbscan_min_cluster_size: 20,
            remove_chan_delays: true,
            template_alignment: Alignment::SumOverChannels,
            nblocks: 0,
            do_car: false,
            duplicate_spike_ms: 0.5,
            th_universal: 9.0,
            th_learned: 8.0,
            cluster_downsampling: 20,
            bandpass: Some([250.0, 5000.0]),
            bandpass_order: 5,
            notch_hz: None,
            notch_q: 30.0,
            line_probe_pitch: Some(2.0),
            peak_spike_times: true,
            // EMUsort's own clustering (Kilosort 4.0.18's stride and bimodality test): the
            // small-probe floor and guard are measured on extracellular probes only.
            min_cluster_landmarks: Some(0),
            min_split_points_per_feature: Some(0.0),
            // Kilosort 4.0.18 clusters every spike; the cap is measured on extracellular
            // recordings only.
            max_cluster_spikes: None,
            // EMUsort's merges are Kilosort 4.0.18's (and the preset corrects no drift).
            drift_split_overlap: None,
            // Measured on the bench's EMG cases (decision 0006).
            min_isi_ms: Some(2.5),
            ..Self::default()
        }
    }

    /// A preset by name: `kilosort4` (the defaults) or `emusort` ([`emusort`](Self::emusort)).
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] for another name.
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "kilosort4" | "kilosort" => Ok(Self::default()),
            "emusort" => Ok(Self::emusort()),
            other => Err(Error::Setting {
                name: "preset",
                reason: format!("unknown preset `{other}`; known: kilosort4, emusort"),
            }),
        }
    }

    /// The trough index: `nt0min`, or `floor(20 * nt / 61)` (20 for `nt = 61`).
    #[must_use]
    pub fn trough(&self) -> usize {
        self.nt0min.unwrap_or(20 * self.nt / 61)
    }

    /// The settings of the template centres ([`template_centres`](crate::detection::centres::template_centres)).
    #[must_use]
    pub fn centres(&self) -> CentreSettings {
        CentreSettings {
            dmin: self.dmin,
            dminx: self.dminx,
            max_channel_distance: self.max_channel_distance,
            nearest_chans: self.nearest_chans,
            nearest_templates: self.nearest_templates,
            min_template_size: self.min_template_size,
            template_sizes: self.template_sizes,
        }
    }

    /// The settings of drift estimation ([`estimate_drift`](crate::drift::estimate_drift)).
    #[must_use]
    pub fn drift(&self) -> DriftSettings {
        DriftSettings {
            nblocks: self.nblocks,
            binning_depth: self.binning_depth,
            sig_interp: self.sig_interp,
            drift_smoothing: self.drift_smoothing,
            th_universal: f64::from(self.th_universal),
        }
    }

    /// Checks every setting's range and the settings that depend on each other.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] naming the first setting out of range and why.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &'static str, reason: String| Err(Error::Setting { name, reason });
        if self.nt == 0 || self.nt.is_multiple_of(2) {
            return bad("nt", format!("must be odd, got {}", self.nt));
        }
        if self.trough() >= self.nt {
            return bad(
                "nt0min",
                format!("{} is not inside nt = {}", self.trough(), self.nt),
            );
        }
        if self.batch_size < self.nt as u64 {
            return bad(
                "batch_size",
                format!(
                    "{} samples is shorter than a template (nt = {})",
                    self.batch_size, self.nt
                ),
            );
        }
        for (name, value) in [
            ("nskip", self.nskip),
            ("whitening_range", self.whitening_range),
            ("template_sizes", self.template_sizes),
            ("nearest_chans", self.nearest_chans),
            ("nearest_templates", self.nearest_templates),
            ("n_templates", self.n_templates),
            ("n_pcs", self.n_pcs),
            ("max_peels", self.max_peels),
            ("cluster_neighbors", self.cluster_neighbors),
            ("cluster_downsampling", self.cluster_downsampling),
            ("max_cluster_subset", self.max_cluster_subset),
            ("min_cluster_group", self.min_cluster_group),
            ("clip_batch_stride", self.clip_batch_stride),
            ("bandpass_order", self.bandpass_order),
            ("hdbscan_min_cluster_size", self.hdbscan_min_cluster_size),
        ] {
            if value == 0 {
                return bad(name, "must be at least 1".to_string());
            }
        }
        if self.n_pcs > self.nt {
            return bad(
                "n_pcs",
                format!("{} components of {}-sample clips", self.n_pcs, self.nt),
            );
        }
        for (name, value) in [
            ("Th_universal", f64::from(self.th_universal)),
            ("highpass_cutoff", self.highpass_cutoff),
            ("binning_depth", self.binning_depth),
            ("sig_interp", self.sig_interp),
            ("dminx", self.dminx),
            ("min_template_size", self.min_template_size),
            ("max_channel_distance", self.max_channel_distance),
            ("Th_learned", f64::from(self.th_learned)),
            ("acg_threshold", self.acg_threshold),
            ("ccg_threshold", self.ccg_threshold),
            ("position_limit", self.position_limit),
            ("max_chan_delay_ms", self.max_chan_delay_ms),
            ("notch_q", self.notch_q),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return bad(name, format!("must be positive and finite, got {value}"));
            }
        }
        if let Some(v) = self.min_split_points_per_feature
            && !(v.is_finite() && v >= 0.0)
        {
            return bad(
                "min_split_points_per_feature",
                format!("must be finite and not negative, got {v}"),
            );
        }
        if !(self.duplicate_spike_ms.is_finite() && self.duplicate_spike_ms >= 0.0) {
            return bad(
                "duplicate_spike_ms",
                format!(
                    "must be finite and not negative, got {}",
                    self.duplicate_spike_ms
                ),
            );
        }
        if self.th_single_ch.is_empty()
            || self
                .th_single_ch
                .iter()
                .any(|th| !(th.is_finite() && *th > 0.0))
        {
            return bad(
                "Th_single_ch",
                format!(
                    "needs at least one threshold, each positive and finite, got {:?}",
                    self.th_single_ch
                ),
            );
        }
        if let Some([low, high]) = self.bandpass
            && !(low.is_finite() && high.is_finite() && 0.0 < low && low < high)
        {
            return bad(
                "bandpass",
                format!("needs 0 < low < high, got [{low}, {high}]"),
            );
        }
        for (name, value) in [
            ("notch_hz", self.notch_hz),
            ("line_probe_pitch", self.line_probe_pitch),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value > 0.0)
            {
                return bad(name, format!("must be positive and finite, got {value}"));
            }
        }
        let landmarks = self
            .cluster_neighbors
            .saturating_mul(self.cluster_downsampling);
        if let Some(cap) = self.max_cluster_spikes
            && cap < landmarks
        {
            return bad(
                "max_cluster_spikes",
                format!(
                    "{cap} spikes leave fewer than cluster_neighbors = {} landmarks at \
                     cluster_downsampling = {} (at least {landmarks})",
                    self.cluster_neighbors, self.cluster_downsampling
                ),
            );
        }
        if let Some(ms) = self.min_isi_ms
            && !(ms.is_finite() && ms >= 0.0)
        {
            return bad(
                "min_isi_ms",
                format!("must be at least 0 when given, got {ms}"),
            );
        }
        if let Some(ms) = self.shadow_ms
            && !(ms.is_finite() && ms >= 0.0)
        {
            return bad(
                "shadow_ms",
                format!("must be at least 0 when given, got {ms}"),
            );
        }
        if let Some(overlap) = self.drift_split_overlap
            && !(0.0..=1.0).contains(&overlap)
        {
            return bad(
                "drift_split_overlap",
                format!("must lie in [0, 1] when given, got {overlap}"),
            );
        }
        if self.x_centers == Some(0) {
            return bad("x_centers", "must be at least 1 when given".to_string());
        }
        if self.cluster_neighbors > self.min_cluster_group {
            return bad(
                "min_cluster_group",
                format!(
                    "{} spikes cannot give each spike {} neighbours",
                    self.min_cluster_group, self.cluster_neighbors
                ),
            );
        }
        if let Some(dmin) = self.dmin
            && !(dmin.is_finite() && dmin > 0.0)
        {
            return bad("dmin", format!("must be positive and finite, got {dmin}"));
        }
        if self
            .drift_smoothing
            .iter()
            .any(|s| !(s.is_finite() && (0.0..=1000.0).contains(s)))
        {
            return bad(
                "drift_smoothing",
                format!(
                    "sigmas must lie in [0, 1000], got {:?}",
                    self.drift_smoothing
                ),
            );
        }
        if self.th_universal >= 100.0 {
            return bad(
                "Th_universal",
                format!(
                    "must be below 100 (the top of the drift fingerprints' amplitudes), got {}",
                    self.th_universal
                ),
            );
        }
        if !self.templates_from_data && self.templates_file.is_none() {
            return bad(
                "templates_file",
                "templates_from_data is false: give the .npz holding wTEMP and wPCA".to_string(),
            );
        }
        Ok(())
    }

    /// The settings as pretty JSON under Kilosort4's names.
    #[must_use]
    pub fn to_json(&self) -> String {
        // Plain data with finite defaults: serialising cannot fail (a NaN becomes null).
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Settings from JSON (missing names keep their defaults), validated.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] for malformed JSON, an unknown name, a wrong type or a value out of
    /// range.
    pub fn from_json(json: &str) -> Result<Self> {
        let settings: Self = serde_json::from_str(json).map_err(|e| Error::Setting {
            name: "settings",
            reason: e.to_string(),
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Sets one setting from text, as a command line's `--set KEY=VALUE` gives it: `key` is
    /// the JSON name (`Th_universal`, `nblocks`, ...), `value` JSON (`9`, `true`, `null`,
    /// `[0.5, 0.5, 0.5]`) or, failing that, a plain string (a path). Validates the result.
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] for an unknown key, a value of the wrong type or out of range; the
    /// settings are unchanged then.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let mut object = serde_json::to_value(&*self).map_err(|e| Error::Setting {
            name: "settings",
            reason: e.to_string(),
        })?;
        let Some(map) = object.as_object_mut() else {
            return Err(Error::Setting {
                name: "settings",
                reason: "not an object".to_string(),
            });
        };
        if !map.contains_key(key) {
            let known: Vec<&str> = map.keys().map(String::as_str).collect();
            return Err(Error::Setting {
                name: "settings",
                reason: format!("unknown setting `{key}`; known: {}", known.join(", ")),
            });
        }
        let parsed = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
        map.insert(key.to_string(), parsed);
        let updated: Self = serde_json::from_value(object).map_err(|e| Error::Setting {
            name: "settings",
            reason: format!("{key} = {value}: {e}"),
        })?;
        updated.validate()?;
        *self = updated;
        Ok(())
    }
}

/// `Th_single_ch` as Kilosort4 (a number) or EMUsort (a list) writes it.
mod one_or_many {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(f32),
        Many(Vec<f32>),
    }

    pub(super) fn serialize<S: Serializer>(
        values: &[f32],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match values {
            [one] => one.serialize(serializer),
            many => many.serialize(serializer),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<f32>, D::Error> {
        Ok(match OneOrMany::deserialize(deserializer)? {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        })
    }
}

/// The largest `drift_smoothing` accepted (a kernel of `2 floor(4 sigma + 0.5) + 1` taps).
const MAX_SMOOTHING: f64 = 1000.0;

/// Drift-correction settings, named and defaulted as Kilosort4's `parameters.py`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct DriftSettings {
    /// Kilosort4's `nblocks`: 0 turns drift correction off, 1 estimates one rigid shift per
    /// batch, `n > 1` estimates `2 n - 1` overlapping blocks along the probe. Default 1.
    pub nblocks: usize,
    /// Kilosort4's `binning_depth`: um per depth bin of the fingerprints. Default 5.
    pub binning_depth: f64,
    /// Kilosort4's `sig_interp`: um, width of the Gaussian kernel that interpolates channels at
    /// shifted positions ([`ShiftInterpolation`](crate::drift::ShiftInterpolation)). Default 20.
    pub sig_interp: f64,
    /// Kilosort4's `drift_smoothing`: standard deviations (shift steps, batches, blocks) of
    /// the Gaussian smoothing of the per-block registration scores. Default `[0.5, 0.5, 0.5]`.
    pub drift_smoothing: [f64; 3],
    /// Kilosort4's `Th_universal`: the universal-template detection threshold, the lowest
    /// amplitude of the fingerprints' log-amplitude columns. Default 9.
    #[serde(rename = "Th_universal")]
    pub th_universal: f64,
}

impl Default for DriftSettings {
    fn default() -> Self {
        Self {
            nblocks: 1,
            binning_depth: 5.0,
            sig_interp: 20.0,
            drift_smoothing: [0.5; 3],
            th_universal: 9.0,
        }
    }
}

impl DriftSettings {
    /// Checks every field but `nblocks` (checked against the probe by [`estimate_drift`]).
    pub(crate) fn check(&self) -> Result<()> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let setting = |name, reason: String| Err(Error::Setting { name, reason });
        if !positive(self.binning_depth) {
            return setting(
                "binning_depth",
                format!("must be finite and positive, got {}", self.binning_depth),
            );
        }
        if !positive(self.sig_interp) {
            return setting(
                "sig_interp",
                format!("must be finite and positive, got {}", self.sig_interp),
            );
        }
        if !self
            .drift_smoothing
            .iter()
            .all(|s| (0.0..=MAX_SMOOTHING).contains(s))
        {
            return setting(
                "drift_smoothing",
                format!(
                    "each must lie in [0, {MAX_SMOOTHING}], got {:?}",
                    self.drift_smoothing
                ),
            );
        }
        // The amplitude columns span log10(Th_universal)..2: Th_universal < 100.
        if !(positive(self.th_universal) && self.th_universal < 100.0) {
            return setting(
                "Th_universal",
                format!("must lie in (0, 100), got {}", self.th_universal),
            );
        }
        Ok(())
    }
}

/// Settings of the template centres, with Kilosort4's names and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CentreSettings {
    /// `dmin`: vertical spacing of the channels in um; centres are `dmin / 2` apart in y.
    /// `None` picks it from the probe (the median of the gaps between consecutive distinct
    /// channel y values, 1 when all channels share one y).
    /// > default: `None`
    pub dmin: Option<f64>,
    /// `dminx`: horizontal spacing in um; centres are about `dminx / 2` apart in x.
    /// > default: 32
    pub dminx: f64,
    /// `max_channel_distance`: a centre is kept when its nearest channel is at most this far
    /// (um, inclusive).
    /// > default: 32
    pub max_channel_distance: f64,
    /// `nearest_chans`: channels per centre (capped at the channel count).
    /// > default: 10
    pub nearest_chans: usize,
    /// `nearest_templates`: centres in each centre's spatial max-pool, itself included (capped at
    /// the number of centres).
    /// > default: 100
    pub nearest_templates: usize,
    /// `min_template_size`: width in um of the smallest spatial Gaussian; size `s` has width
    /// `min_template_size * (s + 1)`.
    /// > default: 10
    pub min_template_size: f64,
    /// `template_sizes`: number of spatial Gaussian widths.
    /// > default: 5
    pub template_sizes: usize,
}

impl Default for CentreSettings {
    fn default() -> Self {
        Self {
            dmin: None,
            dminx: 32.0,
            max_channel_distance: 32.0,
            nearest_chans: 10,
            nearest_templates: 100,
            min_template_size: 10.0,
            template_sizes: 5,
        }
    }
}

/// How [`align_templates`](crate::templates::learned::align_templates) scores a lag from the per-channel correlations with the universal
/// shapes (setting `template_alignment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Alignment {
    /// The largest magnitude over channels and shapes (Kilosort4).
    #[default]
    MaxOverChannels,
    /// Per shape the sum of the magnitudes over channels, the largest over shapes (EMUsort).
    SumOverChannels,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kilosort4s_and_valid() {
        let s = KilosortSettings::default();
        s.validate().unwrap();
        assert_eq!(s.trough(), 20);
        assert_eq!(
            (s.batch_size, s.nblocks, s.nskip, s.whitening_range),
            (60_000, 1, 25, 32)
        );
        assert_eq!(s.th_single_ch.as_slice(), &[6.0][..]);
        // Ours: the detection thresholds (Kilosort: 9 and 8).
        assert_eq!((s.th_universal, s.th_learned), (6.0, 5.0));
    }

    #[test]
    fn emusort_preset_is_valid_and_round_trips() {
        let s = KilosortSettings::preset("emusort").unwrap();
        s.validate().unwrap();
        assert_eq!(s, KilosortSettings::emusort());
        assert_eq!((s.n_templates, s.n_pcs, s.nskip, s.nblocks), (9, 9, 2, 0));
        let json = s.to_json();
        assert!(json.contains("\"Th_single_ch\": [\n"), "{json}");
        assert_eq!(KilosortSettings::from_json(&json).unwrap(), s);
        assert!(
            KilosortSettings::to_json(&KilosortSettings::default())
                .contains("\"Th_single_ch\": 6.0")
        );
        let mut t = KilosortSettings::default();
        t.set("Th_single_ch", "[6, 9]").unwrap();
        assert_eq!(t.th_single_ch, vec![6.0, 9.0]);
        t.set("Th_single_ch", "7").unwrap();
        assert_eq!(t.th_single_ch, vec![7.0]);
        for (key, value) in [
            ("Th_single_ch", "[]"),
            ("Th_single_ch", "[6, -1]"),
            ("bandpass", "[5000, 250]"),
            ("notch_hz", "0"),
            ("clip_scaling", "\"sideways\""),
        ] {
            assert!(t.set(key, value).is_err(), "{key} = {value}");
        }
        assert!(KilosortSettings::preset("spykingcircus").is_err());
    }

    #[test]
    fn json_round_trip_under_kilosort_names() {
        let s = KilosortSettings {
            nblocks: 5,
            dmin: Some(15.0),
            ..KilosortSettings::default()
        };
        let json = s.to_json();
        assert!(json.contains("\"Th_universal\": 6.0"), "{json}");
        assert!(json.contains("\"do_CAR\": true"), "{json}");
        assert_eq!(KilosortSettings::from_json(&json).unwrap(), s);
        // Missing names keep their defaults.
        let partial = KilosortSettings::from_json(r#"{"nblocks": 0}"#).unwrap();
        assert_eq!(partial.nblocks, 0);
        assert_eq!(partial.nt, 61);
    }

    #[test]
    fn set_parses_values_and_refuses_bad_ones() {
        let mut s = KilosortSettings::default();
        s.set("Th_universal", "8.5").unwrap();
        s.set("drift_smoothing", "[1, 0.5, 0]").unwrap();
        s.set("templates_file", "/data/wTEMP.npz").unwrap();
        s.set("templates_from_data", "false").unwrap();
        assert_eq!(s.th_universal, 8.5);
        assert_eq!(s.drift_smoothing, [1.0, 0.5, 0.0]);
        let before = s.clone();
        for (key, value, expect) in [
            ("Th_univrsal", "9", "unknown setting"),
            ("nt", "60", "odd"),
            ("nblocks", "-1", "nblocks"),
            ("nskip", "0", "at least 1"),
            ("highpass_cutoff", "\"fast\"", "highpass_cutoff"),
        ] {
            let e = s.set(key, value).unwrap_err().to_string();
            assert!(e.contains(expect), "{key}={value}: {e}");
            assert_eq!(s, before, "{key}={value} left the settings changed");
        }
        assert!(KilosortSettings::from_json(r#"{"bogus": 1}"#).is_err());
        let mut file_missing = KilosortSettings::default();
        assert!(file_missing.set("templates_from_data", "false").is_err());
    }
}
