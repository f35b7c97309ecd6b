//! Probe files: every fixture of `tests/fixtures/probe/` (and the `si_binary`
//! `probegroup.json`) read with the positions, device channels and shanks of its
//! `expected.json`; writer round trips; bad input.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{expected, fixture};
use dspk_synapse::probe::{
    PRB_DEPTH_LIMIT, parse_kilosort_mat, parse_prb, read_kilosort_json, read_kilosort_mat,
    read_prb, read_probeinterface, write_kilosort_json, write_probeinterface,
};
use dspk_synapse::{Contact, Error, Probe};

/// `expected.json` `key` as positions.
fn expected_positions(key: &str) -> Vec<[f64; 2]> {
    expected("probe")[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| [p[0].as_f64().unwrap(), p[1].as_f64().unwrap()])
        .collect()
}

/// `expected.json` device channels (all of them connected).
fn expected_channels() -> Vec<Option<usize>> {
    expected("probe")["device_channel_indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Some(c.as_u64().unwrap() as usize))
        .collect()
}

fn channels(probe: &Probe) -> Vec<Option<usize>> {
    probe.contacts().iter().map(|c| c.device_channel).collect()
}

fn shanks(probe: &Probe) -> Vec<u32> {
    probe.contacts().iter().map(|c| c.shank).collect()
}

fn ids(probe: &Probe) -> Vec<&str> {
    probe.contacts().iter().map(|c| c.id.as_str()).collect()
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("probe")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `dir/name` and returns the path.
fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn probeinterface_fixtures() {
    for file in [
        "probe/linear4.json",
        "si_binary/si_binary_folder/probegroup.json",
    ] {
        let probes = read_probeinterface(&fixture(file)).unwrap();
        assert_eq!(probes.len(), 1, "{file}");
        let probe = &probes[0];
        assert_eq!(
            probe.positions(),
            expected_positions("contact_positions_um"),
            "{file}"
        );
        assert_eq!(channels(probe), expected_channels(), "{file}");
        assert_eq!(shanks(probe), vec![0; 4], "{file}");
        assert_eq!(ids(probe), vec!["0", "1", "2", "3"], "{file}");
        assert_eq!(probe.name, "", "{file}");
    }

    let np1 = read_probeinterface(&fixture("probe/np1_from_spikeglx.json")).unwrap();
    assert_eq!(np1.len(), 1);
    assert_eq!(
        np1[0].positions(),
        expected_positions("np1_contact_positions_um")
    );
    assert_eq!(channels(&np1[0]), expected_channels());
    assert_eq!(ids(&np1[0]), vec!["e0", "e1", "e2", "e3"]);
    // No `name` annotation: the model name.
    assert_eq!(np1[0].name, "PRB_1_4_0480_1");
}

#[test]
fn kilosort_fixtures() {
    let json = read_kilosort_json(&fixture("probe/linear4_kilosort4.json")).unwrap();
    assert_eq!(json.positions(), expected_positions("contact_positions_um"));
    assert_eq!(channels(&json), expected_channels());
    assert_eq!(shanks(&json), vec![0; 4]);

    let mat = read_kilosort_mat(&fixture("probe/linear4_kilosortChanMap.mat")).unwrap();
    assert_eq!(mat.positions(), expected_positions("contact_positions_um"));
    assert_eq!(channels(&mat), expected_channels());
    // createChannelMapFile.m's kcoords = 1 (MATLAB numbering) is shank 0.
    assert_eq!(shanks(&mat), vec![0; 4]);
    assert_eq!(mat.name, "linear4");
    assert_eq!(
        mat.channel_positions(4).unwrap(),
        json.channel_positions(4).unwrap()
    );
}

#[test]
fn prb_fixtures() {
    let probes = read_prb(&fixture("probe/linear4_canonical.prb")).unwrap();
    assert_eq!(probes.len(), 1);
    let probe = &probes[0];
    assert_eq!(probe.name, "0");
    assert_eq!(
        probe.positions(),
        expected_positions("contact_positions_um")
    );
    assert_eq!(channels(probe), expected_channels());
    assert_eq!(shanks(probe), vec![0; 4]);
    assert_eq!(ids(probe), vec!["0", "1", "2", "3"]);

    // probeinterface 0.4.2 + numpy 2 writes `np.int64(0)`: only an `exec` with numpy in scope
    // reads it (expected.json: exec with empty globals raises NameError on `np`).
    let path = fixture("probe/linear4.prb");
    let err = read_prb(&path).unwrap_err();
    assert!(
        matches!(err, Error::Io(dspk_io::Error::Unsupported { .. })),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        expected("probe")["probeinterface_prb_exec_with_empty_globals"]
            .as_str()
            .unwrap()
            .contains("'np'")
    );
    assert!(message.contains("`np.int64(...)`"), "{message}");
    assert!(message.contains("line 4, column 25"), "{message}");
    assert!(message.contains("linear4.prb"), "{message}");
}

#[test]
fn prb_literal_subset() {
    let path = Path::new("groups.prb");
    let text = "# two tetrodes\n\
        total_nb_channels = 8; radius = 1e2\n\
        channel_groups = {\n\
            'a': {'channels': list(range(4)), 'graph': [(0, 1)],\n\
                  'geometry': {0: (0, 0), 1: [0., 20], 2: (-16.5, 4_0), 3: (16, 60)}},\n\
            1: {\"channels\": (7, 6, 5, 4), 'geometry': {i: (0, 0) for i in x}} if False else \
               {'channels': (7, 6, 5, 4), 'geometry': {4: (100, 0), 5: (100, 20), \\\n\
               6: (100, 40), 7: (100, 60),},},\n\
        }\n";
    // A comprehension is not a literal.
    let err = parse_prb(text.as_bytes(), path).unwrap_err();
    assert!(
        matches!(err, Error::Io(dspk_io::Error::Unsupported { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("line 6"), "{err}");

    let text = text.replace(
        "1: {\"channels\": (7, 6, 5, 4), 'geometry': {i: (0, 0) for i in x}} if False else ",
        "1: ",
    );
    let probes = parse_prb(text.as_bytes(), path).unwrap();
    assert_eq!(probes.len(), 2);
    assert_eq!(probes[0].name, "a");
    assert_eq!(
        probes[0].positions(),
        vec![[0.0, 0.0], [0.0, 20.0], [-16.5, 40.0], [16.0, 60.0]]
    );
    assert_eq!(shanks(&probes[0]), vec![0; 4]);
    assert_eq!(probes[1].name, "1");
    assert_eq!(
        channels(&probes[1]),
        vec![Some(7), Some(6), Some(5), Some(4)]
    );
    assert_eq!(probes[1].contacts()[0].position, [100.0, 60.0]);
    assert_eq!(shanks(&probes[1]), vec![1; 4]);
}

#[test]
fn prb_bad_input() {
    let path = Path::new("bad.prb");
    let group = |geometry: &str| {
        format!("channel_groups = {{0: {{'channels': [0, 1], 'geometry': {geometry}}}}}\n")
    };
    let invalid = |text: &str, needle: &str| {
        let err = parse_prb(text.as_bytes(), path).unwrap_err();
        assert!(
            matches!(err, Error::Io(dspk_io::Error::Invalid { .. })),
            "{text}: {err:?}"
        );
        assert!(err.to_string().contains(needle), "{text}: {err}");
        assert!(err.to_string().contains("bad.prb"), "{err}");
    };
    let unsupported = |text: &str, needle: &str| {
        let err = parse_prb(text.as_bytes(), path).unwrap_err();
        assert!(
            matches!(err, Error::Io(dspk_io::Error::Unsupported { .. })),
            "{text}: {err:?}"
        );
        assert!(err.to_string().contains(needle), "{text}: {err}");
    };
    invalid(
        "channel_groups = {0: {'channels': [0, 1], 'geometry': {0: (0, 0), 1: (0, 1)}}\n",
        "`{` is never closed",
    );
    invalid(
        "channel_groups = {0: {'channels': [0, 1), 'geometry': {}}}",
        "expected `,` or `]`",
    );
    invalid(&group("{0: (0, 0), 1: (0, 1)}}"), "line 1");
    invalid(
        &group("{0: (0, 0)}"),
        "channel 1 has no entry in 'geometry'",
    );
    invalid(&group("{0: (0, 0), 1: (0, 'x')}"), "geometry of channel 1");
    invalid(&group("{0: (0, 0), 1: (0, 1, 2)}"), "geometry of channel 1");
    invalid("radius = 5\n", "no `channel_groups");
    invalid("channel_groups = {}\n", "is empty");
    invalid(
        "channel_groups = {0: {'channels': [-1], 'geometry': {-1: (0, 0)}}}",
        "not a non-negative integer",
    );
    invalid(
        "channel_groups = {0: {'channels': [0], 'geometry': {0: (0, 0)}},\n\
         1: {'channels': [0], 'geometry': {0: (1, 0)}}}",
        "channel 0 is also in channel group 0",
    );
    invalid(
        "channel_groups = {0: {'channels': [0, 0], 'geometry': {0: (0, 0)}}}",
        "both wired",
    );
    invalid("x = 'unterminated\n", "never closed");
    invalid("x = 99999999999999999999\n", "64-bit range");
    invalid("x = range(10000000)\n", "range() calls produce more than");
    invalid("x = [1, 2] [3]\n", "expected the end of the statement");
    // Deep nesting is refused at the limit, not by the stack.
    let deep = format!("x = {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    invalid(&deep, "nest deeper than");
    let at_limit = format!(
        "x = {}{}\n{}",
        "[".repeat(PRB_DEPTH_LIMIT),
        "]".repeat(PRB_DEPTH_LIMIT),
        group("{0: (0, 0), 1: (0, 1)}")
    );
    assert_eq!(parse_prb(at_limit.as_bytes(), path).unwrap().len(), 1);

    unsupported("import numpy as np\n", "`import` statement");
    unsupported(&group("{0: (0, 0), 1: (0, pitch)}"), "the name `pitch`");
    unsupported(
        &group("{0: (0, 0), 1: (0, np.float64(1.0))}"),
        "`np.float64(...)`",
    );
    unsupported(&group("{0: (0, 0), 1: (0, 2 * 10)}"), "'*'");
    unsupported("x = {1, 2}\n", "set literal");
    unsupported("x = f'{y}'\n", "`f`-prefixed string");
    unsupported("x = \"\"\"doc\"\"\"\n", "triple-quoted");
    unsupported("x = 3j\n", "number suffix");
    unsupported("print(1)\n", "`print` statement");

    let err = parse_prb(b"x = '\xff'", path).unwrap_err();
    assert!(err.to_string().contains("not valid UTF-8"), "{err}");
    let huge = vec![b' '; (dspk_synapse::probe::PRB_SIZE_LIMIT + 1) as usize];
    let err = parse_prb(&huge, path).unwrap_err();
    assert!(err.to_string().contains("more than"), "{err}");
}

/// A probe group exercising everything a writer must keep: names, ids, shanks, unconnected
/// contacts, fractional and negative positions.
fn sample_group() -> Vec<Probe> {
    let contact = |id: &str, x: f64, y: f64, shank: u32, channel: Option<usize>| Contact {
        id: id.to_string(),
        position: [x, y],
        shank,
        device_channel: channel,
    };
    vec![
        Probe::new(
            "two-shank",
            vec![
                contact("s0e0", 0.0, 0.0, 0, Some(3)),
                contact("s0e1", 0.0, 12.5, 0, Some(1)),
                contact("s1e0", 250.0, -7.25, 1, None),
                contact("s1e1", 250.0, 20.0, 1, Some(0)),
            ],
        )
        .unwrap(),
        Probe::new(
            "",
            vec![
                contact("", 1.0e-3, 5.0, 0, Some(4)),
                contact("", 3.0, 1.0e6, 0, Some(2)),
            ],
        )
        .unwrap(),
    ]
}

#[test]
fn probeinterface_round_trip() {
    let dir = scratch("probeinterface_round_trip");
    let group = sample_group();
    let path = dir.join("group.json");
    write_probeinterface(&path, &group).unwrap();
    assert_eq!(read_probeinterface(&path).unwrap(), group);

    // probeinterface refuses a channel wired in two probes and duplicate contact ids.
    let mut clash = sample_group();
    clash.push(clash[1].clone());
    let err = write_probeinterface(&dir.join("clash.json"), &clash).unwrap_err();
    assert!(err.to_string().contains("device channel 4"), "{err}");
    let mut contacts = group[0].contacts().to_vec();
    contacts[1].id = contacts[0].id.clone();
    let duplicate = Probe::new("d", contacts).unwrap();
    let err = write_probeinterface(&dir.join("dup.json"), &[duplicate]).unwrap_err();
    assert!(err.to_string().contains("used twice"), "{err}");
}

#[test]
fn kilosort_json_round_trip() {
    let dir = scratch("kilosort_json_round_trip");
    let probe = &sample_group()[0];
    let path = dir.join("probe.json");
    write_kilosort_json(&path, probe).unwrap();
    let back = read_kilosort_json(&path).unwrap();
    // Kilosort keeps connected sites only, without ids or a name.
    let kept: Vec<Contact> = probe
        .contacts()
        .iter()
        .filter(|c| c.device_channel.is_some())
        .map(|c| Contact {
            id: String::new(),
            ..c.clone()
        })
        .collect();
    assert_eq!(back, Probe::new("", kept).unwrap());
    // The keys and types Kilosort 4's save_probe writes.
    let text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(text["chanMap"], serde_json::json!([3, 1, 0]));
    assert_eq!(text["kcoords"], serde_json::json!([0.0, 0.0, 1.0]));
    assert_eq!(text["n_chan"], serde_json::json!(3));

    let unconnected = Probe::new(
        "u",
        vec![Contact {
            id: String::new(),
            position: [0.0, 0.0],
            shank: 0,
            device_channel: None,
        }],
    )
    .unwrap();
    assert!(matches!(
        write_kilosort_json(&dir.join("none.json"), &unconnected),
        Err(Error::Argument(_))
    ));
}

/// Writes the group with both writers for `tests/probe_check.py` (probeinterface and Kilosort
/// 4's loader in Python) and checks our own reading of the same files.
#[test]
fn files_for_the_python_check() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("probe_check");
    std::fs::create_dir_all(&dir).unwrap();
    let group = sample_group();
    write_probeinterface(&dir.join("group.json"), &group).unwrap();
    write_kilosort_json(&dir.join("kilosort4.json"), &group[0]).unwrap();
    assert_eq!(read_probeinterface(&dir.join("group.json")).unwrap(), group);
    assert_eq!(
        read_kilosort_json(&dir.join("kilosort4.json"))
            .unwrap()
            .num_contacts(),
        3
    );
}

#[test]
fn json_bad_input() {
    let dir = scratch("json_bad_input");
    let linear = std::fs::read_to_string(fixture("probe/linear4.json")).unwrap();
    let ks = std::fs::read_to_string(fixture("probe/linear4_kilosort4.json")).unwrap();

    let path = write(&dir, "cut.json", &linear[..linear.len() / 2]);
    let err = read_probeinterface(&path).unwrap_err();
    assert!(
        matches!(err, Error::Io(dspk_io::Error::Json { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("cut.json"), "{err}");
    let path = write(&dir, "cut_ks.json", &ks[..ks.len() - 3]);
    assert!(matches!(
        read_kilosort_json(&path).unwrap_err(),
        Error::Io(dspk_io::Error::Json { .. })
    ));

    let mut value: serde_json::Value = serde_json::from_str(&linear).unwrap();
    let case = |name: &str, edit: &dyn Fn(&mut serde_json::Value), needle: &str| {
        let mut v = value.clone();
        edit(&mut v);
        let path = write(&dir, name, v.to_string());
        let err = read_probeinterface(&path).unwrap_err();
        assert!(err.to_string().contains(needle), "{name}: {err}");
        err
    };
    case(
        "spec.json",
        &|v| v["specification"] = "other".into(),
        "\"specification\" is \"other\"",
    );
    case(
        "nopos.json",
        &|v| {
            v["probes"][0]
                .as_object_mut()
                .unwrap()
                .remove("contact_positions");
        },
        "no \"contact_positions\"",
    );
    case(
        "len.json",
        &|v| v["probes"][0]["device_channel_indices"] = serde_json::json!([0, 1, 2]),
        "\"device_channel_indices\" has 3 entries but \"contact_positions\" has 4",
    );
    case(
        "neg.json",
        &|v| v["probes"][0]["device_channel_indices"][2] = (-2).into(),
        "expected a channel index or -1",
    );
    case(
        "dup.json",
        &|v| v["probes"][0]["device_channel_indices"][2] = 0.into(),
        "device channel 0",
    );
    case(
        "xyz.json",
        &|v| v["probes"][0]["contact_positions"][1] = serde_json::json!([0, 1, 2]),
        "expected [x, y]",
    );
    let err = case("ndim3.json", &|v| v["probes"][0]["ndim"] = 3.into(), "3-D");
    assert!(matches!(err, Error::Io(dspk_io::Error::Unsupported { .. })));
    // mm are scaled to um; -1 is unconnected.
    value["probes"][0]["si_units"] = "mm".into();
    value["probes"][0]["device_channel_indices"][0] = (-1).into();
    let path = write(&dir, "mm.json", value.to_string());
    let probe = &read_probeinterface(&path).unwrap()[0];
    assert_eq!(probe.contacts()[3].position, [16_000.0, 60_000.0]);
    assert_eq!(probe.contacts()[0].device_channel, None);

    let ks_value: serde_json::Value = serde_json::from_str(&ks).unwrap();
    let ks_case = |name: &str, edit: &dyn Fn(&mut serde_json::Value), needle: &str| {
        let mut v = ks_value.clone();
        edit(&mut v);
        let path = write(&dir, name, v.to_string());
        let err = read_kilosort_json(&path).unwrap_err();
        assert!(
            matches!(err, Error::Io(dspk_io::Error::Invalid { .. })),
            "{name}: {err:?}"
        );
        assert!(err.to_string().contains(needle), "{name}: {err}");
    };
    ks_case(
        "ks_noxc.json",
        &|v| {
            v.as_object_mut().unwrap().remove("xc");
        },
        "no \"xc\"",
    );
    ks_case(
        "ks_len.json",
        &|v| v["xc"] = serde_json::json!([0.0, 0.0, 16.0]),
        "the channel map has 4 sites but xc has 3 values",
    );
    ks_case(
        "ks_frac.json",
        &|v| v["chanMap"][1] = 1.5.into(),
        "not a channel index",
    );
    ks_case(
        "ks_nchan.json",
        &|v| v["n_chan"] = 2.into(),
        "\"n_chan\" is 2",
    );
    ks_case(
        "ks_kc.json",
        &|v| v["kcoords"][0] = (-1.0).into(),
        "not a whole shank",
    );
    ks_case(
        "ks_str.json",
        &|v| v["yc"][0] = "a".into(),
        "\"yc\"[0] is \"a\"",
    );
}

/// The fixture's bytes.
fn mat_fixture() -> Vec<u8> {
    std::fs::read(fixture("probe/linear4_kilosortChanMap.mat")).unwrap()
}

/// The byte offset of the first occurrence of `needle` in `bytes`.
fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

/// The fixture with every top-level element wrapped in an `miCOMPRESSED` element, as MATLAB's
/// default `save` (v7) writes.
fn compressed_mat() -> Vec<u8> {
    let bytes = mat_fixture();
    let mut out = bytes[..128].to_vec();
    let mut offset = 128;
    while offset < bytes.len() {
        let size = u32::from_le_bytes(bytes[offset + 4..offset + 8].try_into().unwrap()) as usize;
        let end = (offset + 8 + size).min(bytes.len());
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&bytes[offset..end]).unwrap();
        let data = z.finish().unwrap();
        out.extend_from_slice(&15u32.to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&data);
        offset = (offset + 8 + size).div_ceil(8) * 8;
    }
    out
}

#[test]
fn mat_compressed_and_bad_input() {
    let path = Path::new("chanMap.mat");
    let plain = parse_kilosort_mat(&mat_fixture(), path).unwrap();
    assert_eq!(parse_kilosort_mat(&compressed_mat(), path).unwrap(), plain);

    let check = |bytes: &[u8], needle: &str| -> Error {
        let err = parse_kilosort_mat(bytes, path).unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
        assert!(err.to_string().contains("chanMap.mat"), "{err}");
        err
    };
    let bytes = mat_fixture();
    // Truncated in the header, in an element, and in a compressed element.
    assert!(matches!(
        check(&bytes[..100], "header"),
        Error::Io(dspk_io::Error::Truncated { needed: 128, .. })
    ));
    assert!(matches!(
        check(&bytes[..500], "truncated"),
        Error::Io(dspk_io::Error::Truncated { .. })
    ));
    let z = compressed_mat();
    assert!(matches!(
        check(&z[..z.len() - 10], "truncated"),
        Error::Io(dspk_io::Error::Truncated { .. })
    ));

    let mut wrong = bytes.clone();
    wrong[126..128].copy_from_slice(b"XY");
    assert!(matches!(
        check(&wrong, "endian indicator is \"XY\""),
        Error::Io(dspk_io::Error::Invalid { .. })
    ));
    let mut v73 = bytes.clone();
    v73[124..126].copy_from_slice(&0x0200u16.to_le_bytes());
    assert!(matches!(
        check(&v73, "v7.3"),
        Error::Io(dspk_io::Error::Unsupported { .. })
    ));

    // chanMap's dimensions (4, 1) made absurd: refused before any allocation.
    let mut absurd = bytes.clone();
    let dims = find(&absurd, &[5, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0]) + 8;
    absurd[dims..dims + 8].copy_from_slice(&[0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f]);
    assert!(matches!(
        check(&absurd, "dimensions [2147483647, 2147483647]"),
        Error::Io(dspk_io::Error::Invalid { .. })
    ));
    // An element whose byte count runs past the end of the file.
    let mut long = bytes.clone();
    long[132..136].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        check(&long, "truncated"),
        Error::Io(dspk_io::Error::Truncated { .. })
    ));

    // chanMap as a cell array: unsupported, naming the variable.
    let mut cell = bytes.clone();
    cell[0x90] = 1;
    assert!(matches!(
        check(&cell, "variable `chanMap` is a cell array"),
        Error::Io(dspk_io::Error::Unsupported { .. })
    ));
    // A missing variable.
    let mut renamed = bytes.clone();
    let at = find(&renamed, b"xcoords");
    renamed[at + 6] = b'z';
    assert!(matches!(
        check(&renamed, "variable `xcoords` is missing"),
        Error::Io(dspk_io::Error::Missing { .. })
    ));
    // chanMap0ind that disagrees with chanMap.
    let mut disagree = bytes.clone();
    let at = find(&disagree, b"chanMap0ind") + 16 + 8;
    disagree[at..at + 8].copy_from_slice(&7.0f64.to_le_bytes());
    check(&disagree, "chanMap0ind(1) is 7");
    // Unconnected sites keep their position but read no channel.
    let mut unconnected = bytes.clone();
    let at = find(&unconnected, &[2, 0, 4, 0, 1, 1, 1, 1]);
    unconnected[at + 5] = 0;
    let probe = parse_kilosort_mat(&unconnected, path).unwrap();
    assert_eq!(channels(&probe), vec![Some(0), None, Some(2), Some(3)]);
    assert_eq!(probe.positions(), plain.positions());
}
