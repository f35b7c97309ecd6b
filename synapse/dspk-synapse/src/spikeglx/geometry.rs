//! Probe geometry from `~snsGeomMap` (or `~snsShankMap` for older metadata).

use super::meta::{Meta, clip};
use super::stream::Stream;
use crate::probe::{Contact, Probe};
use crate::{Error, Result};

impl Meta {
    /// The probe of an imec stream: one contact per saved AP/LF column, wired to that column
    /// (`device_channel` = the column's index in the recording), `None` for NI-DAQ streams or
    /// metadata without a map.
    ///
    /// From `~snsGeomMap=(partNumber,nShanks,shankSpacing,shankWidth)(s:x:z:used)...`:
    /// position `[s * shankSpacing + x, z]` µm, shank `s`. This keeps SpikeGLX's coordinates,
    /// where `x` is measured from the shank's left edge (probeinterface's
    /// `read_spikeglx` shifts Neuropixels 1.0 x by -11 µm and so reports 16, 48, 0, 32 where
    /// SpikeGLX says 27, 59, 11, 43; for Neuropixels 2.0 it shifts by -27 µm). Without it, from
    /// `~snsShankMap=(nShanks,nCols,nRows)(s:col:row:used)...` with the electrode pitch of
    /// Neuropixels 1.0 (32 µm columns, 20 µm rows, odd rows shifted 16 µm left) or 2.0 (32 µm,
    /// 15 µm, shanks 250 µm apart) in the same coordinates; other probe types with only a
    /// shank map give `None`.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] naming the file if a map is malformed or has a different number of
    /// entries than the stream has neural columns.
    pub fn probe(&self, stream: &Stream) -> Result<Option<Probe>> {
        let neural: Vec<(usize, &str)> = stream
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.kind, super::ColumnKind::Ap | super::ColumnKind::Lf))
            .map(|(i, c)| (i, c.name.as_str()))
            .collect();
        if neural.is_empty() {
            return Ok(None);
        }
        let name = self.get("imDatPrb_pn").unwrap_or_default().to_string();
        let positions = if let Some((header, entries)) = self.table("snsGeomMap")? {
            self.geom_map(header, &entries, neural.len())?
        } else if let Some((header, entries)) = self.table("snsShankMap")? {
            let Some(pitch) = Pitch::of(stream.probe_type.unwrap_or(0)) else {
                return Ok(None);
            };
            self.shank_map(header, &entries, neural.len(), pitch)?
        } else {
            return Ok(None);
        };
        let contacts = neural
            .iter()
            .zip(positions)
            .map(|(&(column, channel_name), (shank, position))| Contact {
                id: channel_name.to_string(),
                position,
                shank,
                device_channel: Some(column),
            })
            .collect();
        Probe::from_file(self.path(), name, contacts).map(Some)
    }

    /// `(shank, [x, z])` of each entry of `~snsGeomMap`.
    fn geom_map(
        &self,
        header: &str,
        entries: &[&str],
        expected: usize,
    ) -> Result<Vec<(u32, [f64; 2])>> {
        let fields: Vec<&str> = header.split(',').map(str::trim).collect();
        let (shanks, spacing) = match fields.as_slice() {
            [_, shanks, spacing, _] => (shanks.parse::<u32>().ok(), spacing.parse::<f64>().ok()),
            _ => (None, None),
        };
        let (Some(shanks), Some(spacing)) = (shanks, spacing.filter(|s| s.is_finite())) else {
            return Err(Error::invalid(
                self.path(),
                format!(
                    "`~snsGeomMap` header `({})` is not `(partNumber,nShanks,shankSpacing,\
                     shankWidth)`",
                    clip(header)
                ),
            ));
        };
        self.map_entries("snsGeomMap", entries, expected, shanks, |s, x, z| {
            [f64::from(s) * spacing + x, z]
        })
    }

    /// `(shank, [x, z])` of each entry of `~snsShankMap`, with the probe's pitch.
    fn shank_map(
        &self,
        header: &str,
        entries: &[&str],
        expected: usize,
        pitch: Pitch,
    ) -> Result<Vec<(u32, [f64; 2])>> {
        let shanks = header
            .split(',')
            .next()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .ok_or_else(|| {
                Error::invalid(
                    self.path(),
                    format!(
                        "`~snsShankMap` header `({})` is not `(nShanks,nCols,nRows)`",
                        clip(header)
                    ),
                )
            })?;
        self.map_entries("snsShankMap", entries, expected, shanks, |s, col, row| {
            let stagger = if pitch.stagger && row % 2.0 == 1.0 {
                -16.0
            } else {
                0.0
            };
            [
                f64::from(s) * pitch.shank + pitch.x0 + stagger + col * pitch.column,
                row * pitch.row,
            ]
        })
    }

    /// Parses `s:a:b:used` entries (`expected` of them, shank below `shanks`) into
    /// `(shank, position(s, a, b))`.
    fn map_entries(
        &self,
        key: &str,
        entries: &[&str],
        expected: usize,
        shanks: u32,
        position: impl Fn(u32, f64, f64) -> [f64; 2],
    ) -> Result<Vec<(u32, [f64; 2])>> {
        if entries.len() != expected {
            return Err(Error::invalid(
                self.path(),
                format!(
                    "`~{key}` has {} entries for {expected} saved neural channels",
                    entries.len()
                ),
            ));
        }
        entries
            .iter()
            .map(|entry| {
                let fields: Vec<&str> = entry.split(':').map(str::trim).collect();
                let parsed = match fields.as_slice() {
                    [s, a, b, _used] => s
                        .parse::<u32>()
                        .ok()
                        .filter(|&s| s < shanks)
                        .zip(a.parse::<f64>().ok().filter(|v| v.is_finite()))
                        .zip(b.parse::<f64>().ok().filter(|v| v.is_finite())),
                    _ => None,
                };
                let ((s, a), b) = parsed.ok_or_else(|| {
                    Error::invalid(
                        self.path(),
                        format!(
                            "`~{key}` entry `({})` is not `shank:x:z:used` with a shank below \
                             {shanks}",
                            clip(entry)
                        ),
                    )
                })?;
                Ok((s, position(s, a, b)))
            })
            .collect()
    }
}

/// Electrode pitch of a probe family, in SpikeGLX's coordinates (µm).
#[derive(Debug, Clone, Copy)]
struct Pitch {
    /// x of column 0 (even rows).
    x0: f64,
    /// Between columns.
    column: f64,
    /// Between rows.
    row: f64,
    /// Between shanks.
    shank: f64,
    /// Whether odd rows sit 16 µm to the left (Neuropixels 1.0 checkerboard).
    stagger: bool,
}

impl Pitch {
    /// The pitch of probe type `probe_type`, for the types whose layout is known.
    fn of(probe_type: u32) -> Option<Self> {
        match probe_type {
            0 => Some(Self {
                x0: 27.0,
                column: 32.0,
                row: 20.0,
                shank: 0.0,
                stagger: true,
            }),
            21 | 24 | 2003 | 2004 | 2013 | 2014 => Some(Self {
                x0: 27.0,
                column: 32.0,
                row: 15.0,
                shank: 250.0,
                stagger: false,
            }),
            _ => None,
        }
    }
}
