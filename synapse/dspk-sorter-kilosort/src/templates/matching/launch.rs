//! Host side of learned-template matching: the matcher, its device buffers and launches.

use cubecl::CubeElement;
use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use dspk_ops::launch::UnitLayout;
use dspk_ops::{DeviceArray, DeviceLimits, DeviceWindow};

use super::MatchSettings;
use super::kernel;
use super::setup::Tables;
use crate::algorithms::projection::Projection;
use crate::runner::buffers::{alloc, prefix, range, read_counters, reset_counters, upload};
use crate::spikes::{LearnedChannels, MatchedSpikes};
use crate::{Error, Result};

/// Peak records allocated before the first window (grown when a window has more). Tiny in
/// tests, so that every test with a few spikes also grows the records between peels.
const INITIAL_RECORDS: usize = if cfg!(test) { 4 } else { 1 << 12 };

/// Learned-template matching (Kilosort4 §7) on whitened, drift-corrected windows, on the
/// device.
///
/// Built once per set of learned templates `U` `[N, P, C]` (uploads their sparse form, norms,
/// waveforms and the cross-correlations `ctc` `[N, N, 2 nt - 1]`);
/// [`match_window`](Self::match_window) then runs on each window of `n` samples per channel:
///
/// 1. `Bp[c, p, t] = sum_j X[c, t + j - nt / 2] * wPCA[p, j]` and `B[m, t] = sum_{c, p} U[m, p,
///    c] * Bp[c, p, t]`, summed over each template's nonzero channels only (exact: the other
///    terms are zero);
/// 2. peels, at most `max_peels`: `Cf[m, t] = max(B[m, t], 0)^2 / nm[m]` (`nm[m] = sum U[m]^2`)
///    where a whole template fits around `t` (`nt / 2 <= t < n - nt / 2`; 0 elsewhere),
///    `best[t] = max_m Cf`, `arg[t]` the first template reaching it; peaks where `best[t] >
///    Th^2` and no `best` within `nt` columns is larger (Kilosort's max-pool test); none: stop.
///    Each peak's template `arg[t]`, scale `a = B[arg, t] / nm[arg]` and score `sqrt(best[t])`
///    are taken before any subtraction of the peel; then every peak is subtracted from the scores
///    (`B[:, t + l] -= a * ctc[:, arg, l]`, `|l| < nt`) and from the residual (`X[c, t - nt / 2 +
///    j] -= a * sum_p U[arg, p, c] * wPCA[p, j]`), overlapping peaks (ties) in column order;
/// 3. for the peaks whose column lies in the window's owned range, the features
///    `sum_j Xres[c, t - nt / 2 + j] * wPCA[p, j] + a * U[arg, p, c]` on the template's
///    [`channels`](Self::channels), with the final residual.
///
/// Unlike Kilosort, which blanks `Cf` in the padding of each batch, peaks are found and
/// subtracted over the whole array (halos included) and only owned columns report spikes. A
/// spike's outcome depends on the spikes around it: columns closer than `2 nt` interact through
/// the subtractions. With [`halo`](Self::halo) samples of real data on each side of the owned
/// range, the spikes equal those of one array holding the whole recording unless a chain of
/// such interacting spikes reaches from the owned range more than `2 nt` into the halo (rare;
/// Kilosort's own batches are not cut-independent either).
///
/// All sums run in a fixed order, every value has one writer and no float atomics are used:
/// results do not depend on thread scheduling. Device memory: `C * (P + 1) + N + 3` 4-byte
/// values per window sample, allocated for the longest window seen and reused; `N^2 (2 nt - 1)`
/// for `ctc`; `5 + nc * P` per peak record (grown to the most peaks one window had).
#[derive(Debug)]
pub struct Matcher {
    tables: Tables,
    threshold: f32,
    max_peels: usize,
    limits: DeviceLimits,
    /// How the kernels' units map onto cubes on this client.
    layout: UnitLayout,
    device: Uploaded,
    /// `[FOUND, FIRST_BAD]`.
    counters: DeviceArray<u32>,
    /// One value the projection is given in place of the energies it does not write.
    no_energy: DeviceArray<f32>,
    scratch: Scratch,
    records: Records,
}

/// The tables of [`Tables`] on the device.
#[derive(Debug)]
struct Uploaded {
    wpca: DeviceArray<f32>,
    slot_channel: DeviceArray<u32>,
    slot_weights: DeviceArray<f32>,
    slot_of: DeviceArray<u32>,
    waveforms: DeviceArray<f32>,
    norms: DeviceArray<f32>,
    ctc: DeviceArray<f32>,
    ucc: DeviceArray<f32>,
    feature_channels: DeviceArray<u32>,
}

/// Per-sample buffers, sized for `samples` samples per channel.
#[derive(Debug)]
struct Scratch {
    samples: usize,
    /// `[C, P, samples]`.
    bp: DeviceArray<f32>,
    /// `[C, samples]`.
    xres: DeviceArray<f32>,
    /// `[N, samples]`.
    b: DeviceArray<f32>,
    best: DeviceArray<f32>,
    arg: DeviceArray<u32>,
    /// One peel's peak columns, unordered.
    found: DeviceArray<u32>,
}

/// Peak records of one window, sized for `capacity` records.
#[derive(Debug)]
struct Records {
    capacity: usize,
    col: DeviceArray<u32>,
    tmpl: DeviceArray<u32>,
    amp: DeviceArray<f32>,
    cf: DeviceArray<f32>,
    /// Records of the owned spikes, in output order.
    chosen: DeviceArray<u32>,
    /// `[capacity, nc, P]`.
    features: DeviceArray<f32>,
}

impl Matcher {
    /// A matcher for the `n_templates` learned templates `templates` (`U` `[N, P, C]`
    /// row-major, in PC space) with the PCs `wpca` (`[P, nt]` row-major), trough index
    /// `nt0min`, on channels at `positions` (`[x, y]` µm, `C` of them).
    ///
    /// # Errors
    ///
    /// [`Error::Setting`] when `th_learned` is not finite and positive, or `max_peels` or
    /// `nearest_chans` is 0; [`Error::Input`] when the shapes disagree, `nt` is even or not
    /// above `nt0min`, a value is not finite, or a template is all zero; [`Error::Ops`] when a
    /// table (`ctc` above all) exceeds the device's buffer limits.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: &Client,
        templates: &[f32],
        n_templates: usize,
        wpca: &[f32],
        nt: usize,
        nt0min: usize,
        positions: &[[f32; 2]],
        settings: &MatchSettings,
    ) -> Result<Self> {
        let tables = Tables::new(
            templates,
            n_templates,
            wpca,
            nt,
            nt0min,
            positions,
            settings,
        )?;
        let limits = DeviceLimits::of(client);
        for (what, values) in [
            ("matching: ctc", tables.ctc.len()),
            ("matching: waveforms", tables.waveforms.len()),
            ("matching: slot_of", tables.slot_of.len()),
        ] {
            limits.check(what, values as u64, 4)?;
        }
        let device = Uploaded {
            wpca: upload(client, &tables.wpca)?,
            slot_channel: upload(client, &tables.slot_channel)?,
            slot_weights: upload(client, &tables.slot_weights)?,
            slot_of: upload(client, &tables.slot_of)?,
            waveforms: upload(client, &tables.waveforms)?,
            norms: upload(client, &tables.norms)?,
            ctc: upload(client, &tables.ctc)?,
            ucc: upload(client, &tables.ucc)?,
            feature_channels: upload(client, &tables.feature_channels.channels)?,
        };
        let mut matcher = Self {
            threshold: settings.th_learned,
            max_peels: settings.max_peels,
            limits,
            layout: UnitLayout::of(client),
            device,
            counters: alloc::<u32>(client, 2)?,
            no_energy: alloc::<f32>(client, 1)?,
            scratch: Scratch {
                samples: 0,
                bp: alloc::<f32>(client, 0)?,
                xres: alloc::<f32>(client, 0)?,
                b: alloc::<f32>(client, 0)?,
                best: alloc::<f32>(client, 0)?,
                arg: alloc::<u32>(client, 0)?,
                found: alloc::<u32>(client, 0)?,
            },
            records: Records {
                capacity: 0,
                col: alloc::<u32>(client, 0)?,
                tmpl: alloc::<u32>(client, 0)?,
                amp: alloc::<f32>(client, 0)?,
                cf: alloc::<f32>(client, 0)?,
                chosen: alloc::<u32>(client, 0)?,
                features: alloc::<f32>(client, 0)?,
            },
            tables,
        };
        matcher.grow_records(client, INITIAL_RECORDS, 0)?;
        Ok(matcher)
    }

    /// Each template's feature channels: the `nc = min(nearest_chans, C)` channels nearest its
    /// best channel (`argmax_c sum_p U[n, p, c]^2`, the first on ties), nearest first, ties by
    /// channel index (Kilosort's `iCC[:, iU[n]]`).
    #[must_use]
    pub fn channels(&self) -> &LearnedChannels {
        &self.tables.feature_channels
    }

    /// Samples of real data needed on each side of a window's owned range: `4 nt` (244 by
    /// default). A spike's column needs `nt` columns of scores on each side (the max-pool), each
    /// score `nt / 2` samples (a template); spikes whose columns lie within `2 nt - 1` of it
    /// change those scores when subtracted, and they need the same. See [`Matcher`] for what
    /// this guarantees.
    #[must_use]
    pub fn halo(&self) -> usize {
        4 * self.tables.nt
    }

    /// An empty [`MatchedSpikes`] shaped for this matcher (`nc` channels, `P` components).
    #[must_use]
    pub fn new_spikes(&self) -> MatchedSpikes {
        MatchedSpikes::new(self.tables.feature_channels.nc, self.tables.pcs)
    }

    /// Matches `window` (whitened, drift-corrected data, `C x read` samples) and appends the
    /// spikes whose score column `t` lies in the window's owned samples to `spikes`, ordered
    /// by `(sample, peel)`. A spike's `sample` is its trough, `start + t - (nt / 2 - nt0min)`
    /// (template sample `j` lies on recording sample `start + t + j - nt / 2`). Waits for the
    /// device: two read-backs per peel (the peak count, then the peaks), one at the end.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when the window does not have the matcher's channels, `spikes` is not
    /// empty and holds another `nc` or `P`, or a sample of the window's array (halos included)
    /// is NaN or infinite (naming the first; no spike is added); [`Error::Ops`] when the
    /// window's buffers exceed the device's limits; [`Error::Device`] when the device fails.
    pub fn match_window(
        &mut self,
        client: &Client,
        window: &DeviceWindow,
        spikes: &mut MatchedSpikes,
    ) -> Result<()> {
        let array = window.array();
        let (nc, pcs) = (self.tables.feature_channels.nc, self.tables.pcs);
        if array.channels() != self.tables.channels {
            return Err(Error::Input {
                what: "matching window",
                reason: format!(
                    "{} channels, the matcher was built for {}",
                    array.channels(),
                    self.tables.channels
                ),
            });
        }
        if !spikes.adopt_shape(nc, pcs) {
            return Err(Error::Input {
                what: "matched spikes",
                reason: format!(
                    "shaped for {} channels x {} components, the matcher gives {nc} x {pcs}",
                    spikes.nc(),
                    spikes.p()
                ),
            });
        }
        let owned = window.owned_local();
        if owned.is_empty() {
            return Ok(());
        }
        let n = array.samples();
        self.reserve_samples(client, n)?;
        reset_counters(client, &self.counters);
        self.project(client, array);
        self.score(client, n);

        // Peels. `columns[r]`, `peels[r]`: record r's column and peel, on the host.
        let mut columns: Vec<u32> = Vec::new();
        let mut peels: Vec<usize> = Vec::new();
        for peel in 0..self.max_peels {
            self.find(client, n);
            let [found, first_bad] = read_counters(client, &self.counters)?;
            if first_bad != u32::MAX {
                let (c, t) = (first_bad as usize / n, first_bad as usize % n);
                return Err(Error::Input {
                    what: "matching window",
                    reason: format!(
                        "whitened sample {} of channel {c} is NaN or infinite",
                        window.start() + t as u64
                    ),
                });
            }
            let found = found as usize;
            if found == 0 {
                break;
            }
            let bytes = client.read_one(prefix(&self.scratch.found, found))?;
            let mut peaks = u32::from_bytes(&bytes).to_vec();
            peaks.sort_unstable();
            let first = columns.len();
            self.grow_records(client, first + found, first)?;
            client.write(
                &range(&self.records.col, first, found),
                Bytes::from_elems(peaks.clone()),
            );
            columns.extend_from_slice(&peaks);
            peels.extend(std::iter::repeat_n(peel, found));
            self.subtract(client, n, first, found);
            reset_counters(client, &self.counters);
        }

        // Owned spikes in (column, peel) order.
        let mut chosen: Vec<u32> = (0..columns.len() as u32)
            .filter(|&r| owned.contains(&(columns[r as usize] as usize)))
            .collect();
        chosen.sort_by_key(|&r| (columns[r as usize], peels[r as usize]));
        if chosen.is_empty() {
            return Ok(());
        }
        let count = chosen.len();
        client.write(
            &range(&self.records.chosen, 0, count),
            Bytes::from_elems(chosen.clone()),
        );
        self.features(client, n, count);
        let total = columns.len();
        let records = &self.records;
        let bytes = client.read(vec![
            prefix(&records.tmpl, total),
            prefix(&records.amp, total),
            prefix(&records.cf, total),
            prefix(&records.features, count * nc * pcs),
        ])?;
        let tmpl = u32::from_bytes(&bytes[0]);
        let amp = f32::from_bytes(&bytes[1]);
        let cf = f32::from_bytes(&bytes[2]);
        let features = f32::from_bytes(&bytes[3]);
        let shift = (self.tables.nt / 2 - self.tables.nt0min) as i64;
        let start = window.start() as i64;
        for &r in &chosen {
            let r = r as usize;
            spikes.sample.push(start + i64::from(columns[r]) - shift);
            spikes.template.push(tmpl[r]);
            spikes.score.push(cf[r].sqrt());
            spikes.scale.push(amp[r]);
        }
        spikes.features.extend_from_slice(features);
        Ok(())
    }

    /// Queues the PC projections `bp` of `array` and its copy into the residual.
    fn project(&self, client: &Client, array: &DeviceArray<f32>) {
        let scratch = &self.scratch;
        Projection {
            x: array,
            weights: &self.device.wpca,
            components: self.tables.pcs,
            nt: self.tables.nt,
            out: &scratch.bp,
            counters: &self.counters,
            copy: (&scratch.xres, true),
            energy: (&self.no_energy, false),
        }
        .launch(client);
    }

    /// Queues `template_scores` over windows of `n` samples.
    fn score(&self, client: &Client, n: usize) {
        let t = &self.tables;
        // `template_scores`' units: one per column on a GPU, per run of columns on the cpu.
        let columns = if self.layout.blocked() {
            kernel::CPU_COLUMNS
        } else {
            1
        };
        kernel::template_scores::launch(
            client,
            self.layout.cube_count(t.templates * n.div_ceil(columns)),
            self.layout.cube_dim(),
            self.scratch.bp.arg(t.channels * t.pcs * n),
            self.device.slot_channel.arg(t.slot_channel.len()),
            self.device.slot_weights.arg(t.slot_weights.len()),
            self.scratch.b.arg(t.templates * n),
            t.templates as u32,
            t.slots as u32,
            n as u32,
            t.pcs,
            self.layout.blocked(),
        );
    }

    /// Queues `best_templates` and `find_peaks` (the counters reset before).
    fn find(&self, client: &Client, n: usize) {
        let t = &self.tables;
        let scratch = &self.scratch;
        kernel::best_templates::launch(
            client,
            self.layout.cube_count(n),
            self.layout.cube_dim(),
            scratch.b.arg(t.templates * n),
            self.device.norms.arg(t.templates),
            scratch.best.arg(n),
            scratch.arg.arg(n),
            t.templates as u32,
            n as u32,
            t.nt as u32,
            self.layout.blocked(),
        );
        kernel::find_peaks::launch(
            client,
            self.layout.cube_count(n.saturating_sub(t.nt - 1)),
            self.layout.cube_dim(),
            scratch.best.arg(n),
            self.counters.arg(2),
            scratch.found.arg(n),
            n as u32,
            n as u32,
            t.nt as u32,
            self.threshold * self.threshold,
            self.layout.blocked(),
        );
    }

    /// Queues the parameters of records `first..first + count` (columns written) and their
    /// subtraction from the scores and the residual.
    fn subtract(&self, client: &Client, n: usize, first: usize, count: usize) {
        let t = &self.tables;
        let (scratch, records, device) = (&self.scratch, &self.records, &self.device);
        let cap = records.capacity;
        kernel::peak_params::launch(
            client,
            self.layout.cube_count(count),
            self.layout.cube_dim(),
            records.col.arg(cap),
            scratch.arg.arg(n),
            scratch.best.arg(n),
            scratch.b.arg(t.templates * n),
            device.norms.arg(t.templates),
            records.tmpl.arg(cap),
            records.amp.arg(cap),
            records.cf.arg(cap),
            first as u32,
            count as u32,
            n as u32,
            self.layout.blocked(),
        );
        kernel::subtract_scores::launch(
            client,
            self.layout.cube_count(count * t.templates * (2 * t.nt - 1)),
            self.layout.cube_dim(),
            records.col.arg(cap),
            records.tmpl.arg(cap),
            records.amp.arg(cap),
            device.ctc.arg(t.ctc.len()),
            scratch.b.arg(t.templates * n),
            first as u32,
            count as u32,
            t.templates as u32,
            n as u32,
            t.nt as u32,
            self.layout.blocked(),
        );
        kernel::subtract_waveforms::launch(
            client,
            self.layout.cube_count(count * t.slots * t.nt),
            self.layout.cube_dim(),
            records.col.arg(cap),
            records.tmpl.arg(cap),
            records.amp.arg(cap),
            device.slot_channel.arg(t.slot_channel.len()),
            device.slot_of.arg(t.slot_of.len()),
            device.waveforms.arg(t.waveforms.len()),
            scratch.xres.arg(t.channels * n),
            first as u32,
            count as u32,
            t.slots as u32,
            t.channels as u32,
            n as u32,
            t.nt as u32,
            self.layout.blocked(),
        );
    }

    /// Queues `spike_features` for the first `spikes` chosen records.
    fn features(&self, client: &Client, n: usize, spikes: usize) {
        let t = &self.tables;
        let (records, device) = (&self.records, &self.device);
        let cap = records.capacity;
        let nc = t.feature_channels.nc;
        kernel::spike_features::launch(
            client,
            self.layout.cube_count(spikes * nc),
            self.layout.cube_dim(),
            self.scratch.xres.arg(t.channels * n),
            records.col.arg(cap),
            records.tmpl.arg(cap),
            records.amp.arg(cap),
            records.chosen.arg(cap),
            device
                .feature_channels
                .arg(t.feature_channels.channels.len()),
            device.ucc.arg(t.ucc.len()),
            device.wpca.arg(t.wpca.len()),
            records.features.arg(cap * nc * t.pcs),
            spikes as u32,
            n as u32,
            nc as u32,
            t.nt as u32,
            t.pcs,
            self.layout.blocked(),
        );
    }

    /// Makes the per-sample scratch hold windows of `samples` samples (reallocated only when
    /// longer than any before).
    fn reserve_samples(&mut self, client: &Client, samples: usize) -> Result<()> {
        if self.scratch.samples >= samples {
            return Ok(());
        }
        let t = &self.tables;
        let bp = t.channels * t.pcs * samples;
        let b = t.templates * samples;
        self.limits
            .check("matching: PC projections", bp as u64, 4)?;
        self.limits
            .check("matching: template scores", b as u64, 4)?;
        if samples + 2 * t.nt > u32::MAX as usize {
            return Err(Error::Input {
                what: "matching window",
                reason: format!("{samples} samples do not fit 32-bit indices"),
            });
        }
        self.scratch = Scratch {
            samples,
            bp: alloc::<f32>(client, bp)?,
            xres: alloc::<f32>(client, t.channels * samples)?,
            b: alloc::<f32>(client, b)?,
            best: alloc::<f32>(client, samples)?,
            arg: alloc::<u32>(client, samples)?,
            found: alloc::<u32>(client, samples)?,
        };
        Ok(())
    }

    /// Makes the records hold at least `needed`, keeping the first `kept` records' parameters
    /// (read back and uploaded again when the buffers grow; columns are rewritten by the
    /// caller only for new records, so they are kept too).
    fn grow_records(&mut self, client: &Client, needed: usize, kept: usize) -> Result<()> {
        if self.records.capacity >= needed {
            return Ok(());
        }
        let capacity = needed.next_power_of_two().min(u32::MAX as usize);
        let features = capacity * self.tables.feature_channels.nc * self.tables.pcs;
        self.limits
            .check("matching: spike features", features as u64, 4)?;
        let (mut col, mut tmpl, mut amp, mut cf) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        if kept > 0 {
            let r = &self.records;
            let bytes = client.read(vec![
                prefix(&r.col, kept),
                prefix(&r.tmpl, kept),
                prefix(&r.amp, kept),
                prefix(&r.cf, kept),
            ])?;
            col = u32::from_bytes(&bytes[0]).to_vec();
            tmpl = u32::from_bytes(&bytes[1]).to_vec();
            amp = f32::from_bytes(&bytes[2]).to_vec();
            cf = f32::from_bytes(&bytes[3]).to_vec();
        }
        col.resize(capacity, 0);
        tmpl.resize(capacity, 0);
        amp.resize(capacity, 0.0);
        cf.resize(capacity, 0.0);
        self.records = Records {
            capacity,
            col: upload(client, &col)?,
            tmpl: upload(client, &tmpl)?,
            amp: upload(client, &amp)?,
            cf: upload(client, &cf)?,
            chosen: alloc::<u32>(client, capacity)?,
            features: alloc::<f32>(client, features)?,
        };
        Ok(())
    }
}
