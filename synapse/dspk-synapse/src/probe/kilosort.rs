//! Kilosort's channel maps: the Kilosort 4 probe JSON (`kilosort.io.save_probe` /
//! `load_probe`) and the Kilosort 1-3 `chanMap.mat` (as `createChannelMapFile.m` saves it).
//!
//! Both describe one probe as parallel per-site vectors: site `i` sits at `(xc[i], yc[i])` µm on
//! shank/group `kcoords[i]` and reads recording channel `chanMap[i]`.

use std::path::Path;

use serde_json::{Map, Value};

use super::mat::{MatValue, MatVariable, read_mat};
use super::{Contact, Probe};
use crate::{Error, Result};

/// Reads a Kilosort 4 probe JSON (`{"chanMap", "xc", "yc", "kcoords", "n_chan"}`, what
/// `kilosort.io.save_probe` writes and `load_probe` reads) into a [`Probe`].
///
/// Contact `i` is at `(xc[i], yc[i])` µm, reads recording channel `chanMap[i]` (0-based) and is
/// on shank `kcoords[i]` (0 for every contact if `kcoords` is absent, as Kilosort 4 defaults
/// it). Contact ids are empty and the name is empty (the file has neither). `chanMap`, `xc`
/// and `yc` are required, as in `load_probe`; `n_chan` is required and must be at least the
/// number of sites (Kilosort 4 sets it to the number of channels of the map, connected or not);
/// other keys are ignored.
///
/// # Errors
///
/// I/O and JSON errors; [`dspk_io::Error::Invalid`] for a missing key, a value of the wrong type, a
/// negative or fractional channel or shank, vectors of different lengths, a channel used twice;
/// all naming the file.
pub fn read_kilosort_json(path: &Path) -> Result<Probe> {
    let bytes = dspk_io::read_small_file(path, dspk_io::METADATA_LIMIT)?;
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| json_error(path, e))?;
    let Value::Object(map) = &root else {
        return Err(Error::invalid(
            path,
            "the Kilosort probe JSON is not an object",
        ));
    };
    let channels =
        json_vector(map, "chanMap", path)?.ok_or_else(|| Error::invalid(path, "no \"chanMap\""))?;
    let xc = json_vector(map, "xc", path)?.ok_or_else(|| Error::invalid(path, "no \"xc\""))?;
    let yc = json_vector(map, "yc", path)?.ok_or_else(|| Error::invalid(path, "no \"yc\""))?;
    let kcoords = json_vector(map, "kcoords", path)?;
    let n_chan = map
        .get("n_chan")
        .ok_or_else(|| Error::invalid(path, "no \"n_chan\""))?;
    let n_chan = n_chan
        .as_f64()
        .and_then(whole)
        .ok_or_else(|| Error::invalid(path, format!("\"n_chan\" is {n_chan}, not a count")))?;
    let n = channels.len();
    check_lengths(
        path,
        n,
        &[("xc", xc.len()), ("yc", yc.len())],
        kcoords.as_ref().map(|k| ("kcoords", k.len())),
    )?;
    if n_chan < n {
        return Err(Error::invalid(
            path,
            format!("\"n_chan\" is {n_chan} but \"chanMap\" has {n} sites"),
        ));
    }
    let mut contacts = Vec::with_capacity(n);
    for i in 0..n {
        let channel = whole(channels[i]).ok_or_else(|| {
            Error::invalid(
                path,
                format!("\"chanMap\"[{i}] is {}, not a channel index", channels[i]),
            )
        })?;
        let shank = match &kcoords {
            Some(k) => shank_of(k[i], path, "\"kcoords\"", i)?,
            None => 0,
        };
        contacts.push(Contact {
            id: String::new(),
            position: [xc[i], yc[i]],
            shank,
            device_channel: Some(channel),
        });
    }
    Probe::from_file(path, "", contacts)
}

/// Writes `probe` as a Kilosort 4 probe JSON that `kilosort.io.load_probe` reads: `chanMap`
/// (0-based ints), `xc`, `yc`, `kcoords` (floats: the shank) and `n_chan` (the number of
/// sites), the keys and types `save_probe` writes.
///
/// Only connected contacts (with a device channel) are written, in contact order: Kilosort
/// has no place for a site that reads no channel (as `load_probe` drops `.mat` sites with
/// `connected = false`). [`read_kilosort_json`] of the file gives back the connected contacts
/// with empty ids and an empty name.
///
/// # Errors
///
/// [`Error::Argument`] if no contact is connected; I/O errors writing the file.
pub fn write_kilosort_json(path: &Path, probe: &Probe) -> Result<()> {
    let connected: Vec<&Contact> = probe
        .contacts()
        .iter()
        .filter(|c| c.device_channel.is_some())
        .collect();
    if connected.is_empty() {
        return Err(Error::Argument(format!(
            "probe `{}` has no connected contact to write as a Kilosort channel map",
            probe.name
        )));
    }
    let mut map = Map::new();
    let ints =
        |f: fn(&Contact) -> usize| Value::from(connected.iter().map(|c| f(c)).collect::<Vec<_>>());
    let floats =
        |f: fn(&Contact) -> f64| Value::from(connected.iter().map(|c| f(c)).collect::<Vec<_>>());
    map.insert(
        "chanMap".into(),
        ints(|c| c.device_channel.unwrap_or_default()),
    );
    map.insert("xc".into(), floats(|c| c.position[0]));
    map.insert("yc".into(), floats(|c| c.position[1]));
    map.insert("kcoords".into(), floats(|c| f64::from(c.shank)));
    map.insert("n_chan".into(), Value::from(connected.len()));
    write_json(path, &Value::Object(map))
}

/// Reads a Kilosort 1-3 channel map `.mat` (MATLAB Level 5 MAT-file, as
/// `createChannelMapFile.m` saves it, plain or compressed) into a [`Probe`].
///
/// Variables: `chanMap` (1-based recording channel of each site, required), `xcoords`,
/// `ycoords` (µm, required), `kcoords` (group of each site, optional), `connected` (logical,
/// optional: all connected if absent), `chanMap0ind` (optional; must equal `chanMap - 1`),
/// `name` (optional char: the probe's name); `fs` and other variables are ignored. All are
/// vectors of one length.
///
/// Site `i` becomes contact `i` at `(xcoords[i], ycoords[i])` with an empty id. Its device
/// channel is `chanMap[i] - 1`, or `None` where `connected[i]` is false: Kilosort leaves those
/// channels out of sorting (`load_probe` drops them), and a `None` channel keeps them out of
/// [`Probe::connected_by_channel`] likewise. Shanks: MATLAB maps number groups from 1
/// (`createChannelMapFile.m` writes `kcoords = ones(..)`), so `kcoords` 1, 2, ... become
/// shanks 0, 1, ...; a file whose `kcoords` include 0 is taken as numbered from 0 and kept.
///
/// # Errors
///
/// I/O errors; the MAT-file's errors ([`dspk_io::Error::Truncated`], [`dspk_io::Error::Invalid`],
/// [`dspk_io::Error::Unsupported`] for v7.3/v4 files or a needed variable that is a cell or struct);
/// [`dspk_io::Error::Missing`] for a missing required variable; [`dspk_io::Error::Invalid`] for values that are
/// not whole channel numbers, vectors of different lengths, or a `chanMap0ind` that disagrees.
pub fn read_kilosort_mat(path: &Path) -> Result<Probe> {
    let bytes = dspk_io::read_small_file(path, dspk_io::METADATA_LIMIT)?;
    parse_kilosort_mat(&bytes, path)
}

/// Parses the bytes of a Kilosort channel map `.mat` as [`read_kilosort_mat`] does; errors name
/// `path`.
///
/// # Errors
///
/// As [`read_kilosort_mat`].
pub fn parse_kilosort_mat(bytes: &[u8], path: &Path) -> Result<Probe> {
    let variables = read_mat(bytes, path)?;
    let find = |name: &str| variables.iter().rev().find(|v| v.name == name);
    let vector = |name: &str| -> Result<Option<&[f64]>> {
        find(name).map(|v| mat_vector(v, path)).transpose()
    };
    let required = |name: &str| -> Result<&[f64]> {
        vector(name)?.ok_or_else(|| Error::missing(path, format!("variable `{name}`")))
    };
    let chan_map = required("chanMap")?;
    let xcoords = required("xcoords")?;
    let ycoords = required("ycoords")?;
    let kcoords = vector("kcoords")?;
    let connected = vector("connected")?;
    let zero_based = vector("chanMap0ind")?;
    let n = chan_map.len();
    check_lengths(
        path,
        n,
        &[("xcoords", xcoords.len()), ("ycoords", ycoords.len())],
        kcoords.map(|k| ("kcoords", k.len())),
    )?;
    check_lengths(path, n, &[], connected.map(|c| ("connected", c.len())))?;
    check_lengths(path, n, &[], zero_based.map(|z| ("chanMap0ind", z.len())))?;
    let name = match find("name") {
        Some(MatVariable {
            value: MatValue::Char(text),
            ..
        }) => text.trim_end_matches('\0').to_string(),
        Some(other) => {
            return Err(Error::invalid(
                path,
                format!(
                    "variable `name` is {}, expected text",
                    describe(&other.value)
                ),
            ));
        }
        None => String::new(),
    };
    let from_zero = kcoords.is_some_and(|k| k.contains(&0.0));
    let mut contacts = Vec::with_capacity(n);
    for i in 0..n {
        let channel = whole(chan_map[i]).filter(|&c| c >= 1).ok_or_else(|| {
            Error::invalid(
                path,
                format!(
                    "chanMap({}) is {}, not a 1-based channel",
                    i + 1,
                    chan_map[i]
                ),
            )
        })? - 1;
        if let Some(z) = zero_based
            && z[i] != channel as f64
        {
            return Err(Error::invalid(
                path,
                format!(
                    "chanMap0ind({}) is {} but chanMap({}) is {}",
                    i + 1,
                    z[i],
                    i + 1,
                    chan_map[i]
                ),
            ));
        }
        let shank = match kcoords {
            Some(k) => {
                let group = shank_of(k[i], path, "kcoords", i)?;
                if from_zero { group } else { group - 1 }
            }
            None => 0,
        };
        let is_connected = connected.is_none_or(|c| c[i] != 0.0);
        contacts.push(Contact {
            id: String::new(),
            position: [xcoords[i], ycoords[i]],
            shank,
            device_channel: is_connected.then_some(channel),
        });
    }
    Probe::from_file(path, name, contacts)
}

/// The values of a MAT variable that must be a numeric or logical vector (or scalar).
fn mat_vector<'a>(variable: &'a MatVariable, path: &Path) -> Result<&'a [f64]> {
    let name = &variable.name;
    match &variable.value {
        MatValue::Numeric { values, .. } => {
            if variable.dims.iter().filter(|&&d| d != 1).count() > 1 {
                return Err(Error::invalid(
                    path,
                    format!(
                        "variable `{name}` is a {:?} array, expected a vector",
                        variable.dims
                    ),
                ));
            }
            Ok(values)
        }
        MatValue::Unsupported(kind) => Err(Error::unsupported(
            path,
            format!("variable `{name}` is {kind}, expected a numeric vector"),
        )),
        MatValue::Char(_) => Err(Error::invalid(
            path,
            format!("variable `{name}` is text, expected a numeric vector"),
        )),
    }
}

/// What a MAT value is, for messages.
fn describe(value: &MatValue) -> &'static str {
    match value {
        MatValue::Numeric { logical: true, .. } => "a logical array",
        MatValue::Numeric { .. } => "a numeric array",
        MatValue::Char(_) => "text",
        MatValue::Unsupported(kind) => kind,
    }
}

/// `v` as a non-negative whole number that fits a channel index (below 2^53 and `usize`).
fn whole(v: f64) -> Option<usize> {
    (v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 9_007_199_254_740_992.0)
        .then(|| usize::try_from(v as u64).ok())
        .flatten()
}

/// A shank number from a `kcoords` value.
fn shank_of(v: f64, path: &Path, what: &str, i: usize) -> Result<u32> {
    whole(v).and_then(|s| u32::try_from(s).ok()).ok_or_else(|| {
        Error::invalid(
            path,
            format!("{what} entry {i} is {v}, not a whole shank number"),
        )
    })
}

/// Checks that every named vector has `n` entries (the length of the channel map).
fn check_lengths(
    path: &Path,
    n: usize,
    lengths: &[(&str, usize)],
    optional: Option<(&str, usize)>,
) -> Result<()> {
    for &(name, len) in lengths.iter().chain(optional.iter()) {
        if len != n {
            return Err(Error::invalid(
                path,
                format!("the channel map has {n} sites but {name} has {len} values"),
            ));
        }
    }
    Ok(())
}

/// A JSON array of numbers under `key`, `None` if the key is absent.
fn json_vector(map: &Map<String, Value>, key: &str, path: &Path) -> Result<Option<Vec<f64>>> {
    let Some(value) = map.get(key) else {
        return Ok(None);
    };
    let Value::Array(items) = value else {
        return Err(Error::invalid(
            path,
            format!("\"{key}\" is not an array of numbers"),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_f64().ok_or_else(|| {
                Error::invalid(path, format!("\"{key}\"[{i}] is {item}, not a number"))
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// A JSON parse error as [`dspk_io::Error::Json`] for `path`.
pub(super) fn json_error(path: &Path, error: serde_json::Error) -> Error {
    Error::Io(dspk_io::Error::Json {
        path: path.to_path_buf(),
        source: std::sync::Arc::new(error),
    })
}

/// Writes `value` as pretty JSON to `path`.
pub(super) fn write_json(path: &Path, value: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| json_error(path, e))?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| {
        Error::Io(dspk_io::Error::Io {
            path: path.to_path_buf(),
            operation: "write".into(),
            source: std::sync::Arc::new(e),
        })
    })
}
