//! A one-picture PNG summary of a sort, written beside its Phy folder: the drift map (every
//! kept spike at its time and depth, grey by amplitude, with the drift estimate's block traces),
//! the units' positions on the probe, and the largest units' templates, under a title line with
//! the unit, good-unit and spike counts.
//!
//! Drawing is [`dspk_view::picture`]'s (an RGB canvas with lines, discs and rectangles, text
//! in a 5 x 7 bitmap font, axes with nice ticks, PNG encoding); this module holds the panels.
//! The picture is a pure function of the input: the same sorting gives the same bytes.

mod panels;

use std::path::Path;
use std::sync::Arc;

use crate::export::sorting::Sorting;
use crate::{Error, Result};

/// What the summary picture shows.
#[derive(Debug, Clone)]
pub struct SummaryInput<'a> {
    /// The finished sort. Spike depths (µm) for the drift map are the y of
    /// `sorting.spike_positions`.
    pub sorting: &'a Sorting,
    /// `[x, y]` µm of each of the sorting's channels.
    pub channel_positions: &'a [[f32; 2]],
    /// The drift estimate to overlay on the drift map, if the sort estimated one.
    pub drift: Option<DriftTrace<'a>>,
    /// The first words of the title line (the counts follow it).
    pub title: String,
}

/// The drift estimate of `docs/KILOSORT4.md` §3: the shift of each block in each batch.
#[derive(Debug, Clone, Copy)]
pub struct DriftTrace<'a> {
    /// `[batches, blocks]` row-major shifts in µm (Kilosort's `dshift`; about minus the units'
    /// displacement).
    pub dshift: &'a [f64],
    /// Blocks per batch (`2 * nblocks - 1`).
    pub blocks: usize,
    /// Duration of one batch in seconds.
    pub batch_seconds: f64,
}

/// The summary picture as PNG bytes (8-bit RGB, 1600 x 1000).
///
/// Panels: the drift map (each kept spike a dot at its time in s and depth in µm, darker for a
/// larger amplitude on a log scale clipped at the amplitudes' 1st and 99th percentiles; the
/// drift trace of each block drawn at the block's centre depth minus its shift), the probe
/// (channels as grey squares, each unit as a circle at its spikes' mean position, filled for
/// good units and a ring for mua) and up to 8 templates (the units with the largest template
/// peak-to-peak, each on its 4 largest channels). Spikes with a non-finite depth or a NaN
/// amplitude, non-finite positions and non-finite template samples are left out; an empty
/// sorting gives empty axes.
///
/// # Errors
///
/// [`Error::Input`] when the sorting's fields disagree in length, a spike's unit is not one of
/// the sorting's units, the sample rate is not positive, the channel positions do not match the
/// sorting's channels, or the drift trace is malformed.
pub fn render_summary(input: &SummaryInput) -> Result<Vec<u8>> {
    check(input)?;
    let canvas = panels::draw(input).map_err(|e| Error::Input {
        what: "summary picture",
        reason: e.to_string(),
    })?;
    Ok(canvas.encode_png())
}

/// Renders the summary ([`render_summary`]) and writes it to `path`.
///
/// # Errors
///
/// Those of [`render_summary`], and [`Error::Io`] when the file cannot be written.
pub fn write_summary(path: &Path, input: &SummaryInput) -> Result<()> {
    let bytes = render_summary(input)?;
    std::fs::write(path, bytes).map_err(|e| {
        Error::Io(dspk_io::Error::Io {
            path: path.to_path_buf(),
            operation: "write the summary picture".into(),
            source: Arc::new(e),
        })
    })
}

fn input_error(reason: String) -> Error {
    Error::Input {
        what: "summary input",
        reason,
    }
}

/// Checks everything the panels index or divide by.
fn check(input: &SummaryInput) -> Result<()> {
    let s = input.sorting;
    if !(s.sample_rate.is_finite() && s.sample_rate > 0.0) {
        return Err(input_error(format!(
            "the sorting's sample rate {} is not a positive number",
            s.sample_rate
        )));
    }
    let n = s.num_spikes();
    for (name, len) in [
        ("spike_clusters", s.spike_clusters.len()),
        ("amplitudes", s.amplitudes.len()),
        ("spike_positions", s.spike_positions.len()),
    ] {
        if len != n {
            return Err(input_error(format!(
                "the sorting has {n} spike times but {len} {name}"
            )));
        }
    }
    let units = s.num_units();
    if let Some((i, &u)) = s
        .spike_clusters
        .iter()
        .enumerate()
        .find(|&(_, &u)| u as usize >= units)
    {
        return Err(input_error(format!(
            "spike {i} belongs to unit {u} but the sorting has {units} units (labels)"
        )));
    }
    if input.channel_positions.len() != s.channels {
        return Err(input_error(format!(
            "{} channel positions for a sorting of {} channels",
            input.channel_positions.len(),
            s.channels
        )));
    }
    let want = units
        .checked_mul(s.nt)
        .and_then(|v| v.checked_mul(s.channels));
    if want != Some(s.templates.len()) {
        return Err(input_error(format!(
            "templates hold {} values, not units {units} x nt {} x channels {}",
            s.templates.len(),
            s.nt,
            s.channels
        )));
    }
    if let Some(d) = &input.drift {
        if d.blocks == 0 || d.dshift.len() % d.blocks != 0 {
            return Err(input_error(format!(
                "the drift trace has {} shifts, not a whole number of batches of {} blocks",
                d.dshift.len(),
                d.blocks
            )));
        }
        if !(d.batch_seconds.is_finite() && d.batch_seconds > 0.0) {
            return Err(input_error(format!(
                "the drift trace's batch duration {} s is not a positive number",
                d.batch_seconds
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::panels::{DRIFT, HEIGHT, PAPER, WIDTH};
    use super::*;
    use crate::export::sorting::UnitLabel;

    /// Decodes PNG bytes into (width, height, RGB pixels).
    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().expect("PNG header");
        let size = reader.output_buffer_size().expect("buffer size");
        let mut buf = vec![0; size];
        let info = reader.next_frame(&mut buf).expect("PNG frame");
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn pixel(pixels: &[u8], x: i64, y: i64) -> [u8; 3] {
        let i = 3 * (y as usize * WIDTH as usize + x as usize);
        [pixels[i], pixels[i + 1], pixels[i + 2]]
    }

    /// Four channels at depths 0 and 1000 µm; units 0 (good) and 1 (mua) with 9-sample, 4-channel
    /// templates; 10 s at 1 kHz.
    fn sorting(spikes: &[(i64, u32, f32, [f32; 2])]) -> Sorting {
        let (nt, channels) = (9, 4);
        let templates = (0..2 * nt * channels)
            .map(|i| ((i % 7) as f32 - 3.0) * if i < nt * channels { 1.0 } else { 2.0 })
            .collect();
        Sorting {
            sample_rate: 1000.0,
            num_samples: 10_000,
            channels,
            nt,
            nt0min: 4,
            spike_times: spikes.iter().map(|s| s.0).collect(),
            spike_clusters: spikes.iter().map(|s| s.1).collect(),
            spike_templates: spikes.iter().map(|s| s.1).collect(),
            amplitudes: spikes.iter().map(|s| s.2).collect(),
            spike_positions: spikes.iter().map(|s| s.3).collect(),
            templates,
            labels: vec![UnitLabel::Good, UnitLabel::Mua],
            ..Sorting::default()
        }
    }

    const CHANNELS: [[f32; 2]; 4] = [[0.0, 0.0], [32.0, 0.0], [0.0, 1000.0], [32.0, 1000.0]];

    fn input(sorting: &Sorting) -> SummaryInput<'_> {
        SummaryInput {
            sorting,
            channel_positions: &CHANNELS,
            drift: None,
            title: "test sort".into(),
        }
    }

    #[test]
    fn png_decodes_to_the_stated_size_and_repeats_byte_for_byte() {
        let spikes: Vec<_> = (0..500)
            .map(|i| {
                let depth = (i * 37 % 1000) as f32;
                (i * 19, (i % 2) as u32, 1.0 + (i % 13) as f32, [16.0, depth])
            })
            .collect();
        let s = sorting(&spikes);
        let dshift: Vec<f64> = (0..20 * 3).map(|i| (i as f64 * 0.3).sin() * 20.0).collect();
        let mut inp = input(&s);
        inp.drift = Some(DriftTrace {
            dshift: &dshift,
            blocks: 3,
            batch_seconds: 0.5,
        });
        let a = render_summary(&inp).unwrap();
        let b = render_summary(&inp).unwrap();
        assert_eq!(a, b);
        let (w, h, pixels) = decode(&a);
        assert_eq!((w, h), (WIDTH, HEIGHT));
        assert_eq!(pixels.len(), 3 * (WIDTH * HEIGHT) as usize);
        let coloured = pixels
            .chunks(3)
            .filter(|p| p[0] != p[1] || p[1] != p[2])
            .count();
        assert!(
            coloured > 500,
            "units, traces and templates are in colour: {coloured}"
        );

        let path = std::env::temp_dir().join(format!("dspk_summary_{}.png", std::process::id()));
        write_summary(&path, &inp).unwrap();
        let written = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written, a);
    }

    #[test]
    fn a_planted_spike_darkens_its_place_and_nan_spikes_draw_nothing() {
        // Depths span 0..1000 µm (channels) and time 0..10 s, so (5 s, 500 µm) is the middle
        // of the drift map's data area.
        let planted = (5000, 0, 10.0, [16.0, 500.0]);
        let nan_depth = (2500, 1, 10.0, [16.0, f32::NAN]);
        let nan_amplitude = (7500, 1, f32::NAN, [16.0, 200.0]);
        let with = sorting(&[nan_depth, planted, nan_amplitude]);
        let mut hidden = planted;
        hidden.2 = f32::NAN;
        let without = sorting(&[nan_depth, hidden, nan_amplitude]);
        let (_, _, a) = decode(&render_summary(&input(&with)).unwrap());
        let (_, _, b) = decode(&render_summary(&input(&without)).unwrap());

        let cx = ((DRIFT.x0 + 3 + DRIFT.x1 - 4) as f64 / 2.0).round() as i64;
        let cy = ((DRIFT.y0 + 3 + DRIFT.y1 - 4) as f64 / 2.0).round() as i64;
        let mut changed = Vec::new();
        for y in DRIFT.y0 + 1..DRIFT.y1 - 1 {
            for x in DRIFT.x0 + 1..DRIFT.x1 - 1 {
                assert_eq!(pixel(&b, x, y), PAPER, "NaN spikes drew at {x},{y}");
                if pixel(&a, x, y) != pixel(&b, x, y) {
                    changed.push((x, y));
                }
            }
        }
        assert!(!changed.is_empty());
        for &(x, y) in &changed {
            assert!(
                (x - cx).abs() <= 2 && (y - cy).abs() <= 2,
                "{x},{y} vs {cx},{cy}"
            );
            assert!(pixel(&a, x, y)[0] < 60, "the only amplitude is the darkest");
        }
    }

    #[test]
    fn empty_sorting_draws_empty_axes() {
        let empty = Sorting {
            sample_rate: 30_000.0,
            ..Sorting::default()
        };
        let inp = SummaryInput {
            sorting: &empty,
            channel_positions: &[],
            drift: None,
            title: String::new(),
        };
        let (w, h, pixels) = decode(&render_summary(&inp).unwrap());
        assert_eq!((w, h), (WIDTH, HEIGHT));
        // The drift map's frame is drawn, its inside is blank.
        assert_ne!(pixel(&pixels, DRIFT.x0, DRIFT.y0 + 10), PAPER);
        assert_eq!(
            pixel(
                &pixels,
                (DRIFT.x0 + DRIFT.x1) / 2,
                (DRIFT.y0 + DRIFT.y1) / 2
            ),
            PAPER
        );
    }

    #[test]
    fn inconsistent_inputs_are_errors() {
        let good = sorting(&[(10, 0, 1.0, [0.0, 0.0])]);
        assert!(render_summary(&input(&good)).is_ok());
        let mut s = good.clone();
        s.sample_rate = 0.0;
        let mut bad = vec![s];
        let mut s = good.clone();
        s.amplitudes.clear();
        bad.push(s);
        let mut s = good.clone();
        s.spike_clusters[0] = 2;
        bad.push(s);
        let mut s = good.clone();
        s.templates.pop();
        bad.push(s);
        for s in &bad {
            assert!(matches!(
                render_summary(&input(s)),
                Err(Error::Input { .. })
            ));
        }
        let mut inp = input(&good);
        inp.channel_positions = &CHANNELS[..3];
        assert!(matches!(render_summary(&inp), Err(Error::Input { .. })));
        let shifts = [0.0; 5];
        for (blocks, seconds) in [(2, 1.0), (0, 1.0), (5, f64::NAN)] {
            let mut inp = input(&good);
            inp.drift = Some(DriftTrace {
                dshift: &shifts,
                blocks,
                batch_seconds: seconds,
            });
            assert!(matches!(render_summary(&inp), Err(Error::Input { .. })));
        }
        let path = std::env::temp_dir()
            .join("dspk_no_such_dir")
            .join("x")
            .join("summary.png");
        assert!(matches!(
            write_summary(&path, &input(&good)),
            Err(Error::Io(_))
        ));
    }
}
