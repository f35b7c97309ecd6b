//! The probe as the sorter sees it (`docs/KILOSORT4.md` §1.3): one entry per sorted
//! channel, the recording channel it reads, its position and its shank.

use dspk_synapse::Probe;

use crate::{Error, Result};

/// The sorted channels of a probe, in the order the sort indexes them (by recording channel):
/// Kilosort4's `chanMap` (the recording channel of each), `xc`, `yc` (µm, `f32` as Kilosort keeps
/// them) and `kcoords` (shank), with bad channels already removed.
#[derive(Debug, Clone, PartialEq)]
pub struct SortProbe {
    channels: Vec<usize>,
    positions: Vec<[f32; 2]>,
    shanks: Vec<u32>,
}

impl SortProbe {
    /// `channels` on one column `pitch` µm apart in the order given (`[0, i * pitch]`), one
    /// shank: EMUsort's convention for EMG arrays, whose contacts have no probe geometry the
    /// sorter can use.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new); [`Error::Input`] for a pitch that is not positive and finite.
    pub fn line(channels: Vec<usize>, pitch: f64) -> Result<Self> {
        if !(pitch.is_finite() && pitch > 0.0) {
            return Err(Error::Input {
                what: "probe",
                reason: format!("a line probe needs a positive pitch, got {pitch}"),
            });
        }
        let positions = (0..channels.len())
            .map(|i| [0.0, (i as f64 * pitch) as f32])
            .collect();
        let shanks = vec![0; channels.len()];
        Self::new(channels, positions, shanks)
    }

    /// A probe from its parts: for sorted channel `i`, recording channel `channels[i]` at
    /// `positions[i]` (`[x, y]` µm) on shank `shanks[i]`.
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when there are no channels, the lengths differ, a recording channel
    /// repeats or a position is not finite.
    pub fn new(channels: Vec<usize>, positions: Vec<[f32; 2]>, shanks: Vec<u32>) -> Result<Self> {
        let what = "probe";
        if channels.is_empty() {
            return Err(Error::Input {
                what,
                reason: "no channel to sort".to_string(),
            });
        }
        if positions.len() != channels.len() || shanks.len() != channels.len() {
            return Err(Error::Input {
                what,
                reason: format!(
                    "{} channels, {} positions and {} shank ids: one of each per channel",
                    channels.len(),
                    positions.len(),
                    shanks.len()
                ),
            });
        }
        let mut seen = channels.clone();
        seen.sort_unstable();
        if let Some(pair) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Input {
                what,
                reason: format!("recording channel {} is wired to two contacts", pair[0]),
            });
        }
        if let Some(i) = positions
            .iter()
            .position(|p| !(p[0].is_finite() && p[1].is_finite()))
        {
            return Err(Error::Input {
                what,
                reason: format!(
                    "channel {} position {:?} is not finite",
                    channels[i], positions[i]
                ),
            });
        }
        Ok(Self {
            channels,
            positions,
            shanks,
        })
    }

    /// The connected contacts of `probe` for a recording of `num_channels` channels, sorted by
    /// recording channel, without the recording channels in `bad_channels` (Kilosort4's
    /// `bad_channels`, given as recording channels).
    ///
    /// # Errors
    ///
    /// [`Error::Input`] when a contact is wired to a channel the recording does not have (the
    /// probe disagrees with the recording), a bad channel is not on the probe, or no channel
    /// is left; as [`new`](Self::new).
    pub fn from_probe(probe: &Probe, num_channels: usize, bad_channels: &[usize]) -> Result<Self> {
        let connected = probe.connected_by_channel();
        if let Some(contact) = connected
            .iter()
            .find(|c| c.device_channel.is_some_and(|d| d >= num_channels))
        {
            return Err(Error::Input {
                what: "probe",
                reason: format!(
                    "contact `{}` of probe `{}` is wired to channel {}, but the recording has {num_channels} channels",
                    contact.id,
                    probe.name,
                    contact.device_channel.unwrap_or_default()
                ),
            });
        }
        if let Some(&bad) = bad_channels
            .iter()
            .find(|&&b| !connected.iter().any(|c| c.device_channel == Some(b)))
        {
            return Err(Error::Input {
                what: "bad_channels",
                reason: format!(
                    "channel {bad} is not a connected channel of probe `{}`",
                    probe.name
                ),
            });
        }
        let kept: Vec<_> = connected
            .into_iter()
            .filter(|c| c.device_channel.is_some_and(|d| !bad_channels.contains(&d)))
            .collect();
        Self::new(
            kept.iter().filter_map(|c| c.device_channel).collect(),
            // Positions are µm; f32 holds them as Kilosort does.
            kept.iter()
                .map(|c| [c.position[0] as f32, c.position[1] as f32])
                .collect(),
            kept.iter().map(|c| c.shank).collect(),
        )
    }

    /// Number of sorted channels (`C`).
    #[must_use]
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    /// Always false: a probe has at least one channel.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// The recording channel of each sorted channel (Kilosort4's `chanMap`).
    #[must_use]
    pub fn channels(&self) -> &[usize] {
        &self.channels
    }

    /// `[x, y]` µm of each sorted channel (`xc`, `yc`).
    #[must_use]
    pub fn positions(&self) -> &[[f32; 2]] {
        &self.positions
    }

    /// The shank of each sorted channel (`kcoords`).
    #[must_use]
    pub fn shanks(&self) -> &[u32] {
        &self.shanks
    }

    /// The same channels in geometric order: by shank, then depth `y`, then `x`, then
    /// recording channel (only contacts at one place on one shank are ordered by their
    /// numbers). Two probes that list the same contacts in different orders, or a recording
    /// whose channels are renumbered with its probe, give the same geometric order, up to
    /// contacts that share a position.
    #[must_use]
    pub fn in_geometric_order(&self) -> Self {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by(|&a, &b| {
            let (pa, pb) = (self.positions[a], self.positions[b]);
            self.shanks[a]
                .cmp(&self.shanks[b])
                .then(pa[1].total_cmp(&pb[1]))
                .then(pa[0].total_cmp(&pb[0]))
                .then(self.channels[a].cmp(&self.channels[b]))
        });
        Self {
            channels: order.iter().map(|&i| self.channels[i]).collect(),
            positions: order.iter().map(|&i| self.positions[i]).collect(),
            shanks: order.iter().map(|&i| self.shanks[i]).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use dspk_synapse::Contact;

    use super::*;

    fn probe(wiring: &[(Option<usize>, f64)]) -> Probe {
        let contacts = wiring
            .iter()
            .enumerate()
            .map(|(i, &(channel, y))| Contact {
                id: format!("e{i}"),
                position: [0.0, y],
                shank: u32::from(i % 2 == 1),
                device_channel: channel,
            })
            .collect();
        Probe::new("test", contacts).unwrap()
    }

    #[test]
    fn from_probe_sorts_by_channel_and_drops_bad_and_unconnected() {
        let p = probe(&[
            (Some(2), 40.0),
            (None, 60.0),
            (Some(0), 0.0),
            (Some(1), 20.0),
        ]);
        let sorted = SortProbe::from_probe(&p, 3, &[1]).unwrap();
        assert_eq!(sorted.channels(), &[0, 2]);
        assert_eq!(sorted.positions(), &[[0.0, 0.0], [0.0, 40.0]]);
        assert_eq!(sorted.shanks(), &[0, 0]);
    }

    #[test]
    fn geometric_order_is_by_shank_depth_x_then_channel_whatever_the_listing() {
        // (channel, [x, y], shank); channels 4 and 6 share a place.
        let contacts = [
            (5, [16.0, 20.0], 1),
            (3, [48.0, 0.0], 0),
            (6, [0.0, 40.0], 0),
            (0, [16.0, 0.0], 0),
            (4, [0.0, 40.0], 0),
            (1, [0.0, 20.0], 0),
            (2, [0.0, 0.0], 1),
        ];
        let make = |order: &[usize]| {
            SortProbe::new(
                order.iter().map(|&i| contacts[i].0).collect(),
                order.iter().map(|&i| contacts[i].1).collect(),
                order.iter().map(|&i| contacts[i].2).collect(),
            )
            .unwrap()
            .in_geometric_order()
        };
        let sorted = make(&[0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(sorted.channels(), &[0, 3, 1, 4, 6, 2, 5]);
        assert_eq!(sorted.shanks(), &[0, 0, 0, 0, 0, 1, 1]);
        assert_eq!(sorted.positions()[1], [48.0, 0.0]);
        assert_eq!(make(&[6, 5, 4, 3, 2, 1, 0]), sorted);
        assert_eq!(make(&[3, 0, 6, 1, 5, 2, 4]), sorted);
    }

    #[test]
    fn a_probe_that_disagrees_with_the_recording_is_an_error() {
        let p = probe(&[(Some(0), 0.0), (Some(5), 20.0)]);
        let e = SortProbe::from_probe(&p, 4, &[]).unwrap_err().to_string();
        assert!(
            e.contains("wired to channel 5") && e.contains("4 channels"),
            "{e}"
        );
        let e = SortProbe::from_probe(&p, 8, &[3]).unwrap_err().to_string();
        assert!(e.contains("channel 3 is not a connected channel"), "{e}");
        let e = SortProbe::from_probe(&probe(&[(Some(0), 0.0)]), 1, &[0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no channel"), "{e}");
        assert!(SortProbe::new(vec![0, 0], vec![[0.0; 2]; 2], vec![0; 2]).is_err());
        assert!(SortProbe::new(vec![0], vec![[f32::NAN, 0.0]], vec![0]).is_err());
        assert!(SortProbe::new(vec![0, 1], vec![[0.0; 2]], vec![0; 2]).is_err());
    }
}
