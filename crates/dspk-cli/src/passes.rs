//! Streamed passes over a recording and how fast they went, as the `detect` example prints
//! them: each pass, then all of them together (a program that fits a stage on a first pass
//! reads the recording twice, and its speed is that of both).

use dspk::ops::WindowStream;

use crate::describe::{human_bytes, human_rate};

/// One pass of a `WindowStream` over a recording: its windows, the bytes it uploaded and the
/// seconds it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Pass {
    /// What the pass did, e.g. `"whitening fit"`.
    pub name: String,
    /// Windows streamed.
    pub windows: usize,
    /// Bytes uploaded to the device.
    pub bytes: u64,
    /// Seconds taken.
    pub seconds: f64,
}

impl Pass {
    /// The pass `name` of `stream`, finished, which took `seconds`: its windows and the bytes
    /// it uploaded.
    #[must_use]
    pub fn of(name: &str, stream: &WindowStream, seconds: f64) -> Self {
        Self {
            name: name.to_string(),
            windows: stream.schedule().len(),
            bytes: stream.uploaded_bytes(),
            seconds,
        }
    }

    /// `passes` one after another, named `name`: their windows, bytes and seconds summed.
    #[must_use]
    pub fn total(name: &str, passes: &[Pass]) -> Self {
        Self {
            name: name.to_string(),
            windows: passes.iter().map(|p| p.windows).sum(),
            bytes: passes.iter().map(|p| p.bytes).sum(),
            seconds: passes.iter().map(|p| p.seconds).sum(),
        }
    }

    /// `"3 windows in 1.15 s (2.6 windows/s, 5.13 MB/s, 2.6x real time)"`, for a pass over a
    /// recording of `recording_seconds`.
    #[must_use]
    pub fn describe(&self, recording_seconds: f64) -> String {
        let seconds = self.seconds.max(f64::MIN_POSITIVE);
        format!(
            "{} windows in {:.2} s ({:.1} windows/s, {}, {:.1}x real time)",
            self.windows,
            self.seconds,
            self.windows as f64 / seconds,
            human_rate(self.bytes as f64, self.seconds),
            recording_seconds / seconds
        )
    }
}

/// What `detect` prints for `passes` over a recording of `recording_seconds`: a `speed:` line
/// per pass and a `total` line ([`Pass::describe`]), then a `moved:` line with the bytes of
/// each pass and their sum. Labels take 11 columns; every line ends with a newline.
#[must_use]
pub fn speed_report(passes: &[Pass], recording_seconds: f64) -> String {
    let total = Pass::total("total", passes);
    let width = passes.iter().map(|p| p.name.len()).max().unwrap_or(0);
    let mut report = String::new();
    for (i, pass) in passes.iter().chain([&total]).enumerate() {
        let label = if i == 0 { "speed:" } else { "" };
        let name = &pass.name;
        let line = pass.describe(recording_seconds);
        report.push_str(&format!("{label:<11}{name:<width$}  {line}\n"));
    }
    let each: Vec<String> = (passes.iter())
        .map(|p| format!("{} ({})", human_bytes(p.bytes as f64), p.name))
        .collect();
    report.push_str(&format!(
        "{:<11}{} to the device: {}\n",
        "moved:",
        human_bytes(total.bytes as f64),
        each.join(" + ")
    ));
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(name: &str, windows: usize, bytes: u64, seconds: f64) -> Pass {
        Pass {
            name: name.to_string(),
            windows,
            bytes,
            seconds,
        }
    }

    // Guards detect's speed, which counted only the detection pass: the whitening fit reads
    // the whole recording too, so the total (and its times real time) counts both.
    #[test]
    fn the_report_counts_each_pass_and_their_total() {
        let passes = [
            pass("whitening fit", 3, 5_890_000, 0.75),
            pass("detection", 3, 5_890_000, 1.5),
        ];
        let total = Pass::total("total", &passes);
        assert_eq!(total, pass("total", 6, 11_780_000, 2.25));
        assert_eq!(Pass::total("none", &[]), pass("none", 0, 0, 0.0));
        assert_eq!(
            speed_report(&passes, 3.0),
            "speed:     whitening fit  3 windows in 0.75 s (4.0 windows/s, 7.85 MB/s, 4.0x real time)\n\
             \x20          detection      3 windows in 1.50 s (2.0 windows/s, 3.93 MB/s, 2.0x real time)\n\
             \x20          total          6 windows in 2.25 s (2.7 windows/s, 5.24 MB/s, 1.3x real time)\n\
             moved:     11.78 MB to the device: 5.89 MB (whitening fit) + 5.89 MB (detection)\n"
        );
    }

    // The windows and bytes of a pass are those its stream scheduled and uploaded: two bytes
    // per value of a stored int16 window, four for a source without stored values (the
    // preprocess bench's streamed figure once counted each int16 window's bytes twice).
    #[test]
    fn a_pass_counts_what_its_stream_uploaded() {
        use dspk::ops::{Pipeline, StreamOptions};
        use dspk::{RecordingSource, SampleRate, ScaledOnly, SyntheticRecording};
        use std::sync::Arc;

        let rate = SampleRate::from_hz(30_000).unwrap();
        let source = SyntheticRecording::new(4, 7_000, rate, 3).unwrap();
        let options = StreamOptions {
            window: 3_000,
            extra_halo: 40,
            ..StreamOptions::default()
        };
        dspk::test_util::for_each_runtime(|_, client| {
            let stored: Arc<dyn RecordingSource> = Arc::new(source.clone());
            let scaled: Arc<dyn RecordingSource> = Arc::new(ScaledOnly(source.clone()));
            for (source, bytes_per_value) in [(stored, 2), (scaled, 4)] {
                let mut stream =
                    WindowStream::new(client, source, Pipeline::new(), &options).unwrap();
                let seconds =
                    crate::progress::run_stream(&mut stream, "windows", |_| Ok(())).unwrap();
                let pass = Pass::of("read", &stream, seconds);
                assert_eq!(pass.windows, 3);
                // Three windows, each with a halo of 40 where the recording has one.
                assert_eq!(pass.bytes, 4 * (7_000 + 4 * 40) * bytes_per_value);
                assert_eq!(pass.bytes, stream.uploaded_bytes());
            }
        });
    }
}
