//! `.prb` probe files: Python source holding plain literals, as klusta, spyking-circus,
//! Kilosort 4 and probeinterface's `read_prb` read them.
//!
//! A `.prb` is Python code that those tools `exec`. This module does **not** run Python: it
//! parses the literal subset that real `.prb` files use (the crate's one Python-literal
//! parser, shared with Phy's `params.py`) and refuses everything else with an error naming
//! the construct, its line and its column:
//!
//! - statements `name = value`, one per line or separated by `;`, comments `#`, and line
//!   continuations (inside brackets or after `\`);
//! - values: integers, floats, strings as Python reads them (`'..'`, `".."`, `r'..'`, escapes,
//!   adjacent strings concatenated), `True`, `False`, `None`, lists, tuples, dicts, a leading
//!   `-`/`+` on numbers, and `range(..)` / `list(range(..))` with integer arguments (the one
//!   call real files use);
//! - limits: the file is at most [`PRB_SIZE_LIMIT`] bytes, brackets nest at most
//!   [`PRB_DEPTH_LIMIT`] deep, `range` calls yield at most [`PRB_RANGE_LIMIT`] integers in
//!   all and the file holds at most twice that many values, so a hostile file costs bounded
//!   time and memory.
//!
//! `np.int64(0)`-style reprs (what probeinterface 0.4's `write_prb` writes under numpy 2), names
//! of earlier variables, imports and other expressions are [`dspk_io::Error::Unsupported`]; syntax errors
//! are [`dspk_io::Error::Invalid`]. Both name the file, the line and the column.
//!
//! The top-level `channel_groups` (matched case-insensitively, as probeinterface does) maps a
//! group key to `{'channels': [...], 'geometry': {channel: (x, y)}, ...}`; other keys (`graph`,
//! `label`) and other top-level assignments (`total_nb_channels`, `radius`) are parsed and
//! ignored.

use std::collections::HashMap;
use std::path::Path;

use super::{Contact, Probe};
use crate::pyliteral::{self, HashKey, Limits, LiteralError, Problem, PyValue, Value};
use crate::{Error, Result};

/// The largest `.prb` file read: 4 MiB (a 1024-channel file is about 50 kB).
pub const PRB_SIZE_LIMIT: u64 = 4 << 20;

/// The deepest nesting of brackets accepted in a `.prb` file.
pub const PRB_DEPTH_LIMIT: usize = 32;

/// The most integers all `range(..)` calls of one `.prb` file may produce together.
pub const PRB_RANGE_LIMIT: u64 = 1 << 20;

/// The bounds of the literal parser for a `.prb` file.
const PRB_LIMITS: Limits = Limits {
    max_bytes: PRB_SIZE_LIMIT as usize,
    max_depth: PRB_DEPTH_LIMIT,
    max_values: 2 * PRB_RANGE_LIMIT as usize,
    range_budget: Some(PRB_RANGE_LIMIT),
};

/// Reads a `.prb` file: one [`Probe`] per entry of `channel_groups`, in the file's order, as
/// probeinterface's `read_prb` builds a `ProbeGroup`.
///
/// Each contact is one entry of the group's `channels` list, in that order: its device channel
/// is the entry, its position `geometry[entry]` (µm), its id the channel number written in
/// decimal. The probe's name is the group key (`"0"`, or the string key). The shank of every
/// contact of a group is the group's index in the file (0 for the first group): a `.prb` has
/// no shanks of its own, and numbering groups keeps them apart when the probes' contacts are
/// put together (Kilosort 4's `load_probe` likewise makes the group its `kcoords`).
///
/// # Errors
///
/// I/O errors; [`dspk_io::Error::Invalid`] for syntax errors, a missing `channel_groups`, `channels` or
/// `geometry`, a channel without a position, a negative channel, or a channel in two groups;
/// [`dspk_io::Error::Unsupported`] for anything that is not a plain literal (see the module doc), each
/// naming the file (and the line where there is one).
pub fn read_prb(path: &Path) -> Result<Vec<Probe>> {
    let bytes = dspk_io::read_small_file(path, PRB_SIZE_LIMIT)?;
    parse_prb(&bytes, path)
}

/// Parses the bytes of a `.prb` file as [`read_prb`] does; errors name `path`.
///
/// # Errors
///
/// As [`read_prb`], plus [`dspk_io::Error::Invalid`] if `bytes` is longer than [`PRB_SIZE_LIMIT`].
pub fn parse_prb(bytes: &[u8], path: &Path) -> Result<Vec<Probe>> {
    let error = |e: LiteralError| {
        let message = match e.problem {
            Problem::Invalid => e.to_string(),
            Problem::Unsupported => format!(
                "{e}; a .prb file is read as plain Python literals (numbers, strings, lists, \
                 tuples, dicts, True/False/None, range()), not executed"
            ),
        };
        e.into_error(path, message)
    };
    let text = pyliteral::decode(bytes, &PRB_LIMITS).map_err(error)?;
    let groups = pyliteral::parse(text, &PRB_LIMITS)
        .map_err(error)?
        .into_iter()
        .rev()
        .find(|a| a.name.eq_ignore_ascii_case("channel_groups"))
        .map(|a| a.value)
        .ok_or_else(|| Error::invalid(path, "no `channel_groups = {...}` assignment"))?;
    probes_from_groups(&groups, path)
}

/// Builds the probes from the `channel_groups` value.
fn probes_from_groups(groups: &Value, path: &Path) -> Result<Vec<Probe>> {
    let PyValue::Dict(entries) = &groups.kind else {
        return Err(Error::invalid(
            path,
            format!(
                "line {}: `channel_groups` is {}, expected a dict",
                groups.pos.line,
                groups.kind.describe()
            ),
        ));
    };
    if entries.is_empty() {
        return Err(Error::invalid(
            path,
            format!("line {}: `channel_groups` is empty", groups.pos.line),
        ));
    }
    // Device channel -> (group index, group name), to refuse a channel in two groups.
    let mut owner: HashMap<usize, (usize, String)> = HashMap::new();
    let mut probes = Vec::with_capacity(entries.len());
    for (index, (key, group)) in entries.iter().enumerate() {
        let name = match &key.kind {
            PyValue::Str(s) => s.clone(),
            other => other.repr(),
        };
        let shank = u32::try_from(index)
            .map_err(|_| Error::invalid(path, format!("more than {} channel groups", u32::MAX)))?;
        let here = |problem: String| {
            Error::invalid(
                path,
                format!("line {}: channel group {name}: {problem}", group.pos.line),
            )
        };
        let PyValue::Dict(fields) = &group.kind else {
            return Err(here(format!(
                "is {}, expected a dict",
                group.kind.describe()
            )));
        };
        let field = |wanted: &str| {
            fields
                .iter()
                .rev()
                .find(|(k, _)| matches!(&k.kind, PyValue::Str(s) if s == wanted))
                .map(|(_, v)| v)
        };
        let channels_node = field("channels").ok_or_else(|| here("no 'channels'".into()))?;
        let geometry_node = field("geometry").ok_or_else(|| here("no 'geometry'".into()))?;
        let (PyValue::List(items) | PyValue::Tuple(items)) = &channels_node.kind else {
            return Err(here(format!(
                "'channels' is {}, expected a list",
                channels_node.kind.describe()
            )));
        };
        let PyValue::Dict(geometry) = &geometry_node.kind else {
            return Err(here(format!(
                "'geometry' is {}, expected a dict",
                geometry_node.kind.describe()
            )));
        };
        let positions: HashMap<HashKey, &Value> = geometry
            .iter()
            .filter_map(|(k, v)| k.kind.hash_key().map(|key| (key, v)))
            .collect();
        let mut contacts = Vec::with_capacity(items.len());
        for item in items {
            let channel = item
                .kind
                .as_int()
                .and_then(|c| usize::try_from(c).ok())
                .ok_or_else(|| {
                    Error::invalid(
                        path,
                        format!(
                            "line {}: channel group {name}: channel {} is not a non-negative integer",
                            item.pos.line,
                            item.kind.repr()
                        ),
                    )
                })?;
            if let Some((other_index, other)) = owner.insert(channel, (index, name.clone()))
                && other_index != index
            {
                return Err(here(format!(
                    "channel {channel} is also in channel group {other}"
                )));
            }
            let position = positions
                .get(&HashKey::Int(channel as i64))
                .ok_or_else(|| here(format!("channel {channel} has no entry in 'geometry'")))?;
            contacts.push(Contact {
                id: channel.to_string(),
                position: position_of(position, channel, path)?,
                shank,
                device_channel: Some(channel),
            });
        }
        probes.push(Probe::from_file(path, name, contacts)?);
    }
    Ok(probes)
}

/// `(x, y)` from a geometry entry.
fn position_of(node: &Value, channel: usize, path: &Path) -> Result<[f64; 2]> {
    let bad = || {
        Error::invalid(
            path,
            format!(
                "line {}: the geometry of channel {channel} is {}, expected (x, y) numbers",
                node.pos.line,
                node.kind.repr()
            ),
        )
    };
    let (PyValue::List(xy) | PyValue::Tuple(xy)) = &node.kind else {
        return Err(bad());
    };
    match xy.as_slice() {
        [x, y] => Ok([
            x.kind.as_number().ok_or_else(bad)?,
            y.kind.as_number().ok_or_else(bad)?,
        ]),
        _ => Err(bad()),
    }
}
