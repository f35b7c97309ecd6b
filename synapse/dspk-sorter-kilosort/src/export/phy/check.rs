//! The checks [`write_phy_folder`](super::write_phy_folder) makes before writing: the
//! sorting's and the output's parts agree in length and range.

use super::PhyOutput;
use crate::export::sorting::Sorting;
use crate::{Error, Result};

/// An [`Error::Input`] about `what`.
pub(super) fn input(what: &'static str, reason: String) -> Error {
    Error::Input { what, reason }
}

/// Checks that a field holds `expected` values (`per` says what one is).
fn check_len(what: &'static str, len: usize, expected: usize, per: &str) -> Result<()> {
    if len == expected {
        Ok(())
    } else {
        Err(input(
            what,
            format!("{len} values, expected {expected} ({per})"),
        ))
    }
}

/// Checks that the sorting's and the output's parts agree with each other.
pub(super) fn check(output: &PhyOutput) -> Result<()> {
    let s = output.sorting;
    let n = s.num_spikes();
    let units = s.num_units();
    let c = s.channels;
    let per_spike = [
        ("Sorting::spike_clusters", s.spike_clusters.len()),
        ("Sorting::spike_templates", s.spike_templates.len()),
        ("Sorting::amplitudes", s.amplitudes.len()),
        ("Sorting::spike_positions", s.spike_positions.len()),
    ];
    for (what, len) in per_spike {
        check_len(what, len, n, "one per kept spike, as Sorting::spike_times")?;
    }
    let kept = s.kept.iter().filter(|&&k| k).count();
    if kept != n {
        return Err(input(
            "Sorting::kept",
            format!("{kept} spikes marked kept, Sorting::spike_times has {n}"),
        ));
    }
    let sizes = [
        (
            "Sorting::pc_features",
            s.pc_features.len(),
            [n, s.p, s.pc_channels],
            "[kept spikes, p, pc_channels]",
        ),
        (
            "Sorting::pc_feature_ind",
            s.pc_feature_ind.len(),
            [units, s.pc_channels, 1],
            "[units, pc_channels]",
        ),
        (
            "Sorting::unit_features",
            s.unit_features.len(),
            [units, c, s.p],
            "[units, channels, p]",
        ),
        (
            "Sorting::templates",
            s.templates.len(),
            [units, s.nt, c],
            "[units, nt, channels]",
        ),
        (
            "Sorting::contamination_pct",
            s.contamination_pct.len(),
            [units, 1, 1],
            "one per unit, as Sorting::labels",
        ),
        (
            "Sorting::unit_amplitudes",
            s.unit_amplitudes.len(),
            [units, 1, 1],
            "one per unit, as Sorting::labels",
        ),
        (
            "Sorting::similar_templates",
            s.similar_templates.len(),
            [units, units, 1],
            "[units, units]",
        ),
        (
            "PhyOutput::channel_map",
            output.channel_map.len(),
            [c, 1, 1],
            "one per sorted channel, Sorting::channels",
        ),
        (
            "PhyOutput::channel_positions",
            output.channel_positions.len(),
            [c, 1, 1],
            "one per sorted channel, Sorting::channels",
        ),
        (
            "PhyOutput::channel_shanks",
            output.channel_shanks.len(),
            [c, 1, 1],
            "one per sorted channel, Sorting::channels",
        ),
        (
            "PhyOutput::whitening",
            output.whitening.len(),
            [c, c, 1],
            "[channels, channels]",
        ),
    ];
    for (what, len, dims, per) in sizes {
        let expected = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| input(what, format!("the size {dims:?} overflows")))?;
        check_len(what, len, expected, per)?;
    }
    check_spikes(s)?;
    let int32s = [
        ("Sorting::spike_templates", s.spike_templates.as_slice()),
        ("PhyOutput::channel_shanks", output.channel_shanks),
    ];
    for (what, values) in int32s {
        if let Some(i) = values.iter().position(|&v| i32::try_from(v).is_err()) {
            return Err(input(
                what,
                format!("entry {i} is {}, over the int32 Kilosort writes", values[i]),
            ));
        }
    }
    if let Some(i) = s.pc_feature_ind.iter().position(|&ch| ch as usize >= c) {
        return Err(input(
            "Sorting::pc_feature_ind",
            format!(
                "entry {i} is channel {}, the sorting has {c} channels",
                s.pc_feature_ind[i]
            ),
        ));
    }
    if output.params.sample_rate.to_bits() != s.sample_rate.to_bits() {
        return Err(input(
            "PhyOutput::params",
            format!(
                "sample_rate {} Hz, the sorting's is {} Hz",
                output.params.sample_rate, s.sample_rate
            ),
        ));
    }
    let columns = output.params.n_channels_dat;
    if let Some(i) = output
        .channel_map
        .iter()
        .position(|&m| m as usize >= columns)
    {
        return Err(input(
            "PhyOutput::channel_map",
            format!(
                "channel {i} is column {} of the raw file, params.n_channels_dat is {columns}",
                output.channel_map[i]
            ),
        ));
    }
    Ok(())
}

/// Checks the spike times (non-decreasing, inside the recording) and units (below the unit
/// count).
fn check_spikes(s: &Sorting) -> Result<()> {
    let samples = i64::try_from(s.num_samples).unwrap_or(i64::MAX);
    if let Some(i) = s.spike_times.iter().position(|&t| t < 0 || t >= samples) {
        return Err(input(
            "Sorting::spike_times",
            format!(
                "spike {i} is at sample {}, outside the recording's {} samples",
                s.spike_times[i], s.num_samples
            ),
        ));
    }
    if let Some(i) = s.spike_times.windows(2).position(|w| w[1] < w[0]) {
        return Err(input(
            "Sorting::spike_times",
            format!(
                "spike {} at sample {} comes after one at {}: times must not decrease",
                i + 1,
                s.spike_times[i + 1],
                s.spike_times[i]
            ),
        ));
    }
    let units = s.num_units();
    if let Some(i) = s.spike_clusters.iter().position(|&u| u as usize >= units) {
        return Err(input(
            "Sorting::spike_clusters",
            format!(
                "spike {i} is in unit {}, the sorting has {units} units (Sorting::labels)",
                s.spike_clusters[i]
            ),
        ));
    }
    Ok(())
}
