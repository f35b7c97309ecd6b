//! probeinterface's JSON format (`read_probeinterface` / `write_probeinterface`): a
//! `ProbeGroup` as `{"specification": "probeinterface", "version", "probes": [...]}`.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::kilosort::{json_error, write_json};
use super::{Contact, Probe};
use crate::{Error, Result};

/// The contact radius [`write_probeinterface`] writes (µm): probeinterface's own choice for
/// sources without contact shapes (`read_prb` makes 5 µm circles).
pub const WRITTEN_CONTACT_RADIUS_UM: f64 = 5.0;

/// The probeinterface format version [`write_probeinterface`] writes.
const WRITTEN_VERSION: &str = "0.4.2";

/// Reads a probeinterface JSON file (a `ProbeGroup`, as `probeinterface.read_probeinterface`
/// reads it): one [`Probe`] per entry of `probes`, in order.
///
/// Per probe: `ndim` must be 2; `si_units` `"um"` (or `"mm"`, scaled to µm); contact `i` is at
/// `contact_positions[i]`, named `contact_ids[i]` (empty if absent), wired to
/// `device_channel_indices[i]` (`-1` = not connected -> `None`; all `None` if the key is
/// absent, as in probeinterface); the name is `annotations.name`, else
/// `annotations.model_name`, else empty. Shanks: probeinterface stores `shank_ids` as strings;
/// if every id of a probe is a number they are that number, otherwise the distinct ids are
/// numbered 0, 1, ... in order of first appearance; absent or all-empty ids mean shank 0 for
/// every contact (probeinterface also reads all-empty ids as "no shanks"). Shapes, contours,
/// plane axes and annotations are not kept.
///
/// # Errors
///
/// I/O and JSON errors; [`dspk_io::Error::Invalid`] for a file that is not probeinterface JSON, a missing
/// or mistyped key, per-contact arrays whose lengths disagree with `contact_positions`, a
/// device channel below -1, a device channel used twice in the group;
/// [`dspk_io::Error::Unsupported`] for 3-D probes and other units; all naming the file.
pub fn read_probeinterface(path: &Path) -> Result<Vec<Probe>> {
    let bytes = dspk_io::read_small_file(path, dspk_io::METADATA_LIMIT)?;
    let root: Value = serde_json::from_slice(&bytes).map_err(|e| json_error(path, e))?;
    let Value::Object(root) = &root else {
        return Err(Error::invalid(
            path,
            "the probeinterface JSON is not an object",
        ));
    };
    match root.get("specification") {
        Some(Value::String(s)) if s == "probeinterface" => {}
        other => {
            return Err(Error::invalid(
                path,
                format!(
                    "\"specification\" is {}, expected \"probeinterface\"",
                    other.map_or_else(|| "absent".to_string(), Value::to_string)
                ),
            ));
        }
    }
    let Some(Value::Array(entries)) = root.get("probes") else {
        return Err(Error::invalid(path, "no \"probes\" array"));
    };
    if entries.is_empty() {
        return Err(Error::invalid(path, "\"probes\" is empty"));
    }
    let mut owner: HashMap<usize, usize> = HashMap::new();
    let mut probes = Vec::with_capacity(entries.len());
    for (p, entry) in entries.iter().enumerate() {
        let probe = read_probe(entry, p, path)?;
        for contact in probe.contacts() {
            if let Some(channel) = contact.device_channel
                && let Some(other) = owner.insert(channel, p)
                && other != p
            {
                return Err(Error::invalid(
                    path,
                    format!("device channel {channel} is wired in probes {other} and {p}"),
                ));
            }
        }
        probes.push(probe);
    }
    Ok(probes)
}

/// One entry of `probes`.
fn read_probe(entry: &Value, p: usize, path: &Path) -> Result<Probe> {
    let bad = |problem: String| Error::invalid(path, format!("probes[{p}]: {problem}"));
    let Value::Object(probe) = entry else {
        return Err(bad("is not an object".into()));
    };
    match probe.get("ndim").and_then(Value::as_u64) {
        Some(2) => {}
        Some(3) => {
            return Err(Error::unsupported(
                path,
                format!("probes[{p}]: a 3-D probe (ndim 3); contacts are read in the plane"),
            ));
        }
        _ => {
            return Err(bad(format!(
                "\"ndim\" is {}, expected 2",
                show(probe.get("ndim"))
            )));
        }
    }
    let scale = match probe.get("si_units").and_then(Value::as_str) {
        Some("um") => 1.0,
        Some("mm") => 1000.0,
        Some(other) => {
            return Err(Error::unsupported(
                path,
                format!("probes[{p}]: \"si_units\" {other:?} (um and mm are read)"),
            ));
        }
        None => {
            return Err(bad(format!(
                "\"si_units\" is {}",
                show(probe.get("si_units"))
            )));
        }
    };
    let Some(Value::Array(positions)) = probe.get("contact_positions") else {
        return Err(bad("no \"contact_positions\" array".into()));
    };
    let n = positions.len();
    let list = |key: &str| -> Result<Option<&Vec<Value>>> {
        match probe.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) if items.len() == n => Ok(Some(items)),
            Some(Value::Array(items)) => Err(bad(format!(
                "\"{key}\" has {} entries but \"contact_positions\" has {n}",
                items.len()
            ))),
            Some(other) => Err(bad(format!("\"{key}\" is {other}, expected an array"))),
        }
    };
    let ids = list("contact_ids")?;
    let channels = list("device_channel_indices")?;
    let shank_ids = list("shank_ids")?;
    let shanks = shanks(shank_ids, n).map_err(bad)?;

    let mut contacts = Vec::with_capacity(n);
    for (i, position) in positions.iter().enumerate() {
        let xy = position
            .as_array()
            .filter(|xy| xy.len() == 2)
            .and_then(|xy| Some([xy[0].as_f64()?, xy[1].as_f64()?]))
            .ok_or_else(|| {
                bad(format!(
                    "\"contact_positions\"[{i}] is {position}, expected [x, y]"
                ))
            })?;
        let id = match ids.map(|ids| &ids[i]) {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(bad(format!(
                    "\"contact_ids\"[{i}] is {other}, not a string"
                )));
            }
        };
        let device_channel = match channels.map(|c| &c[i]) {
            None => None,
            Some(value) => match value.as_i64() {
                Some(-1) => None,
                Some(c) if c >= 0 => Some(c as usize),
                _ => {
                    return Err(bad(format!(
                        "\"device_channel_indices\"[{i}] is {value}, expected a channel index or \
                         -1"
                    )));
                }
            },
        };
        contacts.push(Contact {
            id,
            position: [xy[0] * scale, xy[1] * scale],
            shank: shanks[i],
            device_channel,
        });
    }
    let annotations = probe.get("annotations").and_then(Value::as_object);
    let name = ["name", "model_name"]
        .iter()
        .find_map(|key| annotations?.get(*key)?.as_str())
        .unwrap_or_default();
    Probe::from_file(path, name, contacts).map_err(|e| match e {
        Error::Io(dspk_io::Error::Invalid { path, problem }) => {
            Error::Io(dspk_io::Error::Invalid {
                path,
                problem: format!("probes[{p}]: {problem}"),
            })
        }
        other => other,
    })
}

/// The shank of each contact from probeinterface's string `shank_ids` (see
/// [`read_probeinterface`]).
fn shanks(ids: Option<&Vec<Value>>, n: usize) -> std::result::Result<Vec<u32>, String> {
    let Some(ids) = ids else {
        return Ok(vec![0; n]);
    };
    let texts = ids
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            // Some writers store numbers; read them as their text.
            Value::Number(num) => Ok(num.to_string()),
            other => Err(format!("\"shank_ids\"[{i}] is {other}, not a string")),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if texts.iter().all(String::is_empty) {
        return Ok(vec![0; n]);
    }
    if let Some(numbers) = texts
        .iter()
        .map(|t| t.parse::<u32>().ok())
        .collect::<Option<Vec<_>>>()
    {
        return Ok(numbers);
    }
    let mut seen: HashMap<&str, u32> = HashMap::new();
    Ok(texts
        .iter()
        .map(|t| {
            let next = seen.len() as u32;
            *seen.entry(t.as_str()).or_insert(next)
        })
        .collect())
}

/// A JSON value or "absent", for messages.
fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "absent".to_string(), Value::to_string)
}

/// Writes `probes` as a probeinterface JSON file (a `ProbeGroup`) that
/// `probeinterface.read_probeinterface` reads and [`read_probeinterface`] reads back equal.
///
/// Every probe gets the keys `Probe.from_dict` requires and the ones `write_probeinterface`
/// writes: `ndim` 2, `si_units` `"um"`, `annotations` (`{"name": ..}` when the probe has a
/// name), `contact_annotations` `{}`, `contact_positions`, `contact_plane_axes` (the plane's
/// axes), `contact_shapes` `"circle"` with `contact_shape_params` radius
/// [`WRITTEN_CONTACT_RADIUS_UM`] (a [`Probe`] keeps no shapes), `device_channel_indices`
/// (`-1` for `None`), `contact_ids`, and `shank_ids` (the shank numbers as strings); the group
/// gets `probe_ids` `"0"`, `"1"`, ... No `probe_planar_contour` is written (it is optional).
///
/// # Errors
///
/// [`Error::Argument`] if `probes` is empty, two probes wire the same device channel, or a
/// probe's contact ids are neither unique nor all empty (probeinterface refuses such groups);
/// I/O errors writing the file.
pub fn write_probeinterface(path: &Path, probes: &[Probe]) -> Result<()> {
    if probes.is_empty() {
        return Err(Error::Argument("no probe to write".into()));
    }
    let mut owner: HashMap<usize, usize> = HashMap::new();
    for (p, probe) in probes.iter().enumerate() {
        let contacts = probe.contacts();
        if !contacts.iter().all(|c| c.id.is_empty()) {
            let mut ids = std::collections::HashSet::new();
            if let Some(c) = contacts.iter().find(|c| !ids.insert(c.id.as_str())) {
                return Err(Error::Argument(format!(
                    "probe {p} (`{}`): contact id {:?} is used twice; probeinterface needs \
                     unique contact ids (or all empty)",
                    probe.name, c.id
                )));
            }
        }
        for channel in probe.contacts().iter().filter_map(|c| c.device_channel) {
            if let Some(other) = owner.insert(channel, p)
                && other != p
            {
                return Err(Error::Argument(format!(
                    "device channel {channel} is wired in probes {other} and {p}"
                )));
            }
        }
    }
    let entries: Vec<Value> = probes.iter().map(probe_json).collect();
    let ids: Vec<String> = (0..probes.len()).map(|p| p.to_string()).collect();
    let root = json!({
        "specification": "probeinterface",
        "version": WRITTEN_VERSION,
        "probes": entries,
        "probe_ids": ids,
    });
    write_json(path, &root)
}

/// One probe's dict.
fn probe_json(probe: &Probe) -> Value {
    let contacts = probe.contacts();
    let mut annotations = Map::new();
    if !probe.name.is_empty() {
        annotations.insert("name".into(), Value::from(probe.name.clone()));
    }
    json!({
        "ndim": 2,
        "si_units": "um",
        "annotations": annotations,
        "contact_annotations": {},
        "contact_positions": contacts.iter().map(|c| c.position.to_vec()).collect::<Vec<_>>(),
        "contact_plane_axes": contacts
            .iter()
            .map(|_| [[1.0, 0.0], [0.0, 1.0]])
            .collect::<Vec<_>>(),
        "contact_shapes": contacts.iter().map(|_| "circle").collect::<Vec<_>>(),
        "contact_shape_params": contacts
            .iter()
            .map(|_| json!({ "radius": WRITTEN_CONTACT_RADIUS_UM }))
            .collect::<Vec<_>>(),
        "device_channel_indices": contacts
            .iter()
            .map(|c| c.device_channel.map_or(-1, |ch| ch as i64))
            .collect::<Vec<_>>(),
        "contact_ids": contacts.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        "shank_ids": contacts.iter().map(|c| c.shank.to_string()).collect::<Vec<_>>(),
    })
}
