//! Probes: where each contact sits (µm), which shank it is on, and which recording channel
//! (device channel index) it is wired to.
//!
//! One [`Probe`] type whatever the source: probeinterface JSON, Kilosort's probe JSON and
//! `chanMap.mat`, `.prb` files, SpikeGLX metadata.

use std::path::Path;

use crate::{Error, Result};

mod kilosort;
mod mat;
mod prb;
mod probeinterface;

pub use kilosort::{
    parse_kilosort_mat, read_kilosort_json, read_kilosort_mat, write_kilosort_json,
};
pub use prb::{PRB_DEPTH_LIMIT, PRB_RANGE_LIMIT, PRB_SIZE_LIMIT, parse_prb, read_prb};
pub use probeinterface::{WRITTEN_CONTACT_RADIUS_UM, read_probeinterface, write_probeinterface};

/// One electrode contact.
#[derive(Debug, Clone, PartialEq)]
pub struct Contact {
    /// The contact's id as the source names it (`"e12"`, `"0"`); empty if it has none.
    pub id: String,
    /// Position `[x, y]` in µm, in the probe's plane (y along the shank).
    pub position: [f64; 2],
    /// The shank the contact is on (0 for single-shank probes).
    pub shank: u32,
    /// The recording channel (0-based column of the recording) the contact is wired to, or
    /// `None` if it is not connected or not recorded.
    pub device_channel: Option<usize>,
}

/// A probe: a name and its contacts, in the source's contact order.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The probe's model or name (`"Neuropixels 1.0"`, a file's `name`); empty if unknown.
    pub name: String,
    contacts: Vec<Contact>,
}

impl Probe {
    /// A probe with `contacts`.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if there are no contacts, a position is not finite or two contacts
    /// share a device channel.
    pub fn new(name: impl Into<String>, contacts: Vec<Contact>) -> Result<Self> {
        check_contacts(&contacts).map_err(Error::Argument)?;
        Ok(Self {
            name: name.into(),
            contacts,
        })
    }

    /// A probe read from `path`, with a problem reported as [`dspk_io::Error::Invalid`] naming the file.
    pub(crate) fn from_file(
        path: &Path,
        name: impl Into<String>,
        contacts: Vec<Contact>,
    ) -> Result<Self> {
        check_contacts(&contacts).map_err(|problem| Error::invalid(path, problem))?;
        Ok(Self {
            name: name.into(),
            contacts,
        })
    }

    /// The contacts, in the source's order.
    #[must_use]
    pub fn contacts(&self) -> &[Contact] {
        &self.contacts
    }

    /// The number of contacts.
    #[must_use]
    pub fn num_contacts(&self) -> usize {
        self.contacts.len()
    }

    /// The positions `[x, y]` (µm) of all contacts, in contact order.
    #[must_use]
    pub fn positions(&self) -> Vec<[f64; 2]> {
        self.contacts.iter().map(|c| c.position).collect()
    }

    /// The connected contacts sorted by device channel: the order of a recording's channels,
    /// which is what a sorter needs (positions by channel).
    #[must_use]
    pub fn connected_by_channel(&self) -> Vec<&Contact> {
        let mut connected: Vec<&Contact> = self
            .contacts
            .iter()
            .filter(|c| c.device_channel.is_some())
            .collect();
        connected.sort_by_key(|c| c.device_channel);
        connected
    }

    /// The positions of recording channels `0..num_channels`, from the contacts wired to them.
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if a channel below `num_channels` has no contact.
    pub fn channel_positions(&self, num_channels: usize) -> Result<Vec<[f64; 2]>> {
        let mut positions = vec![None; num_channels];
        for contact in &self.contacts {
            if let Some(channel) = contact.device_channel
                && channel < num_channels
            {
                positions[channel] = Some(contact.position);
            }
        }
        positions
            .into_iter()
            .enumerate()
            .map(|(channel, p)| {
                p.ok_or_else(|| {
                    Error::Argument(format!(
                        "recording channel {channel} has no contact on probe `{}`",
                        self.name
                    ))
                })
            })
            .collect()
    }
}

/// Checks what every probe must satisfy; the problem as a sentence.
fn check_contacts(contacts: &[Contact]) -> std::result::Result<(), String> {
    if contacts.is_empty() {
        return Err("the probe has no contacts".into());
    }
    let mut seen = std::collections::HashMap::new();
    for (i, contact) in contacts.iter().enumerate() {
        if !contact.position.iter().all(|v| v.is_finite()) {
            return Err(format!(
                "contact {i} has a non-finite position {:?}",
                contact.position
            ));
        }
        if let Some(channel) = contact.device_channel
            && let Some(first) = seen.insert(channel, i)
        {
            return Err(format!(
                "contacts {first} and {i} are both wired to device channel {channel}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact(x: f64, y: f64, channel: Option<usize>) -> Contact {
        Contact {
            id: String::new(),
            position: [x, y],
            shank: 0,
            device_channel: channel,
        }
    }

    #[test]
    fn channel_order_and_checks() {
        let probe = Probe::new(
            "p",
            vec![
                contact(0.0, 20.0, Some(1)),
                contact(5.0, 0.0, None),
                contact(0.0, 0.0, Some(0)),
            ],
        )
        .unwrap();
        assert_eq!(
            probe.channel_positions(2).unwrap(),
            vec![[0.0, 0.0], [0.0, 20.0]]
        );
        assert_eq!(probe.connected_by_channel().len(), 2);
        assert!(probe.channel_positions(3).is_err());
        assert!(Probe::new("p", vec![]).is_err());
        assert!(Probe::new("p", vec![contact(f64::NAN, 0.0, None)]).is_err());
        assert!(
            Probe::new(
                "p",
                vec![contact(0.0, 0.0, Some(2)), contact(1.0, 0.0, Some(2))]
            )
            .is_err()
        );
    }
}
