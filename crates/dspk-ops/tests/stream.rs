//! The streaming path (`WindowStream`) against the hand-written loop it replaces, and peaks in
//! recording samples (fixed and noise thresholds) over several window sizes against the whole
//! recording at once.

use std::sync::Arc;

use cubecl::client::Client;
use dspk_core::test_util::{Rng, for_each_runtime};
use dspk_core::{
    ChannelInfo, ChunkSchedule, LoaderOptions, MemoryRecording, RecordingSource, SampleRate,
    ScaledOnly, SyntheticRecording, WindowLoader,
};
use dspk_ops::design::{Band, butter};
use dspk_ops::{
    ChannelVector, CommonReference, DeviceWindow, Error, GaussianFilter, Height, NoisePeaks, Peak,
    PeakDetector, PeakOptions, Pipeline, PipelineWorkspace, Polarity, Reference, SosFilter,
    StreamOptions, WindowStream,
};

const WINDOW: u64 = 4_000;

/// Processed windows as read ranges and their values' bits.
type Windows = Vec<(std::ops::Range<u64>, Vec<u32>)>;

fn pipeline() -> Pipeline {
    let highpass = butter(3, Band::Highpass(300.0), 30_000.0).unwrap();
    Pipeline::new()
        .with(CommonReference::new(Reference::Mean))
        .with(SosFilter::zero_phase(&highpass).unwrap())
}

/// Each window's read range and output bits, from the loop every example used to write:
/// loader -> workspace upload (stored when the source has stored values) -> pipeline.
fn by_hand<S: RecordingSource + 'static>(
    client: &Client,
    source: Arc<S>,
) -> Vec<(std::ops::Range<u64>, Vec<u32>)> {
    let info = source.info().clone();
    let pipeline = pipeline();
    let halo = pipeline.settling() as u64;
    let schedule = ChunkSchedule::symmetric(info.num_samples, WINDOW, halo).unwrap();
    let channels = info.num_channels();
    let max = schedule.max_read_len() as usize;
    let mut workspace = PipelineWorkspace::new(client, channels, max).unwrap();
    workspace.set_pipeline(pipeline).unwrap();
    let bits = |array: dspk_ops::DeviceArray| -> Vec<u32> {
        let values = array.to_host(client).unwrap();
        values.into_iter().map(f32::to_bits).collect()
    };
    let mut out = Vec::new();
    let options = LoaderOptions::default();
    if source.can_read_stored() {
        let gains: Vec<f64> = info.channels.iter().map(|c| c.gain).collect();
        let offsets: Vec<f64> = info.channels.iter().map(|c| c.offset).collect();
        workspace.set_stored_scaling(&gains, &offsets).unwrap();
        for loaded in
            WindowLoader::<u8>::new(source, info.all_channels(), schedule, options).unwrap()
        {
            let loaded = loaded.unwrap();
            let window = loaded.window().clone();
            let array = workspace
                .process_stored(loaded.into_upload(), info.stored_format, window.read_len())
                .unwrap();
            out.push((window.read(), bits(array)));
        }
    } else {
        for loaded in
            WindowLoader::<f32>::new(source, info.all_channels(), schedule, options).unwrap()
        {
            let loaded = loaded.unwrap();
            let window = loaded.window().clone();
            let array = workspace
                .process_scaled(loaded.into_upload(), window.read_len())
                .unwrap();
            out.push((window.read(), bits(array)));
        }
    }
    out
}

/// The same through `WindowStream`, checking it allocates no device memory after the first
/// window and takes the stored path exactly when the source has stored values.
fn streamed<S: RecordingSource + 'static>(client: &Client, source: Arc<S>) -> Windows {
    let stored = source.can_read_stored();
    let options = StreamOptions {
        window: WINDOW,
        ..StreamOptions::default()
    };
    let mut stream = WindowStream::new(client, source, pipeline(), &options).unwrap();
    assert_eq!(stream.uploads_stored(), stored);
    let mut out = Vec::new();
    let mut allocations = None;
    while let Some(window) = stream.next_window() {
        let window = window.unwrap();
        let values = window.array().to_host(client).unwrap();
        out.push((
            window.window().read(),
            values.into_iter().map(f32::to_bits).collect(),
        ));
        let now = stream.workspace().device_allocations();
        assert_eq!(
            *allocations.get_or_insert(now),
            now,
            "device memory per window"
        );
    }
    assert_eq!(out.len(), stream.schedule().len());
    out
}

/// Guards: the streaming path must give, bit for bit, what the hand-written loop gave, on the
/// stored path (int16 uploaded and unpacked on the device) and the scaled one.
#[test]
fn stream_equals_the_hand_written_loop_stored_and_scaled() {
    for_each_runtime(|target, client| {
        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = Arc::new(SyntheticRecording::new(6, 17_011, rate, 9).unwrap());
        let expected = by_hand(client, source.clone());
        assert_eq!(expected.len(), 5);
        assert_eq!(
            streamed(client, source.clone()),
            expected,
            "{target}: int16"
        );
        let hidden = Arc::new(ScaledOnly(
            SyntheticRecording::new(6, 17_011, rate, 9).unwrap(),
        ));
        let expected = by_hand(client, hidden.clone());
        assert_eq!(streamed(client, hidden), expected, "{target}: scaled only");
    });
}

/// Peaks of every window of `window` samples, in recording samples.
fn peaks_in_windows(
    client: &Client,
    source: Arc<SyntheticRecording>,
    window: u64,
    options: &PeakOptions,
    extra_halo: u64,
) -> Vec<Peak> {
    let pipeline = Pipeline::new()
        .with(CommonReference::new(Reference::Mean))
        .with(GaussianFilter::new(1.5, 4.0).unwrap());
    let stream_options = StreamOptions {
        window,
        extra_halo,
        ..StreamOptions::default()
    };
    let mut stream = WindowStream::new(client, source, pipeline, &stream_options).unwrap();
    let mut detector = PeakDetector::new(client, 60_000).unwrap();
    let mut peaks = Vec::new();
    while let Some(processed) = stream.next_window() {
        detector
            .detect_window(client, processed.unwrap(), options)
            .unwrap();
        peaks.extend(detector.peaks(client).unwrap());
    }
    peaks.sort_by_key(|p| (p.channel, p.sample));
    peaks
}

/// Guards: peaks reported in recording samples (the window's start added once, only owned
/// samples reported) equal the whole recording's, whatever the window size.
#[test]
fn peaks_in_recording_samples_do_not_depend_on_the_window_size() {
    for_each_runtime(|target, client| {
        let samples = 100_003;
        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = Arc::new(SyntheticRecording::new(4, samples, rate, 3).unwrap());
        let distance = 12;
        let options = PeakOptions {
            polarity: Polarity::Negative,
            height: Height::PerChannel {
                thresholds: ChannelVector::from_host(client, &[150.0, 160.0, 170.0, 180.0])
                    .unwrap(),
                scale: 1.0,
            },
            distance,
        };
        // Halo: distance plus the longest run of equal neighbours (smoothed data has none
        // longer than a few samples).
        let extra = distance as u64 + 8;
        let whole = peaks_in_windows(client, source.clone(), samples, &options, extra);
        assert!(whole.len() > 300, "{target}: {} peaks", whole.len());
        assert!(whole.iter().any(|p| p.sample > u64::from(u16::MAX)));
        for window in [7_919, 30_000, 60_000] {
            let chunked = peaks_in_windows(client, source.clone(), window, &options, extra);
            assert_eq!(chunked, whole, "{target}: windows of {window}");
        }
    });
}

// Moved from the examples' `peaks_beyond_noise` (now `NoisePeaks`): spikes on windows' edges
// (the window of 1 000 samples ends at 999 and 1 999) and two on one channel closer than the
// distance: each found once, at its recording sample, with windows of 1 000 as with the whole
// recording in one.
#[test]
fn noise_peaks_are_found_once_in_recording_samples() {
    let (channels, samples, distance) = (3, 5_000, 10);
    let mut rng = Rng::new(11);
    let mut stored: Vec<i16> = (0..channels * samples)
        .map(|_| rng.uniform(-10.0, 10.0) as i16)
        .collect();
    let spikes = [(999, 0), (1_000, 1), (1_999, 2), (3_000, 1), (4_990, 0)];
    for &(sample, channel) in &spikes {
        stored[channel * samples + sample as usize] = -1_000;
    }
    stored[samples + 3_005] = -800; // within `distance` of the spike at 3 000
    let infos = (0..channels)
        .map(|c| ChannelInfo::new(format!("C{c}"), 1.0, 0.0, "uV"))
        .collect();
    let rate = SampleRate::from_hz(30_000).unwrap();
    let source = Arc::new(MemoryRecording::from_samples(infos, rate, &stored).unwrap());
    for_each_runtime(|target, client| {
        for window in [1_000, 5_000] {
            let options = StreamOptions {
                window,
                extra_halo: distance as u64 + 1,
                ..StreamOptions::default()
            };
            let mut stream =
                WindowStream::new(client, source.clone(), Pipeline::new(), &options).unwrap();
            let mut finder = NoisePeaks::new(
                client,
                stream.workspace(),
                Polarity::Negative,
                4.5,
                distance,
            )
            .unwrap();
            let mut peaks = Vec::new();
            while let Some(window) = stream.next_window() {
                peaks.extend(finder.find(client, window.unwrap()).unwrap());
            }
            peaks.sort_by_key(|p| (p.sample, p.channel));
            let found: Vec<(u64, usize)> = peaks
                .iter()
                .map(|p| (p.sample, p.channel as usize))
                .collect();
            assert_eq!(found, spikes, "{target}: windows of {window}");
            assert!(peaks.iter().all(|p| p.value == -1_000.0), "{peaks:?}");
        }
        let workspace =
            WindowStream::new(client, source.clone(), Pipeline::new(), &Default::default())
                .unwrap();
        let zero = NoisePeaks::new(client, workspace.workspace(), Polarity::Negative, 4.5, 0);
        assert!(
            matches!(zero, Err(Error::InvalidParameter { .. })),
            "{zero:?}"
        );
    });
}

/// Residency: the windows kept on the device by the first pass give, pass after pass, the same
/// bits as streaming from the host, with nothing uploaded; a scaled-only source keeps nothing.
#[test]
fn resident_windows_replay_the_stream_bit_for_bit() {
    for_each_runtime(|target, client| {
        let (source, expected, options) = replay_case(client);
        let mut stream = WindowStream::new(client, source.clone(), pipeline(), &options).unwrap();
        assert!(
            stream.keep_resident(u64::MAX),
            "{target}: an int16 source is kept"
        );
        let mut first = Vec::new();
        while let Some(window) = stream.next_window() {
            let window = window.unwrap();
            let values = window.array().to_host(client).unwrap();
            first.push((
                window.window().read(),
                values.into_iter().map(f32::to_bits).collect(),
            ));
        }
        assert_eq!(first, expected, "{target}: the keeping pass");
        // 5 channels x read samples x 2 bytes, each window padded to whole words.
        let kept: u64 = expected
            .iter()
            .map(|(read, _)| ((read.end - read.start) * 5 * 2).next_multiple_of(4))
            .sum();
        assert_eq!(stream.resident_bytes(), kept, "{target}: kept bytes");
        let uploaded = stream.uploaded_bytes();
        let mut resident = stream.into_resident().expect("every window was served");
        assert_eq!(resident.len(), expected.len());
        assert_eq!(resident.bytes(), kept);
        for pass in 0..2 {
            let mut again = Vec::new();
            while let Some(window) = resident.next_window() {
                let window = window.unwrap();
                let values = window.array().to_host(client).unwrap();
                again.push((
                    window.window().read(),
                    values.into_iter().map(f32::to_bits).collect(),
                ));
            }
            assert_eq!(again, expected, "{target}: resident pass {pass}");
        }
        // Random access: the last window alone, then the first.
        for index in [expected.len() - 1, 0] {
            let window = resident.window(index).unwrap().unwrap();
            let values = window.array().to_host(client).unwrap();
            let bits: Vec<u32> = values.into_iter().map(f32::to_bits).collect();
            assert_eq!(
                (window.window().read(), bits),
                expected[index],
                "{target}: window {index}"
            );
        }
        assert!(resident.window(expected.len()).is_none());
        assert_eq!(resident.ranges().len(), expected.len());
        assert_eq!(
            uploaded,
            5 * expected
                .iter()
                .map(|(r, _)| (r.end - r.start) * 2)
                .sum::<u64>()
        );

        // A stream stopped early cannot be replayed; a scaled-only source keeps nothing.
        let mut partial = WindowStream::new(client, source.clone(), pipeline(), &options).unwrap();
        assert!(partial.keep_resident(u64::MAX));
        partial.next_window().unwrap().unwrap();
        assert!(partial.into_resident().is_none(), "{target}: partial pass");
        let hidden = Arc::new(ScaledOnly((*source).clone()));
        let mut scaled = WindowStream::new(client, hidden, pipeline(), &options).unwrap();
        assert!(
            !scaled.keep_resident(u64::MAX),
            "{target}: f32 windows are not kept"
        );
    });
}

/// Residency within a budget: the first pass keeps the first windows while they fit, the
/// stream from the first window not kept gives the rest, and together they are the stream's
/// bits; a budget smaller than the first window keeps nothing.
#[test]
fn a_budget_keeps_the_first_windows_and_the_rest_streams() {
    for_each_runtime(|target, client| {
        let (source, expected, options) = replay_case(client);
        let sizes: Vec<u64> = expected
            .iter()
            .map(|(read, _)| ((read.end - read.start) * 5 * 2).next_multiple_of(4))
            .collect();
        assert!(sizes.len() >= 4, "{target}: the test needs several windows");
        // Room for the first two windows and part of the third.
        let budget = sizes[0] + sizes[1] + sizes[2] / 2;
        let mut stream = WindowStream::new(client, source.clone(), pipeline(), &options).unwrap();
        assert!(stream.keep_resident(budget));
        let mut first = Vec::new();
        while let Some(window) = stream.next_window() {
            first.push(bits_of(client, window.unwrap()));
        }
        assert_eq!(first, expected, "{target}: the keeping pass");
        let mut resident = stream.into_resident().expect("every window was served");
        assert_eq!(resident.len(), 2, "{target}: windows kept");
        assert_eq!(resident.bytes(), sizes[0] + sizes[1]);
        let mut again = Vec::new();
        while let Some(window) = resident.next_window() {
            again.push(bits_of(client, window.unwrap()));
        }
        let mut rest = WindowStream::of_windows(
            client,
            source.clone(),
            pipeline(),
            &options,
            Some((2..99).collect()),
        )
        .unwrap();
        while let Some(window) = rest.next_window() {
            again.push(bits_of(client, window.unwrap()));
        }
        assert_eq!(
            again, expected,
            "{target}: kept windows, then the rest streamed"
        );
        assert_eq!(
            rest.uploaded_bytes(),
            5 * expected[2..]
                .iter()
                .map(|(r, _)| (r.end - r.start) * 2)
                .sum::<u64>(),
            "{target}: only the rest is uploaded"
        );
        // Past the last window: an empty stream.
        let mut none =
            WindowStream::of_windows(client, source.clone(), pipeline(), &options, Some(vec![99]))
                .unwrap();
        assert!(none.next_window().is_none());
        // A budget under the first window keeps none.
        let mut tight = WindowStream::new(client, source, pipeline(), &options).unwrap();
        assert!(tight.keep_resident(sizes[0] - 4));
        while let Some(window) = tight.next_window() {
            window.unwrap();
        }
        assert_eq!(tight.into_resident().map(|r| r.len()), Some(0));
    });
}

/// The residency tests' recording (5 channels, 13 001 samples), its windows as streamed, and
/// the stream options that cut it so.
fn replay_case(client: &Client) -> (Arc<SyntheticRecording>, Windows, StreamOptions) {
    let rate = SampleRate::from_hz(30_000).unwrap();
    let source = Arc::new(SyntheticRecording::new(5, 13_001, rate, 4).unwrap());
    let expected = streamed(client, source.clone());
    let options = StreamOptions {
        window: WINDOW,
        ..StreamOptions::default()
    };
    (source, expected, options)
}

/// A processed window's read range and its values' bits.
fn bits_of(client: &Client, window: &DeviceWindow) -> (std::ops::Range<u64>, Vec<u32>) {
    let values = window.array().to_host(client).unwrap();
    (
        window.window().read(),
        values.into_iter().map(f32::to_bits).collect(),
    )
}

/// `ChannelAffine::subtract` removes a per-channel offset exactly as `x - offset` in f32, and
/// refuses non-finite values and mismatched lengths.
#[test]
fn channel_affine_subtracts_offsets() {
    use dspk_ops::{ChannelAffine, DeviceArray, Stage};
    for_each_runtime(|target, client| {
        let (channels, samples) = (3, 1_001);
        let x: Vec<f32> = (0..channels * samples)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.37 - 150.0)
            .collect();
        let offsets = [12.5f32, -3.25, 1e3];
        let input = DeviceArray::from_host(client, &x, channels, samples).unwrap();
        let output = DeviceArray::empty(client, channels, samples).unwrap();
        let mut stage = ChannelAffine::subtract(client, &offsets).unwrap();
        stage.apply(client, &input, &output).unwrap();
        let out = output.to_host(client).unwrap();
        for (i, (&o, &v)) in out.iter().zip(&x).enumerate() {
            let expected = f64::from(v) - f64::from(offsets[i / samples]);
            assert!(
                (f64::from(o) - expected).abs() <= expected.abs() * 1e-7 + 1e-6,
                "{target}: {i}"
            );
        }
        assert!(ChannelAffine::subtract(client, &[f32::NAN]).is_err());
        assert!(ChannelAffine::new(client, &[1.0], &[0.0, 1.0]).is_err());
        assert!(ChannelAffine::subtract(client, &[]).is_err());
    });
}
