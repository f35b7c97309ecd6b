//! Trace pictures of an envelope: each channel as vertical min-max strokes, one per pixel
//! column, channels stacked top to bottom, their names at the left, a time axis at the bottom
//! and a title line on top.

use std::ops::Range;

use super::axes::{self, INK, LABEL_SCALE, TICK};
use super::{Canvas, Rect, Rgb, font};
use crate::{Columns, Envelope, Error, Result};

/// Background of trace pictures.
pub const PAPER: Rgb = [255, 255, 255];

/// Pixels between the picture's edge and its content.
const MARGIN: i64 = 10;
/// Pixels between a label and what it labels.
const GAP: i64 = 6;
/// Least room left and right of the traces: half the widest time label.
const SIDE: i64 = 48;
/// Scale of the title.
const TITLE_SCALE: usize = 2;
/// Scale of the channel names.
const NAME_SCALE: usize = 1;
/// Least pixels from one channel name's baseline to the next one's.
const NAME_PITCH: f64 = (font::HEIGHT + 3) as f64;
/// The percentile of the deviations that [`robust_spread`] takes.
const SPREAD_PERCENTILE: f64 = 99.0;
/// The part of a channel's spacing that [`Gain::Auto`] gives the robust spread: neighbours'
/// usual extremes keep a fifth of the spacing between them.
const AUTO_FILL: f64 = 0.4;
/// Most time ticks, and the least pixels per tick.
const MAX_TICKS: usize = 12;
const TICK_PITCH: f64 = 60.0;
/// Least pixels between two neighbouring time labels.
const LABEL_GAP: f64 = 16.0;
/// Time units: name, seconds per unit, and the spans (in s) below which the axis uses it.
const UNITS: [(&str, f64, f64); 4] = [
    ("ms", 1e-3, 2.0),
    ("s", 1.0, 1200.0),
    ("min", 60.0, 36_000.0),
    ("h", 3600.0, f64::INFINITY),
];
/// Tick values (in the axis's unit) from 0 while the view's end stays below this; past it they
/// count from the view's start, which the caption gives in seconds.
const ABSOLUTE_BELOW: f64 = 1e4;

/// How the traces' values map to pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gain {
    /// Pixels per unit of the values, the same for every channel.
    PixelsPerUnit(f64),
    /// The gain at which the [`robust_spread`] of the drawn channels is 0.4 of a channel's
    /// spacing: noise stays in its band, large spikes reach into the neighbours'. A view whose
    /// values are all equal (or all NaN) gets 1 pixel per unit.
    Auto,
}

/// What [`render_traces`] draws, and how. [`TraceStyle::new`] gives the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStyle {
    /// Samples per second of the recording: the columns' samples count from its start.
    pub sample_rate: f64,
    /// Height in pixels of the traces' area, which the channels share evenly.
    pub height: u32,
    /// The envelope's channels to draw, top to bottom; all of them where `None`.
    pub channels: Option<Range<usize>>,
    /// One name per envelope channel (not per drawn channel), drawn at the left of its trace;
    /// the channel's index where empty. Where channels are closer than a name's height, only
    /// every few channels are named.
    pub labels: Vec<String>,
    /// The vertical scale.
    pub gain: Gain,
    /// Whether each trace is cut at its band's edges (else it may cross its neighbours').
    pub clip: bool,
    /// The title line (none where empty).
    pub title: String,
    /// Colour of the traces.
    pub colour: Rgb,
}

impl TraceStyle {
    /// The style of a recording sampled at `sample_rate` Hz drawn `height` pixels tall: every
    /// channel, named by index, [`Gain::Auto`], not clipped, no title, dark blue traces.
    #[must_use]
    pub fn new(sample_rate: f64, height: u32) -> Self {
        Self {
            sample_rate,
            height,
            channels: None,
            labels: Vec::new(),
            gain: Gain::Auto,
            clip: false,
            title: String::new(),
            colour: [25, 45, 120],
        }
    }
}

/// Draws `envelope` as traces: channel `c` (the `i`-th drawn) around the row
/// `top + (i + 1/2) * height / channels`, column `k` of the envelope in pixel column `k` of the
/// traces' area as a vertical stroke from its maximum to its minimum. Each channel is centred
/// on the median of its columns' midpoints (an offset does not move it off its band); a
/// stroke reaches at least to the previous column's nearest end, so a trace stays connected;
/// an empty (all-NaN) column draws nothing and breaks the trace. The time axis has ticks in
/// ms, s, min or h as the view's span asks, counted from the recording's start (or from the
/// view's start, given in the caption, where those numbers would be long).
///
/// # Errors
///
/// [`Error::InvalidRequest`] for a sample rate that is not a positive number, a zero height,
/// an empty channel range or one past the envelope's channels, a gain that is not a positive
/// number; [`Error::Shape`] for names that are neither none nor one per channel;
/// [`Error::OverLimit`] for a picture over [`MAX_PIXELS`](super::MAX_PIXELS).
pub fn render_traces(envelope: &Envelope, style: &TraceStyle) -> Result<Canvas> {
    let channels = check(envelope, style)?;
    let layout = Layout::new(envelope, style, channels.clone());
    let plot = layout.plot;
    let mut canvas = Canvas::new(layout.width, layout.height, PAPER)?;
    canvas.text(MARGIN, MARGIN, &style.title, TITLE_SCALE, INK);

    let gain = match style.gain {
        Gain::PixelsPerUnit(gain) => gain,
        Gain::Auto => match robust_spread(envelope, channels.clone())? {
            Some(spread) if spread > 0.0 => AUTO_FILL * layout.spacing / spread,
            _ => 1.0,
        },
    };
    let columns = envelope.columns().len();
    for (i, c) in channels.clone().enumerate() {
        let base = plot.y0 as f64 + (i as f64 + 0.5) * layout.spacing;
        let centre = centre(envelope, c);
        let band = if style.clip {
            let y0 = plot.y0 + (i as f64 * layout.spacing).round() as i64;
            let y1 = plot.y0 + ((i + 1) as f64 * layout.spacing).round() as i64;
            Rect {
                y0,
                y1: y1.max(y0 + 1),
                ..plot
            }
        } else {
            plot
        };
        canvas.clip_to(band);
        // Far-off values are held a billion pixels away: the clip keeps drawing bounded.
        let row = |v: f32| {
            (base - (f64::from(v) - centre) * gain)
                .clamp(-1e9, 1e9)
                .round() as i64
        };
        let mut previous = None;
        for k in 0..columns {
            let Some((lo, hi)) = envelope.get(c, k) else {
                previous = None;
                continue;
            };
            let (top, bottom) = (row(hi), row(lo));
            let (y0, y1) = previous.map_or((top, bottom), |(pt, pb)| (top.min(pb), bottom.max(pt)));
            let x = plot.x0 + k as i64;
            canvas.fill_rect(
                Rect {
                    x0: x,
                    y0,
                    x1: x + 1,
                    y1: y1 + 1,
                },
                style.colour,
            );
            previous = Some((top, bottom));
        }
    }
    canvas.unclip();

    for c in channels.clone().step_by(layout.every) {
        let name = name(style, c);
        let i = c - channels.start;
        let base = plot.y0 as f64 + (i as f64 + 0.5) * layout.spacing;
        let w = font::text_width(&name, NAME_SCALE) as i64;
        let y = base.round() as i64 - (font::HEIGHT * NAME_SCALE / 2) as i64;
        canvas.text(plot.x0 - GAP - w, y, &name, NAME_SCALE, INK);
    }

    time_axis_draw(&mut canvas, envelope.columns(), style.sample_rate, plot);
    Ok(canvas)
}

/// The robust spread of `channels` of `envelope`: the 99th percentile (nearest rank) of the
/// distances of every non-empty column's minimum and maximum from its channel's centre (the
/// median of the channel's column midpoints); `None` when no column has a finite one.
/// [`Gain::Auto`] draws this spread 0.4 of a channel's spacing tall: a gain computed from one
/// view (the whole recording) and given as [`Gain::PixelsPerUnit`] keeps zooms comparable.
///
/// # Errors
///
/// [`Error::InvalidRequest`] for an empty channel range or one past the envelope's channels.
pub fn robust_spread(envelope: &Envelope, channels: Range<usize>) -> Result<Option<f64>> {
    let channels = check_channels(envelope, channels)?;
    let mut distances = Vec::new();
    for c in channels {
        let centre = centre(envelope, c);
        for k in 0..envelope.columns().len() {
            if let Some((lo, hi)) = envelope.get(c, k) {
                for v in [lo, hi] {
                    let d = (f64::from(v) - centre).abs();
                    if d.is_finite() {
                        distances.push(d);
                    }
                }
            }
        }
    }
    Ok(nearest_rank(&mut distances, SPREAD_PERCENTILE))
}

/// The median of channel `c`'s finite column midpoints, 0 where it has none.
fn centre(envelope: &Envelope, c: usize) -> f64 {
    let mut midpoints: Vec<f64> = (0..envelope.columns().len())
        .filter_map(|k| envelope.get(c, k))
        .map(|(lo, hi)| 0.5 * (f64::from(lo) + f64::from(hi)))
        .filter(|m| m.is_finite())
        .collect();
    nearest_rank(&mut midpoints, 50.0).unwrap_or(0.0)
}

/// The `q`-th percentile of `values` by nearest rank (reorders them); `None` when empty.
fn nearest_rank(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let at = ((q / 100.0) * (values.len() - 1) as f64).round() as usize;
    let (_, v, _) = values.select_nth_unstable_by(at, f64::total_cmp);
    Some(*v)
}

/// The drawn channels, once the style is checked against the envelope.
fn check(envelope: &Envelope, style: &TraceStyle) -> Result<Range<usize>> {
    if !(style.sample_rate.is_finite() && style.sample_rate > 0.0) {
        return Err(Error::invalid(
            "traces: sample rate",
            format!("{} Hz is not a positive number", style.sample_rate),
        ));
    }
    if style.height == 0 {
        return Err(Error::invalid("traces: height", "0 pixels"));
    }
    let all = envelope.channels();
    let channels = check_channels(envelope, style.channels.clone().unwrap_or(0..all))?;
    if !style.labels.is_empty() && style.labels.len() != all {
        return Err(Error::Shape {
            what: "traces: labels (one per envelope channel)",
            expected: all,
            actual: style.labels.len(),
        });
    }
    if let Gain::PixelsPerUnit(gain) = style.gain
        && !(gain.is_finite() && gain > 0.0)
    {
        return Err(Error::invalid(
            "traces: gain",
            format!("{gain} pixels per unit is not a positive number"),
        ));
    }
    Ok(channels)
}

/// `channels`, refused when empty or past the envelope's channels.
fn check_channels(envelope: &Envelope, channels: Range<usize>) -> Result<Range<usize>> {
    let all = envelope.channels();
    if channels.start >= channels.end || channels.end > all {
        return Err(Error::invalid(
            "traces: channels",
            format!(
                "channels {}..{} of an envelope of {all} (a non-empty range inside 0..{all})",
                channels.start, channels.end
            ),
        ));
    }
    Ok(channels)
}

/// The name drawn for channel `c`.
fn name(style: &TraceStyle, c: usize) -> String {
    style
        .labels
        .get(c)
        .cloned()
        .unwrap_or_else(|| c.to_string())
}

/// Where everything goes.
struct Layout {
    /// The traces' area: one pixel column per envelope column.
    plot: Rect,
    /// Pixels between neighbouring channels' centres.
    spacing: f64,
    /// Every how many channels one is named.
    every: usize,
    /// The picture's size.
    width: u32,
    height: u32,
}

impl Layout {
    fn new(envelope: &Envelope, style: &TraceStyle, channels: Range<usize>) -> Self {
        let spacing = f64::from(style.height) / channels.len() as f64;
        let every = (NAME_PITCH / spacing).ceil().max(1.0) as usize;
        let widest = channels
            .step_by(every)
            .map(|c| font::text_width(&name(style, c), NAME_SCALE))
            .max()
            .unwrap_or(0) as i64;
        let x0 = (MARGIN + widest + GAP).max(SIDE);
        let y0 = MARGIN + (font::HEIGHT * TITLE_SCALE) as i64 + 2 * GAP;
        let plot = Rect {
            x0,
            y0,
            x1: x0 + envelope.columns().len() as i64,
            y1: y0 + i64::from(style.height),
        };
        let label = (font::HEIGHT * LABEL_SCALE) as i64;
        let bottom = plot.y1 + TICK + GAP + label + GAP + label + MARGIN;
        // Columns are at most MAX_COLUMNS and the height a u32: the sums fit, and the canvas
        // refuses what is too large.
        Self {
            plot,
            spacing,
            every,
            width: u32::try_from(plot.x1 + SIDE).unwrap_or(u32::MAX),
            height: u32::try_from(bottom).unwrap_or(u32::MAX),
        }
    }
}

/// A time axis: its caption and its ticks (times in s, labels in the caption's unit).
#[derive(Debug, PartialEq)]
struct TimeAxis {
    caption: String,
    ticks: Vec<(f64, String)>,
}

/// The axis of the times `t0..t1` (s) drawn `width` pixels wide: the unit from the span, as
/// many 1-2-5 ticks as fit (at most one per `TICK_PITCH` pixels) with their labels apart.
fn time_axis(t0: f64, t1: f64, width: f64) -> TimeAxis {
    let span = t1 - t0;
    let (unit, per, _) = UNITS
        .into_iter()
        .find(|u| span < u.2)
        .unwrap_or(UNITS[UNITS.len() - 1]);
    let origin = if t1 / per < ABSOLUTE_BELOW { 0.0 } else { t0 };
    let (lo, hi) = ((t0 - origin) / per, (t1 - origin) / per);
    let most = ((width / TICK_PITCH) as usize).clamp(1, MAX_TICKS);
    let fits = |ticks: &Vec<(f64, String)>| {
        ticks.windows(2).all(|w| {
            let apart = (w[1].0 - w[0].0) / (hi - lo) * width;
            let half = |s: &str| font::text_width(s, LABEL_SCALE) as f64 / 2.0;
            apart >= half(&w[0].1) + half(&w[1].1) + LABEL_GAP
        })
    };
    let ticks = (1..=most)
        .rev()
        .map(|n| axes::ticks(lo, hi, n))
        .find(fits)
        .unwrap_or_default();
    let caption = if origin == 0.0 {
        format!("time ({unit})")
    } else {
        format!("time ({unit}) from {origin:.4} s")
    };
    TimeAxis {
        caption,
        ticks: ticks
            .into_iter()
            .map(|(v, label)| (origin + v * per, label))
            .collect(),
    }
}

/// The column that holds the sample nearest time `t` (s), the first or last where `t` is
/// outside the columns.
fn column_at(columns: &Columns, sample_rate: f64, t: f64) -> usize {
    let range = columns.samples();
    // `as` saturates (and takes NaN to 0); the clamp brings the sample into the columns.
    let sample = ((t * sample_rate).round() as u64).clamp(range.start, range.end - 1);
    columns.column_of(sample).unwrap_or(0)
}

/// The time axis under `plot`: a line, ticks at their columns, labels and the caption.
fn time_axis_draw(canvas: &mut Canvas, columns: &Columns, sample_rate: f64, plot: Rect) {
    let range = columns.samples();
    let (t0, t1) = (
        range.start as f64 / sample_rate,
        range.end as f64 / sample_rate,
    );
    let axis = time_axis(t0, t1, (plot.x1 - plot.x0) as f64);
    let y = plot.y1 as f64;
    canvas.line([plot.x0 as f64, y], [(plot.x1 - 1) as f64, y], INK);
    let label_y = plot.y1 + TICK + GAP;
    for (t, label) in &axis.ticks {
        let x = plot.x0 + column_at(columns, sample_rate, *t) as i64;
        canvas.line([x as f64, y], [x as f64, y + TICK as f64], INK);
        let w = font::text_width(label, LABEL_SCALE) as i64;
        canvas.text(x - w / 2, label_y, label, LABEL_SCALE, INK);
    }
    let w = font::text_width(&axis.caption, LABEL_SCALE) as i64;
    let x = ((plot.x0 + plot.x1 - w) / 2).max(MARGIN);
    let caption_y = label_y + (font::HEIGHT * LABEL_SCALE) as i64 + GAP;
    canvas.text(x, caption_y, &axis.caption, LABEL_SCALE, INK);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Order;

    /// 4 channels of 400 samples at 1 kHz in 200 columns of 2 samples; each column holds -1 and
    /// +1 (centre 0), channel 2 has a spike of -40 at sample 201 (column 100), and every
    /// channel is NaN in column 30.
    fn planted() -> Envelope {
        let (channels, samples) = (4, 400);
        let mut values = vec![0.0_f32; channels * samples];
        for c in 0..channels {
            for s in 0..samples {
                values[c * samples + s] = if s % 2 == 0 { -1.0 } else { 1.0 };
            }
            values[c * samples + 60] = f32::NAN;
            values[c * samples + 61] = f32::NAN;
        }
        values[2 * samples + 201] = -40.0;
        let columns = Columns::even(0..samples as u64, 200).unwrap();
        Envelope::from_samples(&values, Order::ChannelMajor, channels, columns).unwrap()
    }

    /// 50 pixels per channel, 1 pixel per unit.
    fn style() -> TraceStyle {
        TraceStyle {
            gain: Gain::PixelsPerUnit(1.0),
            title: "planted spike".into(),
            ..TraceStyle::new(1000.0, 200)
        }
    }

    fn plot_of(envelope: &Envelope, style: &TraceStyle) -> Rect {
        Layout::new(envelope, style, 0..envelope.channels()).plot
    }

    fn inked(canvas: &Canvas, x: i64, y: i64) -> bool {
        canvas.get(x, y) != Some(PAPER)
    }

    #[test]
    fn a_planted_spike_is_inked_at_its_column_and_height() {
        let envelope = planted();
        let style = style();
        let canvas = render_traces(&envelope, &style).unwrap();
        let plot = plot_of(&envelope, &style);
        assert_eq!(
            (canvas.width(), canvas.height()),
            (u32::try_from(plot.x1 + SIDE).unwrap(), canvas.height())
        );
        // Channel 2's centre row is plot.y0 + 125; its column 100 holds -1 and -40 (the
        // spike replaced the +1), so it spans rows 1 to 40 below the centre.
        let (x, base) = (plot.x0 + 100, plot.y0 + 125);
        for y in base + 1..=base + 40 {
            assert!(inked(&canvas, x, y), "spike column at row {y}");
        }
        assert!(!inked(&canvas, x, base) && !inked(&canvas, x, base + 41));
        assert!(!inked(&canvas, x - 1, base + 40) && !inked(&canvas, x + 1, base + 40));
        // Every other column of every channel spans exactly its centre row +- 1.
        for c in 0..4 {
            let base = plot.y0 + 25 + 50 * c;
            for k in [0, 29, 31, 99, 101, 199] {
                let x = plot.x0 + k;
                for y in base - 1..=base + 1 {
                    assert!(inked(&canvas, x, y), "channel {c} column {k} row {y}");
                }
                assert!(!inked(&canvas, x, base - 2) && !inked(&canvas, x, base + 2));
            }
        }

        // Clipped to its band (rows 100..150), the spike stops at the band's edge.
        let clipped = render_traces(
            &envelope,
            &TraceStyle {
                clip: true,
                ..style.clone()
            },
        )
        .unwrap();
        assert!(inked(&clipped, x, plot.y0 + 149));
        assert!(!inked(&clipped, x, plot.y0 + 150));
        assert!(!inked(&clipped, x, base + 40));

        // The spread is 1 (the one spike is under the 99th percentile), so the automatic gain
        // puts it 0.4 of a spacing (20 pixels) away.
        assert_eq!(robust_spread(&envelope, 0..4).unwrap(), Some(1.0));
        let auto = TraceStyle {
            gain: Gain::Auto,
            ..style.clone()
        };
        let fixed = TraceStyle {
            gain: Gain::PixelsPerUnit(20.0),
            ..style
        };
        assert_eq!(
            render_traces(&envelope, &auto).unwrap().pixels(),
            render_traces(&envelope, &fixed).unwrap().pixels()
        );
    }

    #[test]
    fn an_all_nan_column_stays_background_and_breaks_the_trace() {
        let envelope = planted();
        assert_eq!(envelope.get(1, 30), None);
        let style = style();
        let canvas = render_traces(&envelope, &style).unwrap();
        let plot = plot_of(&envelope, &style);
        for y in plot.y0..plot.y1 {
            assert!(!inked(&canvas, plot.x0 + 30, y), "row {y}");
        }
        assert!(inked(&canvas, plot.x0 + 29, plot.y0 + 25));
        assert!(inked(&canvas, plot.x0 + 31, plot.y0 + 25));
    }

    #[test]
    fn names_stand_left_of_their_channels() {
        let envelope = planted();
        let style = TraceStyle {
            labels: ["A", "B", "C", "D"].map(String::from).to_vec(),
            ..style()
        };
        let canvas = render_traces(&envelope, &style).unwrap();
        let plot = plot_of(&envelope, &style);
        for c in 0..4 {
            let base = plot.y0 + 25 + 50 * c;
            let ink = (plot.x0 - GAP - 6..plot.x0 - GAP)
                .flat_map(|x| (base - 4..=base + 4).map(move |y| (x, y)))
                .filter(|&(x, y)| inked(&canvas, x, y))
                .count();
            assert!(ink > 5, "channel {c}'s name: {ink} pixels");
        }
        // 384 channels in 384 pixels: one name every 10 channels at least 10 pixels apart.
        let many = Layout::new(&envelope, &TraceStyle::new(1000.0, 384), 0..384);
        assert_eq!(many.every, 10);
        assert!(many.spacing * many.every as f64 >= NAME_PITCH);
    }

    fn values(axis: &TimeAxis) -> Vec<f64> {
        axis.ticks.iter().map(|t| t.0).collect()
    }

    fn labels(axis: &TimeAxis) -> Vec<&str> {
        axis.ticks.iter().map(|t| t.1.as_str()).collect()
    }

    #[test]
    fn the_time_axis_picks_units_and_ticks_for_the_span() {
        let ms = time_axis(0.0, 0.1, 1000.0);
        assert_eq!(ms.caption, "time (ms)");
        assert_eq!(
            labels(&ms),
            [
                "0", "10", "20", "30", "40", "50", "60", "70", "80", "90", "100"
            ]
        );
        let s = time_axis(0.0, 10.0, 1000.0);
        assert_eq!(s.caption, "time (s)");
        assert_eq!(values(&s), (0..=10).map(f64::from).collect::<Vec<_>>());
        let hour = time_axis(0.0, 3600.0, 1000.0);
        assert_eq!(hour.caption, "time (min)");
        assert_eq!(labels(&hour), ["0", "10", "20", "30", "40", "50", "60"]);
        assert_eq!(values(&hour)[1], 600.0);
        // Narrow: at most one tick per 60 pixels.
        let narrow = time_axis(0.0, 3600.0, 200.0);
        assert_eq!(labels(&narrow), ["0", "50"]);
        // A 100 ms view half an hour in counts from its start, which the caption gives.
        let late = time_axis(1800.25, 1800.35, 1000.0);
        assert_eq!(late.caption, "time (ms) from 1800.2500 s");
        assert_eq!(labels(&late).first(), Some(&"0"));
        assert_eq!(labels(&late).last(), Some(&"100"));
        assert!((values(&late)[1] - 1800.26).abs() < 1e-9);
        // A 10 s view at 1000 s keeps absolute seconds.
        let ten = time_axis(1000.0, 1010.0, 1000.0);
        assert_eq!(ten.caption, "time (s)");
        assert_eq!(labels(&ten)[0], "1000");
        // Ticks fall in the columns holding their instants.
        let columns = Columns::even(0..30_000, 1000).unwrap();
        assert_eq!(column_at(&columns, 30_000.0, 0.5), 500);
        assert_eq!(column_at(&columns, 30_000.0, 1.0), 999);
        assert_eq!(column_at(&columns, 30_000.0, -1.0), 0);
    }

    #[test]
    fn bad_options_are_refused() {
        let envelope = planted();
        let bad = [
            TraceStyle::new(1000.0, 0),
            TraceStyle::new(0.0, 100),
            TraceStyle::new(f64::NAN, 100),
            TraceStyle {
                channels: Some(2..2),
                ..style()
            },
            TraceStyle {
                channels: Some(3..5),
                ..style()
            },
            TraceStyle {
                gain: Gain::PixelsPerUnit(-1.0),
                ..style()
            },
            TraceStyle {
                gain: Gain::PixelsPerUnit(f64::INFINITY),
                ..style()
            },
        ];
        for style in &bad {
            assert!(
                matches!(
                    render_traces(&envelope, style),
                    Err(Error::InvalidRequest { .. })
                ),
                "{style:?}"
            );
        }
        let names = TraceStyle {
            labels: vec!["only one".into()],
            ..style()
        };
        assert!(matches!(
            render_traces(&envelope, &names),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            render_traces(&envelope, &TraceStyle::new(1000.0, u32::MAX)),
            Err(Error::OverLimit { .. })
        ));
        // A sub-range draws only its channels: 2 channels share the height.
        let two = TraceStyle {
            channels: Some(1..3),
            ..style()
        };
        let canvas = render_traces(&envelope, &two).unwrap();
        let plot = Layout::new(&envelope, &two, 1..3).plot;
        // Channel 2 (second drawn) centres at row 150; its spike reaches 40 rows down.
        assert!(inked(&canvas, plot.x0 + 100, plot.y0 + 190));
    }

    #[test]
    fn flat_and_empty_views_draw() {
        let columns = Columns::even(0..10, 5).unwrap();
        let flat =
            Envelope::from_samples(&[2.0; 20], Order::Interleaved, 2, columns.clone()).unwrap();
        assert_eq!(robust_spread(&flat, 0..2).unwrap(), Some(0.0));
        assert!(robust_spread(&flat, 1..3).is_err());
        let canvas = render_traces(&flat, &TraceStyle::new(1.0, 20)).unwrap();
        let plot = plot_of(&flat, &TraceStyle::new(1.0, 20));
        assert!(inked(&canvas, plot.x0, plot.y0 + 5));
        let nan = Envelope::from_samples(&[f32::NAN; 20], Order::Interleaved, 2, columns).unwrap();
        assert_eq!(robust_spread(&nan, 0..2).unwrap(), None);
        let canvas = render_traces(&nan, &TraceStyle::new(1.0, 20)).unwrap();
        for y in plot.y0..plot.y1 {
            for x in plot.x0..plot.x1 {
                assert!(!inked(&canvas, x, y));
            }
        }
    }
}
