//! SpikeGLX reader against the `tests/fixtures/spikeglx` fixtures and corrupted copies.

mod common;

use std::path::{Path, PathBuf};

use common::{CHANNELS, SAMPLES, expected, f64s, fixture, i16s, matrix_channel_major};
use dspk_core::RecordingSource;
use dspk_core::test_util::check_recording_source;
use dspk_io::{Detection, Format, Registry};
use dspk_synapse::Error;
use dspk_synapse::spikeglx::{ColumnKind, Meta, SpikeGlxFormat, SpikeGlxRecording, StreamKind};

const NP1: &str = "spikeglx/np1/fixture_g0/fixture_g0_imec0/fixture_g0_t0.imec0.ap.bin";
const NP2: &str = "spikeglx/np2/fixture2_g0/fixture2_g0_imec0/fixture2_g0_t0.imec0.ap.bin";
const NP1_SUBSET: &str =
    "spikeglx/np1_subset/fixture3_g0/fixture3_g0_imec0/fixture3_g0_t0.imec0.ap.bin";

/// `(name in expected.json, .bin, first AP channel number)` of every fixture.
const FIXTURES: [(&str, &str, usize); 3] = [
    ("np1", NP1, 0),
    ("np2", NP2, 0),
    ("np1_subset", NP1_SUBSET, 10),
];

/// The fixture's SY0 column: `((t // 150) % 2) * 64`.
fn sync_value(t: usize) -> u16 {
    (((t / 150) % 2) * 64) as u16
}

fn read_all_stored(rec: &dyn RecordingSource) -> Vec<i16> {
    let n = rec.info().num_samples;
    let channels = rec.info().all_channels();
    let mut bytes = vec![0u8; channels.len() * n as usize * 2];
    rec.read_stored(&channels, 0..n, &mut bytes).unwrap();
    i16s(&bytes)
}

#[test]
fn fixtures_read_back_the_matrix_with_spec_gains() {
    let expected = expected("spikeglx");
    for (name, bin, first_channel) in FIXTURES {
        let rec = SpikeGlxRecording::open(fixture(bin)).unwrap();
        let info = rec.info();
        assert_eq!(info.num_channels(), CHANNELS, "{name}");
        assert_eq!(info.num_samples, SAMPLES as u64, "{name}");
        assert_eq!(info.sample_rate.as_hz(), 30000.0, "{name}");
        assert_eq!(read_all_stored(&rec), matrix_channel_major(), "{name}");

        let gains: Vec<f64> = info.channels.iter().map(|c| c.gain).collect();
        let offsets: Vec<f64> = info.channels.iter().map(|c| c.offset).collect();
        assert_eq!(gains, f64s(&expected[name]["gain_to_uV"]), "{name}");
        assert_eq!(offsets, f64s(&expected[name]["offset_to_uV"]), "{name}");
        let names: Vec<&str> = info.channels.iter().map(|c| c.name.as_str()).collect();
        let want: Vec<String> = (0..CHANNELS)
            .map(|c| format!("AP{}", first_channel + c))
            .collect();
        assert_eq!(names, want, "{name}");
        assert!(info.channels.iter().all(|c| c.unit == "uV"), "{name}");
        assert_eq!(info.metadata["spikeglx.nSavedChans"], "5", "{name}");

        // The SY0 column is kept apart.
        let stream = rec.stream();
        assert_eq!(stream.kind, StreamKind::Imec);
        assert_eq!(stream.columns.len(), 5);
        assert_eq!(stream.columns[4].kind, ColumnKind::Sync);
        assert_eq!(
            stream.columns[4].acquisition_channel,
            768 / if name == "np2" { 2 } else { 1 }
        );
        assert_eq!(rec.num_digital(), 1);
        let mut sync = vec![0u16; SAMPLES];
        rec.read_sync(0..SAMPLES as u64, &mut sync).unwrap();
        let want: Vec<u16> = (0..SAMPLES).map(sync_value).collect();
        assert_eq!(sync, want, "{name}");
        let mut part = vec![0u16; 7];
        rec.read_digital(0, 147..154, &mut part).unwrap();
        assert_eq!(part, want[147..154], "{name}");
        assert!(matches!(
            rec.read_digital(1, 0..1, &mut [0]),
            Err(Error::Argument(_))
        ));
        assert!(matches!(
            rec.read_sync(0..2, &mut [0]),
            Err(Error::Argument(_))
        ));
        assert!(rec.read_sync(2999..3001, &mut [0, 0]).is_err());

        check_recording_source(&rec);
    }
}

#[test]
fn neo_gains_differ_on_the_subset_fixture() {
    // neo 0.14.6 indexes ~imroTbl by saved position; the reader must not.
    let expected = expected("spikeglx");
    let rec = SpikeGlxRecording::open(fixture(NP1_SUBSET)).unwrap();
    let gains: Vec<f64> = rec.info().channels.iter().map(|c| c.gain).collect();
    assert_ne!(
        gains,
        f64s(&expected["np1_subset"]["neo_0_14_6_gain_to_uV_WRONG"])
    );
    let acquisition: Vec<usize> = rec
        .stream()
        .columns
        .iter()
        .map(|c| c.acquisition_channel)
        .collect();
    assert_eq!(acquisition, [10, 11, 12, 13, 768]);
}

#[test]
fn odd_windows_equal_the_whole() {
    let rec = SpikeGlxRecording::open(fixture(NP1)).unwrap();
    let whole = matrix_channel_major();
    for (start, end) in [
        (0, 1),
        (99, 103),
        (149, 151),
        (1234, 2999),
        (2999, 3000),
        (7, 2007),
    ] {
        let len = end - start;
        let channels = [3, 1];
        let mut bytes = vec![0u8; channels.len() * len * 2];
        rec.read_stored(&channels, start as u64..end as u64, &mut bytes)
            .unwrap();
        let got = i16s(&bytes);
        for (k, &c) in channels.iter().enumerate() {
            assert_eq!(
                got[k * len..(k + 1) * len],
                whole[c * SAMPLES + start..c * SAMPLES + end],
                "channel {c}, {start}..{end}"
            );
        }
        let mut scaled = vec![0f32; channels.len() * len];
        rec.read(&channels, start as u64..end as u64, &mut scaled)
            .unwrap();
        for (k, &c) in channels.iter().enumerate() {
            let gain = rec.info().channels[c].gain;
            for (i, v) in scaled[k * len..(k + 1) * len].iter().enumerate() {
                assert_eq!(
                    *v,
                    (f64::from(whole[c * SAMPLES + start + i]) * gain) as f32
                );
            }
        }
    }
}

#[test]
fn geometry_keeps_spikeglx_coordinates() {
    let expected = expected("spikeglx");
    let np1 = SpikeGlxRecording::open(fixture(NP1)).unwrap();
    let probe = np1.probe().unwrap();
    assert_eq!(probe.name, "PRB_1_4_0480_1");
    assert_eq!(
        probe.channel_positions(CHANNELS).unwrap(),
        vec![[27.0, 0.0], [59.0, 0.0], [11.0, 20.0], [43.0, 20.0]]
    );
    assert!(probe.contacts().iter().all(|c| c.shank == 0));
    assert_eq!(probe.contacts()[2].id, "AP2");
    // probeinterface's positions are the same layout shifted along x only.
    for (name, bin, _) in FIXTURES {
        let rec = SpikeGlxRecording::open(fixture(bin)).unwrap();
        let ours = rec.probe().unwrap().channel_positions(CHANNELS).unwrap();
        let theirs: Vec<Vec<f64>> = expected[name]["probe_contact_positions_um"]
            .as_array()
            .unwrap()
            .iter()
            .map(f64s)
            .collect();
        let shift = ours[0][0] - theirs[0][0];
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!([o[0] - shift, o[1]], [t[0], t[1]], "{name}");
        }
        assert_eq!(shift, if name == "np2" { 27.0 } else { 11.0 }, "{name}");
    }
}

#[test]
fn opens_from_the_meta_and_through_the_format() {
    let bin = fixture(NP2);
    let meta = bin.with_extension("meta");
    let rec = SpikeGlxRecording::open(&meta).unwrap();
    assert_eq!(rec.data_path(), bin.as_path());
    assert_eq!(SpikeGlxFormat.detect(&bin), Detection::ByMetadata);
    assert_eq!(SpikeGlxFormat.detect(&meta), Detection::ByMetadata);
    assert_eq!(
        SpikeGlxFormat.detect(Path::new("/nowhere/x_g0_t0.nidq.bin")),
        Detection::ByName
    );
    assert_eq!(
        SpikeGlxFormat.detect(Path::new("/nowhere/x.bin")),
        Detection::No
    );
    assert_eq!(
        SpikeGlxFormat.detect(Path::new("/nowhere/x.ap.meta")),
        Detection::No
    );
    let mut registry = Registry::default();
    registry.register(SpikeGlxFormat);
    let opened = registry.open(&bin).unwrap();
    assert_eq!(read_all_stored(opened.as_ref()), matrix_channel_major());
}

thread_local! {
    /// The temporary folders this test thread made (each test runs on its own thread).
    static COPIES: std::cell::RefCell<Vec<PathBuf>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Removes the temporary folders this test made (left in place if the test fails, to look at).
fn remove_copies() {
    for dir in COPIES.with(|c| std::mem::take(&mut *c.borrow_mut())) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A copy of a fixture in a fresh temporary folder, with `edit` applied to the `.meta` text;
/// returns the `.bin` path.
fn corrupted_copy(bin: &str, tag: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dspk-spikeglx-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    COPIES.with(|c| c.borrow_mut().push(dir.clone()));
    let source = fixture(bin);
    let target = dir.join(source.file_name().unwrap());
    std::fs::copy(&source, &target).unwrap();
    let meta = std::fs::read_to_string(source.with_extension("meta")).unwrap();
    std::fs::write(target.with_extension("meta"), edit(meta)).unwrap();
    target
}

/// `meta` with `key`'s value replaced by `value`.
fn set_key(meta: &str, key: &str, value: &str) -> String {
    let prefix = format!("{key}=");
    assert!(meta.lines().any(|l| l.starts_with(&prefix)), "no key {key}");
    meta.lines()
        .map(|l| {
            if l.starts_with(&prefix) {
                format!("{prefix}{value}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn open_err(bin: &Path) -> Error {
    SpikeGlxRecording::open(bin).unwrap_err()
}

#[test]
fn bad_input_gives_errors_naming_the_file() {
    // Truncated .bin.
    let bin = corrupted_copy(NP1, "truncated", |m| m);
    let data = std::fs::read(&bin).unwrap();
    std::fs::write(&bin, &data[..29_990]).unwrap();
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Truncated { path, needed: 30_000, actual: 29_990, .. }) if path == &bin),
        "{error}"
    );

    // fileSizeBytes smaller than the file, and not whole samples.
    let bin = corrupted_copy(NP1, "lying-size", |m| set_key(&m, "fileSizeBytes", "20000"));
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { path, problem }) if path == &bin && problem.contains("20000")),
        "{error}"
    );
    let bin = corrupted_copy(NP1, "partial-size", |m| {
        set_key(&m, "fileSizeBytes", "30004")
    });
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { path, .. }) if path == &bin.with_extension("meta")),
        "{error}"
    );

    // Missing .meta, missing .bin.
    let bin = corrupted_copy(NP1, "no-meta", |m| m);
    std::fs::remove_file(bin.with_extension("meta")).unwrap();
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Missing { path, what }) if path == &bin && what.contains(".meta")),
        "{error}"
    );
    let bin = corrupted_copy(NP1, "no-bin", |m| m);
    std::fs::remove_file(&bin).unwrap();
    assert!(matches!(
        open_err(&bin),
        Error::Io(dspk_io::Error::Missing { .. })
    ));

    // Unknown probe type, named.
    let bin = corrupted_copy(NP1, "probe-type", |m| set_key(&m, "imDatPrb_type", "4242"));
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Unsupported { path, what }) if path == &bin.with_extension("meta") && what.contains("4242")),
        "{error}"
    );

    // nSavedChans disagreeing with snsSaveChanSubset.
    let bin = corrupted_copy(NP1, "saved-chans", |m| set_key(&m, "nSavedChans", "6"));
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("snsSaveChanSubset")),
        "{error}"
    );

    // ~snsChanMap naming other acquisition channels than snsSaveChanSubset.
    let bin = corrupted_copy(NP1_SUBSET, "chanmap", |m| {
        set_key(&m, "snsSaveChanSubset", "11:14,768")
    });
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("snsChanMap")),
        "{error}"
    );

    // ~imroTbl too short for the saved channels; a subset past the acquired channels.
    let bin = corrupted_copy(NP1, "imro", |m| {
        set_key(
            &m,
            "~imroTbl",
            "(0,3)(0 0 0 500 250 1)(1 0 0 1000 250 1)(2 0 0 250 250 1)",
        )
    });
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("imroTbl")),
        "{error}"
    );
    let bin = corrupted_copy(NP1, "subset", |m| {
        set_key(&m, "snsSaveChanSubset", "0:3,769")
    });
    assert!(matches!(
        open_err(&bin),
        Error::Io(dspk_io::Error::Invalid { .. })
    ));

    // Geometry map with a wrong number of entries; a line without `=`.
    let bin = corrupted_copy(NP1, "geom", |m| {
        set_key(&m, "~snsGeomMap", "(PRB_1_4_0480_1,1,0,70)(0:27:0:1)")
    });
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("snsGeomMap")),
        "{error}"
    );
    let bin = corrupted_copy(NP1, "syntax", |m| format!("{m}\nnot a pair\n"));
    let error = open_err(&bin);
    assert!(
        matches!(&error, Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("key=value")),
        "{error}"
    );
    remove_copies();
}

#[test]
fn lf_stream_uses_lf_gains() {
    let bin = corrupted_copy(NP1_SUBSET, "lf", |m| {
        let m = set_key(&m, "snsSaveChanSubset", "394:397,768");
        let m = set_key(&m, "snsApLfSy", "0,4,1");
        set_key(
            &m,
            "~snsChanMap",
            "(384,384,1)(LF10;394:0)(LF11;395:1)(LF12;396:2)(LF13;397:3)(SY0;768:4)",
        )
    });
    let lf = bin.with_file_name("fixture3_g0_t0.imec0.lf.bin");
    std::fs::rename(&bin, &lf).unwrap();
    std::fs::rename(bin.with_extension("meta"), lf.with_extension("meta")).unwrap();
    let rec = SpikeGlxRecording::open(&lf).unwrap();
    let gains: Vec<f64> = rec.info().channels.iter().map(|c| c.gain).collect();
    assert_eq!(gains, vec![0.6 / 512.0 / 250.0 * 1e6; 4]);
    assert!(
        rec.stream().columns[..4]
            .iter()
            .all(|c| c.kind == ColumnKind::Lf)
    );
    assert_eq!(rec.info().channels[0].name, "LF10");
    assert_eq!(read_all_stored(&rec), matrix_channel_major());
    // A snsApLfSy that disagrees with the subset.
    let bad = corrupted_copy(NP1, "lf-counts", |m| set_key(&m, "snsApLfSy", "0,4,1"));
    assert!(
        matches!(open_err(&bad), Error::Io(dspk_io::Error::Invalid { problem, .. }) if problem.contains("snsApLfSy"))
    );
    remove_copies();
}

#[test]
fn nidq_stream_has_volts_and_digital_words() {
    // The np1 .bin read as an NI-DAQ stream: 2 MN, 1 MA, 1 XA, 1 XD word.
    let bin = corrupted_copy(NP1, "nidq", |_| {
        [
            "typeThis=nidq",
            "niSampRate=25000.5",
            "nSavedChans=5",
            "fileSizeBytes=30000",
            "acqMnMaXaDw=8,2,2,1",
            "snsMnMaXaDw=2,1,1,1",
            "snsSaveChanSubset=0,1,8,10,12",
            "niAiRangeMax=5",
            "niMaxInt=32768",
            "niMNGain=200",
            "niMAGain=1",
            "firstSample=50001",
        ]
        .join("\n")
    });
    let nidq = bin.with_file_name("run_g0_t0.nidq.bin");
    std::fs::rename(&bin, &nidq).unwrap();
    std::fs::rename(bin.with_extension("meta"), nidq.with_extension("meta")).unwrap();
    let rec = SpikeGlxRecording::open(&nidq).unwrap();
    let info = rec.info();
    let summary: Vec<(&str, f64, &str)> = info
        .channels
        .iter()
        .map(|c| (c.name.as_str(), c.gain, c.unit.as_str()))
        .collect();
    let mn = 5.0 / 32768.0 / 200.0 * 1e6;
    assert_eq!(
        summary,
        vec![
            ("MN0", mn, "uV"),
            ("MN1", mn, "uV"),
            ("MA0", 5.0 / 32768.0 / 1.0, "V"),
            ("XA0", 5.0 / 32768.0, "V"),
        ]
    );
    assert_eq!(info.sample_rate.numerator(), 50001);
    assert_eq!(info.sample_rate.denominator(), 2);
    assert_eq!(info.start_time, info.sample_rate.time_of_sample(50001));
    assert!(rec.probe().is_none());
    let mut word = vec![0u16; SAMPLES];
    rec.read_digital(0, 0..SAMPLES as u64, &mut word).unwrap();
    assert_eq!(word, (0..SAMPLES).map(sync_value).collect::<Vec<_>>());
    assert!(matches!(
        rec.read_sync(0..1, &mut [0]),
        Err(Error::Io(dspk_io::Error::Missing { .. }))
    ));
    check_recording_source(&rec);
    remove_copies();
}

#[test]
fn meta_parse_is_public_and_checks_syntax() {
    let path = Path::new("x.meta");
    let meta = Meta::parse(b"a=b=c\r\n~t=(1)(2)\n", path).unwrap();
    assert_eq!(meta.get("a"), Some("b=c"));
    assert_eq!(meta.get("t"), Some("(1)(2)"));
    assert!(
        Meta::parse(b"typeThis=imec\nnSavedChans=1\n", path)
            .unwrap()
            .stream()
            .is_err()
    );
}
