//! What each saved column of a SpikeGLX stream is, and its gain, from the `.meta` alone.

use dspk_core::{ChannelInfo, SampleRate};

use super::meta::{MAX_CHANNELS, Meta, clip};
use crate::{Error, Result};

/// The acquisition a SpikeGLX file comes from (`typeThis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// An imec probe stream (`*.imecN.ap.bin` / `*.imecN.lf.bin`): AP, LF and SY channels.
    Imec,
    /// The NI-DAQ stream (`*.nidq.bin`): MN, MA, XA and XD channels.
    Nidq,
}

/// What one saved column holds (the SpikeGLX channel types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnKind {
    /// A Neuropixels action-potential band channel (µV).
    Ap,
    /// A Neuropixels local-field band channel (µV).
    Lf,
    /// The imec sync/status word `SY0` (a bit field, not an electrode).
    Sync,
    /// An NI multiplexed neural channel (µV).
    MultiplexedNeural,
    /// An NI multiplexed auxiliary analog channel (V).
    MultiplexedAnalog,
    /// An NI non-multiplexed auxiliary analog channel (V).
    Analog,
    /// An NI digital word of 16 lines.
    Digital,
}

impl ColumnKind {
    /// Whether the column holds an analog signal (everything but `SY` and `XD` words).
    #[must_use]
    pub fn is_analog(self) -> bool {
        !matches!(self, Self::Sync | Self::Digital)
    }

    /// Whether the column is an electrode of the probe (AP, LF, MN).
    #[must_use]
    pub fn is_neural(self) -> bool {
        matches!(self, Self::Ap | Self::Lf | Self::MultiplexedNeural)
    }

    /// The SpikeGLX name prefix (`"AP"`, `"LF"`, `"SY"`, `"MN"`, `"MA"`, `"XA"`, `"XD"`).
    #[must_use]
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Ap => "AP",
            Self::Lf => "LF",
            Self::Sync => "SY",
            Self::MultiplexedNeural => "MN",
            Self::MultiplexedAnalog => "MA",
            Self::Analog => "XA",
            Self::Digital => "XD",
        }
    }
}

/// One saved column of a SpikeGLX `.bin`.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The channel's name (`"AP12"`), from `~snsChanMap` or built from its type and index.
    pub name: String,
    /// What the column holds.
    pub kind: ColumnKind,
    /// The channel's index among all acquired channels (`snsSaveChanSubset`).
    pub acquisition_channel: usize,
    /// Physical value per stored unit: µV for AP/LF/MN, V for MA/XA, 1 for SY/XD words.
    pub gain: f64,
    /// The unit of `stored * gain`: `"uV"`, `"V"`, or `""` for words.
    pub unit: &'static str,
}

/// The layout of a SpikeGLX stream, derived from its `.meta` only: the saved columns in file
/// order (analog columns first, then SY/XD words), the rate, and the sizes the metadata states.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// Imec or NI-DAQ.
    pub kind: StreamKind,
    /// Samples per second (`imSampRate` / `niSampRate`, exact decimal).
    pub sample_rate: SampleRate,
    /// Every saved column, in file order (`nSavedChans` of them).
    pub columns: Vec<Column>,
    /// The Neuropixels probe type (`imDatPrb_type`; 0 when absent, as in 3A/3B metadata);
    /// `None` for NI-DAQ streams.
    pub probe_type: Option<u32>,
    /// `fileSizeBytes`, the length the `.bin` must have, if given.
    pub file_size_bytes: Option<u64>,
    /// `firstSample`: the index of the file's first sample in the run (0 if absent).
    pub first_sample: u64,
}

impl Stream {
    /// The number of analog columns; they come first in the file.
    #[must_use]
    pub fn num_analog(&self) -> usize {
        self.columns.iter().filter(|c| c.kind.is_analog()).count()
    }

    /// The analog columns as recording channels (`stored * gain` in their unit, no offset).
    #[must_use]
    pub fn analog_channels(&self) -> Vec<ChannelInfo> {
        self.columns
            .iter()
            .filter(|c| c.kind.is_analog())
            .map(|c| ChannelInfo::new(c.name.clone(), c.gain, 0.0, c.unit))
            .collect()
    }

    /// Bytes per sample of all saved columns (int16 each).
    #[must_use]
    pub fn frame_bytes(&self) -> u64 {
        self.columns.len() as u64 * 2
    }
}

/// Probe types whose `~imroTbl` entries are `(channel bank reference apGain lfGain apFilter)`
/// (Neuropixels 1.0 and the probes built like it: NHP, UHD, opto).
const NP1_TYPES: [u32; 14] = [
    0, 1015, 1016, 1022, 1030, 1031, 1032, 1100, 1120, 1121, 1122, 1123, 1200, 1300,
];

/// Probe types with one fixed gain (Neuropixels 2.0 single- and four-shank, quad-base):
/// `imChan0apGain` (80 in metadata that omits it), `imMaxInt` 8192, `imAiRangeMax` 0.5.
const NP2_TYPES: [u32; 7] = [21, 24, 2003, 2004, 2013, 2014, 2020];

impl Meta {
    /// The stream this metadata describes: its kind, rate, and every saved column with its
    /// name, type, acquisition channel and gain.
    ///
    /// Gains follow the SpikeGLX metadata guide: imec `µV = AiRangeMax / MaxInt / gain * 1e6`
    /// with the gain of the column's ACQUISITION channel (from `snsSaveChanSubset`) in
    /// `~imroTbl` (Neuropixels 1.0 family: field 3 for AP, 4 for LF) or the probe's fixed gain
    /// (Neuropixels 2.0: `imChan0apGain`, default 80); NI-DAQ
    /// `V = niAiRangeMax / niMaxInt / gain` with `niMNGain` (MN, reported in µV), `niMAGain`
    /// (MA) or 1 (XA). SpikeInterface (through neo 0.14) indexes `~imroTbl` by saved position
    /// instead, which gives wrong gains when the saved channels are not `0..n`.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] for a missing or malformed key, counts that disagree
    /// (`nSavedChans`, `snsSaveChanSubset`, `snsApLfSy`, `~snsChanMap`), or a gain table too
    /// short; [`dspk_io::Error::Unsupported`] for an unknown `typeThis` or probe type (named).
    pub fn stream(&self) -> Result<Stream> {
        let path = self.path();
        let kind = match self.get("typeThis") {
            Some("imec") => StreamKind::Imec,
            Some("nidq") => StreamKind::Nidq,
            Some(other) => {
                return Err(Error::unsupported(
                    path,
                    format!("SpikeGLX stream type `typeThis={}`", clip(other)),
                ));
            }
            None if self.get("imSampRate").is_some() => StreamKind::Imec,
            None if self.get("niSampRate").is_some() => StreamKind::Nidq,
            None => {
                return Err(Error::invalid(
                    path,
                    "neither `typeThis` nor a sample rate (`imSampRate`/`niSampRate`) is given",
                ));
            }
        };
        let saved: usize = self.required("nSavedChans")?;
        if saved == 0 || saved > MAX_CHANNELS {
            return Err(Error::invalid(
                path,
                format!("`nSavedChans={saved}` must be between 1 and {MAX_CHANNELS}"),
            ));
        }
        let (rate_key, acq_key, sns_key, kinds): (_, _, _, &[ColumnKind]) = match kind {
            StreamKind::Imec => (
                "imSampRate",
                "acqApLfSy",
                "snsApLfSy",
                &[ColumnKind::Ap, ColumnKind::Lf, ColumnKind::Sync],
            ),
            StreamKind::Nidq => (
                "niSampRate",
                "acqMnMaXaDw",
                "snsMnMaXaDw",
                &[
                    ColumnKind::MultiplexedNeural,
                    ColumnKind::MultiplexedAnalog,
                    ColumnKind::Analog,
                    ColumnKind::Digital,
                ],
            ),
        };
        let sample_rate: SampleRate = self.required(rate_key)?;
        let acquired = self.counts(acq_key, kinds.len())?;
        let channels = self.saved_channels(acquired.iter().sum(), saved)?;

        // The type of each saved column, and its index within that type.
        // (`saved_channels` keeps every channel below the acquired total, so each has a type.)
        let typed: Vec<(ColumnKind, usize)> = channels
            .iter()
            .filter_map(|&a| {
                let mut first = 0;
                kinds.iter().zip(&acquired).find_map(|(&k, &count)| {
                    first += count;
                    (a < first).then(|| (k, a + count - first))
                })
            })
            .collect();
        if self.get(sns_key).is_some() {
            let stated = self.counts(sns_key, kinds.len())?;
            let actual: Vec<usize> = kinds
                .iter()
                .map(|k| typed.iter().filter(|(t, _)| t == k).count())
                .collect();
            if stated != actual {
                return Err(Error::invalid(
                    path,
                    format!(
                        "`{sns_key}` says {stated:?} saved channels per type, \
                         `snsSaveChanSubset` gives {actual:?}"
                    ),
                ));
            }
        }
        let names = self.channel_names(&channels)?;

        let probe_type = match kind {
            StreamKind::Imec => Some(self.parsed::<u32>("imDatPrb_type")?.unwrap_or(0)),
            StreamKind::Nidq => None,
        };
        let gains = match kind {
            StreamKind::Imec => self.imec_gains(probe_type.unwrap_or(0), &typed)?,
            StreamKind::Nidq => self.nidq_gains(&typed)?,
        };
        let columns = typed
            .iter()
            .zip(channels)
            .zip(gains)
            .enumerate()
            .map(|(i, (((kind, index), acquisition), (gain, unit)))| Column {
                name: names
                    .as_ref()
                    .map_or_else(|| format!("{}{index}", kind.prefix()), |n| n[i].clone()),
                kind: *kind,
                acquisition_channel: acquisition,
                gain,
                unit,
            })
            .collect();
        Ok(Stream {
            kind,
            sample_rate,
            columns,
            probe_type,
            file_size_bytes: self.parsed("fileSizeBytes")?,
            first_sample: self.parsed("firstSample")?.unwrap_or(0),
        })
    }

    /// The names in `~snsChanMap` (`(AP3;3:3)`: name `AP3`, acquisition channel 3), one per
    /// saved channel, checked against the saved acquisition channels; `None` without the map.
    fn channel_names(&self, channels: &[usize]) -> Result<Option<Vec<String>>> {
        let Some((_, entries)) = self.table("snsChanMap")? else {
            return Ok(None);
        };
        if entries.len() != channels.len() {
            return Err(Error::invalid(
                self.path(),
                format!(
                    "`~snsChanMap` has {} entries for {} saved channels",
                    entries.len(),
                    channels.len()
                ),
            ));
        }
        entries
            .iter()
            .zip(channels)
            .map(|(entry, &channel)| {
                let label = entry.split(':').next().unwrap_or_default();
                let (name, acquisition) = match label.split_once(';') {
                    Some((name, acq)) => (name.trim(), Some(acq.trim())),
                    None => (label.trim(), None),
                };
                if let Some(acq) = acquisition
                    && acq.parse::<usize>().ok() != Some(channel)
                {
                    return Err(Error::invalid(
                        self.path(),
                        format!(
                            "`~snsChanMap` entry `{}` names acquisition channel `{acq}`, \
                             `snsSaveChanSubset` says {channel}",
                            clip(entry)
                        ),
                    ));
                }
                Ok(name.to_string())
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// `(gain, unit)` of each imec column (`typed`: type and index within the type).
    fn imec_gains(
        &self,
        probe_type: u32,
        typed: &[(ColumnKind, usize)],
    ) -> Result<Vec<(f64, &'static str)>> {
        let path = self.path();
        let np1 = NP1_TYPES.contains(&probe_type);
        if !np1 && !NP2_TYPES.contains(&probe_type) {
            return Err(Error::unsupported(
                path,
                format!(
                    "Neuropixels probe type `imDatPrb_type={probe_type}` (part number `{}`): \
                     its gain table layout is not known",
                    clip(self.get("imDatPrb_pn").unwrap_or("?"))
                ),
            ));
        }
        let (default_max, default_range) = if np1 { (512.0, 0.6) } else { (8192.0, 0.5) };
        let max_int = self.positive("imMaxInt")?.unwrap_or(default_max);
        let range = self.positive("imAiRangeMax")?.unwrap_or(default_range);
        let to_uv = |gain: f64| range / max_int / gain * 1e6;

        if !np1 {
            let ap = self.positive("imChan0apGain")?.unwrap_or(80.0);
            let lf = self.positive("imChan0lfGain")?;
            return typed
                .iter()
                .map(|&(kind, _)| match kind {
                    ColumnKind::Ap => Ok((to_uv(ap), "uV")),
                    ColumnKind::Lf => lf.map(|g| (to_uv(g), "uV")).ok_or_else(|| {
                        Error::invalid(
                            path,
                            format!("LF channels of probe type {probe_type} need `imChan0lfGain`"),
                        )
                    }),
                    _ => Ok((1.0, "")),
                })
                .collect();
        }

        let (header, entries) = self
            .table("imroTbl")?
            .ok_or_else(|| Error::invalid(path, "the key `~imroTbl` is missing"))?;
        if let Some(count) = header.rsplit(',').next().map(str::trim)
            && header.contains(',')
            && count.parse::<usize>().ok() != Some(entries.len())
        {
            return Err(Error::invalid(
                path,
                format!(
                    "`~imroTbl` header `({})` disagrees with its {} entries",
                    clip(header),
                    entries.len()
                ),
            ));
        }
        typed
            .iter()
            .map(|&(kind, index)| {
                let field = match kind {
                    ColumnKind::Ap => 3,
                    ColumnKind::Lf => 4,
                    _ => return Ok((1.0, "")),
                };
                let entry = entries.get(index).ok_or_else(|| {
                    Error::invalid(
                        path,
                        format!(
                            "`~imroTbl` has {} entries, acquisition channel {index} needs one",
                            entries.len()
                        ),
                    )
                })?;
                let fields: Vec<&str> = entry.split_whitespace().collect();
                // 6 fields (3B and later: `... apFilter`), 5 in Phase 3A metadata.
                let gain = ((5..=6).contains(&fields.len())
                    && fields[0].parse::<usize>().ok() == Some(index))
                .then(|| fields[field].parse::<f64>().ok())
                .flatten()
                .filter(|g| g.is_finite() && *g > 0.0)
                .ok_or_else(|| {
                    Error::invalid(
                        path,
                        format!(
                            "`~imroTbl` entry {index} `({})` is not \
                                 `({index} bank reference apGain lfGain [apFilter])` with \
                                 positive gains",
                            clip(entry)
                        ),
                    )
                })?;
                Ok((to_uv(gain), "uV"))
            })
            .collect()
    }

    /// `(gain, unit)` of each NI-DAQ column.
    fn nidq_gains(&self, typed: &[(ColumnKind, usize)]) -> Result<Vec<(f64, &'static str)>> {
        let needs = |k: ColumnKind| typed.iter().any(|&(t, _)| t == k);
        let analog = typed.iter().any(|&(t, _)| t.is_analog());
        let range = if analog {
            self.positive("niAiRangeMax")?
                .ok_or_else(|| Error::invalid(self.path(), "the key `niAiRangeMax` is missing"))?
        } else {
            1.0
        };
        let max_int = self.positive("niMaxInt")?.unwrap_or(32768.0);
        let gain_of = |key: &str, k: ColumnKind| -> Result<f64> {
            if needs(k) {
                self.positive(key)?.ok_or_else(|| {
                    Error::invalid(self.path(), format!("the key `{key}` is missing"))
                })
            } else {
                Ok(1.0)
            }
        };
        let mn = gain_of("niMNGain", ColumnKind::MultiplexedNeural)?;
        let ma = gain_of("niMAGain", ColumnKind::MultiplexedAnalog)?;
        Ok(typed
            .iter()
            .map(|&(kind, _)| match kind {
                ColumnKind::MultiplexedNeural => (range / max_int / mn * 1e6, "uV"),
                ColumnKind::MultiplexedAnalog => (range / max_int / ma, "V"),
                ColumnKind::Analog => (range / max_int, "V"),
                _ => (1.0, ""),
            })
            .collect())
    }
}
