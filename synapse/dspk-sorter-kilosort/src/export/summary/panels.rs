//! The summary's layout and its three panels: the drift map, the probe and the largest
//! templates, under a title line. Inputs reach here already checked by
//! [`super::render_summary`] (lengths agree, unit ids in range, positive sample rate).

use dspk_view::picture::axes::{self, INK, LABEL_SCALE, Scale};
use dspk_view::picture::{Canvas, Rect, Rgb, font};

use super::SummaryInput;
use crate::export::sorting::UnitLabel;

/// Picture width in pixels.
pub(super) const WIDTH: u32 = 1600;
/// Picture height in pixels.
pub(super) const HEIGHT: u32 = 1000;
/// Background colour.
pub(super) const PAPER: Rgb = [255, 255, 255];

/// Top and bottom pixel rows of the three panels' frames.
const TOP: i64 = 90;
const BOTTOM: i64 = 920;
/// The drift map's frame.
pub(super) const DRIFT: Rect = Rect {
    x0: 100,
    y0: TOP,
    x1: 1010,
    y1: BOTTOM,
};
/// The probe's frame (it shares the drift map's depth scale).
const PROBE: Rect = Rect {
    x0: 1070,
    y0: TOP,
    x1: 1210,
    y1: BOTTOM,
};
/// Where the template cells go: `TEMPLATE_COLUMNS x TEMPLATE_ROWS` of them.
const TEMPLATES: Rect = Rect {
    x0: 1250,
    y0: TOP,
    x1: 1590,
    y1: BOTTOM,
};
const TEMPLATE_COLUMNS: i64 = 2;
const TEMPLATE_ROWS: i64 = 4;
/// Gap between template cells in pixels.
const CELL_GAP: i64 = 10;
/// Channels drawn per template.
const TEMPLATE_CHANNELS: usize = 4;
/// Pixels between a frame's border and the data range's ends.
const INSET: f64 = 3.0;

/// Amplitude percentiles (in %) that map to the lightest and the darkest grey.
const AMPLITUDE_CLIP: [f64; 2] = [1.0, 99.0];
/// Grey level of the smallest amplitudes (0 = black).
const LIGHTEST: f64 = 215.0;
/// Colour of the drift estimate's block traces.
const DRIFT_TRACE: Rgb = [215, 48, 31];
/// Colour of channel squares.
const CHANNEL: Rgb = [175, 175, 175];
/// Light grey of template baselines.
const BASELINE: Rgb = [225, 225, 225];
/// Unit colours, by unit id modulo their number.
const UNIT_COLOURS: [Rgb; 9] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [188, 189, 34],
    [23, 190, 207],
];

/// The colour of unit `u`.
fn unit_colour(u: usize) -> Rgb {
    UNIT_COLOURS[u % UNIT_COLOURS.len()]
}

/// Maps the drift map's time range (s) and the shared depth range (µm) onto pixels.
struct Scales {
    time: Scale,
    depth: Scale,
}

/// The drift map's time and depth scales: time from 0 (or the earliest spike) to the end of the
/// recording (or the latest spike), depth over the channels and the spikes, padded by 3 %.
fn scales(input: &SummaryInput) -> Scales {
    let s = input.sorting;
    let fs = s.sample_rate;
    let end = s.num_samples as f64 / fs;
    let times = s.spike_times.iter().map(|&t| t as f64 / fs);
    let (lo, hi) = times.fold((0.0_f64, end), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let depths = input
        .channel_positions
        .iter()
        .map(|p| f64::from(p[1]))
        .chain(s.spike_positions.iter().map(|p| f64::from(p[1])));
    let [dlo, dhi] = axes::padded_range(depths, 0.03, 20.0, [0.0, 1.0]);
    Scales {
        time: Scale {
            lo,
            hi,
            p0: DRIFT.x0 as f64 + INSET,
            p1: (DRIFT.x1 - 1) as f64 - INSET,
        },
        depth: depth_scale(dlo, dhi),
    }
}

fn depth_scale(lo: f64, hi: f64) -> Scale {
    Scale {
        lo,
        hi,
        p0: (BOTTOM - 1) as f64 - INSET,
        p1: TOP as f64 + INSET,
    }
}

/// The inside of `frame` (without its border).
fn inside(frame: Rect) -> Rect {
    Rect {
        x0: frame.x0 + 1,
        y0: frame.y0 + 1,
        x1: frame.x1 - 1,
        y1: frame.y1 - 1,
    }
}

/// Draws the whole summary (only making the canvas could fail, not at this fixed size).
pub(super) fn draw(input: &SummaryInput) -> dspk_view::Result<Canvas> {
    let mut canvas = Canvas::new(WIDTH, HEIGHT, PAPER)?;
    let scales = scales(input);
    title(&mut canvas, input, &scales);
    drift_map(&mut canvas, input, &scales);
    probe(&mut canvas, input, &scales.depth);
    templates(&mut canvas, input);
    Ok(canvas)
}

fn title(canvas: &mut Canvas, input: &SummaryInput, scales: &Scales) {
    let s = input.sorting;
    let good = s.labels.iter().filter(|&&l| l == UnitLabel::Good).count();
    let line = format!(
        "{}   {} UNITS, {} GOOD, {} SPIKES, {:.1} S",
        input.title,
        s.num_units(),
        good,
        s.num_spikes(),
        scales.time.hi - scales.time.lo
    );
    canvas.text(20, 16, &line, 3, INK);
}

/// Every drawable spike as a 2 x 2 dot at (time, depth), darker for larger amplitudes (log
/// scale between the amplitudes' 1st and 99th percentiles), then the drift estimate's traces.
fn drift_map(canvas: &mut Canvas, input: &SummaryInput, scales: &Scales) {
    let s = input.sorting;
    canvas.text(
        DRIFT.x0,
        TOP - 32,
        "DRIFT MAP: SPIKE DEPTH (UM) OVER TIME",
        LABEL_SCALE,
        INK,
    );
    axes::frame(
        canvas,
        DRIFT,
        Some((&scales.time, 10)),
        Some((&scales.depth, 12)),
    );
    let label = "TIME (S)";
    let w = font::text_width(label, LABEL_SCALE) as i64;
    canvas.text(
        (DRIFT.x0 + DRIFT.x1 - w) / 2,
        BOTTOM + 34,
        label,
        LABEL_SCALE,
        INK,
    );

    let [lo, hi] = log_amplitude_clip(&s.amplitudes);
    canvas.clip_to(inside(DRIFT));
    for ((&t, p), &a) in s
        .spike_times
        .iter()
        .zip(&s.spike_positions)
        .zip(&s.amplitudes)
    {
        let depth = f64::from(p[1]);
        let a = f64::from(a);
        if !depth.is_finite() || a.is_nan() {
            continue;
        }
        let level = if a <= 0.0 {
            0.0
        } else if hi > lo {
            ((a.ln() - lo) / (hi - lo)).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let grey = (LIGHTEST * (1.0 - level)).round() as u8;
        let x = scales.time.px(t as f64 / s.sample_rate).round() as i64;
        let y = scales.depth.px(depth).round() as i64;
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            canvas.darken(x + dx, y + dy, [grey; 3]);
        }
    }
    if let Some(drift) = &input.drift {
        drift_traces(canvas, input, drift, scales);
    }
    canvas.unclip();
    let legend = if input.drift.is_some() {
        "GREY: LOG AMPLITUDE.  RED: DRIFT ESTIMATE OF EACH BLOCK"
    } else {
        "GREY: LOG AMPLITUDE"
    };
    canvas.text(DRIFT.x0, BOTTOM + 58, legend, LABEL_SCALE, INK);
}

/// The natural logarithms of the amplitudes' `AMPLITUDE_CLIP` percentiles (nearest rank over
/// the finite positive amplitudes); `[0, 0]` when there is none.
fn log_amplitude_clip(amplitudes: &[f32]) -> [f64; 2] {
    let mut logs: Vec<f64> = amplitudes
        .iter()
        .map(|&a| f64::from(a))
        .filter(|a| a.is_finite() && *a > 0.0)
        .map(f64::ln)
        .collect();
    if logs.is_empty() {
        return [0.0, 0.0];
    }
    logs.sort_by(f64::total_cmp);
    let at = |q: f64| logs[((q / 100.0) * (logs.len() - 1) as f64).round() as usize];
    [at(AMPLITUDE_CLIP[0]), at(AMPLITUDE_CLIP[1])]
}

/// Block `j`'s estimated unit displacement over time: the line through `(batch centre time,
/// centre_j − dshift[b, j])`, where block centres split the channels' depth span evenly
/// (`(j + 1) / (blocks + 1)` of the way up, as Kilosort's overlapping blocks' centres do) and
/// `dshift ≈ −displacement` (`docs/KILOSORT4.md` §3). Non-finite shifts break the line.
fn drift_traces(
    canvas: &mut Canvas,
    input: &SummaryInput,
    drift: &super::DriftTrace,
    scales: &Scales,
) {
    let [ylo, yhi] = axes::padded_range(
        input.channel_positions.iter().map(|p| f64::from(p[1])),
        0.0,
        0.0,
        [scales.depth.lo, scales.depth.hi],
    );
    let blocks = drift.blocks;
    let batches = drift.dshift.len() / blocks;
    for j in 0..blocks {
        let centre = ylo + (j + 1) as f64 * (yhi - ylo) / (blocks + 1) as f64;
        let point = |b: usize| {
            let t = (b as f64 + 0.5) * drift.batch_seconds;
            let y = centre - drift.dshift[b * blocks + j];
            [scales.time.px(t), scales.depth.px(y)]
        };
        for b in 1..batches {
            let (p, q) = (point(b - 1), point(b));
            for dy in [0.0, 1.0] {
                canvas.line([p[0], p[1] + dy], [q[0], q[1] + dy], DRIFT_TRACE);
            }
        }
        if batches == 1 {
            let p = point(0);
            if p.iter().all(|v| v.is_finite()) {
                canvas.disc(p[0].round() as i64, p[1].round() as i64, 2, DRIFT_TRACE);
            }
        }
    }
}

/// Channel positions as grey squares; each unit with a finite spike position as a circle in
/// its colour at its spikes' mean position, filled for good units and a ring for mua.
fn probe(canvas: &mut Canvas, input: &SummaryInput, depth: &Scale) {
    let s = input.sorting;
    let mut sums = vec![[0.0_f64; 3]; s.num_units()];
    for (&u, p) in s.spike_clusters.iter().zip(&s.spike_positions) {
        let (x, y) = (f64::from(p[0]), f64::from(p[1]));
        if x.is_finite() && y.is_finite() {
            let m = &mut sums[u as usize];
            *m = [m[0] + x, m[1] + y, m[2] + 1.0];
        }
    }
    let means: Vec<Option<[f64; 2]>> = sums
        .iter()
        .map(|m| (m[2] > 0.0).then(|| [m[0] / m[2], m[1] / m[2]]))
        .collect();
    let xs = input
        .channel_positions
        .iter()
        .map(|p| f64::from(p[0]))
        .chain(means.iter().flatten().map(|m| m[0]));
    let [xlo, xhi] = axes::padded_range(xs, 0.15, 40.0, [0.0, 1.0]);
    let x = Scale {
        lo: xlo,
        hi: xhi,
        p0: PROBE.x0 as f64 + INSET,
        p1: (PROBE.x1 - 1) as f64 - INSET,
    };

    canvas.text(PROBE.x0, TOP - 32, "PROBE", LABEL_SCALE, INK);
    axes::frame(canvas, PROBE, Some((&x, 3)), None);
    canvas.text(PROBE.x0, BOTTOM + 34, "X (UM)", LABEL_SCALE, INK);
    canvas.text(PROBE.x0, BOTTOM + 58, "FILLED: GOOD", 1, INK);
    canvas.text(PROBE.x0, BOTTOM + 68, "RING: MUA", 1, INK);

    canvas.clip_to(inside(PROBE));
    for p in input.channel_positions {
        let (cx, cy) = (f64::from(p[0]), f64::from(p[1]));
        if cx.is_finite() && cy.is_finite() {
            let (px, py) = (x.px(cx).round() as i64, depth.px(cy).round() as i64);
            let square = Rect {
                x0: px - 2,
                y0: py - 2,
                x1: px + 2,
                y1: py + 2,
            };
            canvas.fill_rect(square, CHANNEL);
        }
    }
    for (u, (mean, label)) in means.iter().zip(&s.labels).enumerate() {
        let Some([mx, my]) = mean else { continue };
        let (px, py) = (x.px(*mx).round() as i64, depth.px(*my).round() as i64);
        match label {
            UnitLabel::Good => canvas.disc(px, py, 5, unit_colour(u)),
            UnitLabel::Mua => canvas.ring(px, py, 5, 2, unit_colour(u)),
        }
    }
    canvas.unclip();
}

/// Peak-to-peak of each channel of unit `u`'s template over its finite samples (`None` where
/// a channel has none).
fn channel_ptp(templates: &[f32], u: usize, nt: usize, channels: usize) -> Vec<Option<f64>> {
    let unit = &templates[u * nt * channels..(u + 1) * nt * channels];
    (0..channels)
        .map(|c| {
            let values = (0..nt)
                .map(|t| f64::from(unit[t * channels + c]))
                .filter(|v| v.is_finite());
            values
                .fold(None, |acc: Option<[f64; 2]>, v| {
                    Some(acc.map_or([v, v], |[lo, hi]| [lo.min(v), hi.max(v)]))
                })
                .map(|[lo, hi]| hi - lo)
        })
        .collect()
}

/// Up to 8 units with the largest template peak-to-peak (ties: lower id first), each in a cell
/// with its `TEMPLATE_CHANNELS` largest channels as traces, the highest channel on top.
fn templates(canvas: &mut Canvas, input: &SummaryInput) {
    let s = input.sorting;
    canvas.text(
        TEMPLATES.x0,
        TOP - 32,
        "LARGEST TEMPLATES",
        LABEL_SCALE,
        INK,
    );
    let (nt, channels) = (s.nt, s.channels);
    let mut ranked: Vec<(usize, f64, Vec<Option<f64>>)> = Vec::new();
    if nt > 0 && channels > 0 {
        for u in 0..s.num_units() {
            let ptp = channel_ptp(&s.templates, u, nt, channels);
            let size = ptp.iter().flatten().copied().fold(0.0_f64, f64::max);
            if size > 0.0 {
                ranked.push((u, size, ptp));
            }
        }
    }
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if ranked.is_empty() {
        canvas.text(TEMPLATES.x0, TOP + 10, "NO TEMPLATES", LABEL_SCALE, INK);
        return;
    }
    let cell_w =
        (TEMPLATES.x1 - TEMPLATES.x0 - (TEMPLATE_COLUMNS - 1) * CELL_GAP) / TEMPLATE_COLUMNS;
    let cell_h = (TEMPLATES.y1 - TEMPLATES.y0 - (TEMPLATE_ROWS - 1) * CELL_GAP) / TEMPLATE_ROWS;
    let cells = (TEMPLATE_COLUMNS * TEMPLATE_ROWS) as usize;
    for (k, (u, size, ptp)) in ranked.iter().take(cells).enumerate() {
        let (col, row) = (k as i64 % TEMPLATE_COLUMNS, k as i64 / TEMPLATE_COLUMNS);
        let x0 = TEMPLATES.x0 + col * (cell_w + CELL_GAP);
        let y0 = TEMPLATES.y0 + row * (cell_h + CELL_GAP);
        let cell = Rect {
            x0,
            y0,
            x1: x0 + cell_w,
            y1: y0 + cell_h,
        };
        template_cell(canvas, input, cell, *u, *size, ptp);
    }
}

fn template_cell(
    canvas: &mut Canvas,
    input: &SummaryInput,
    cell: Rect,
    u: usize,
    size: f64,
    ptp: &[Option<f64>],
) {
    let s = input.sorting;
    let (nt, channels) = (s.nt, s.channels);
    let colour = unit_colour(u);
    canvas.outline_rect(cell, INK);
    let label = format!("{u} {}", s.labels[u].as_str());
    canvas.text(cell.x0 + 5, cell.y0 + 5, &label, LABEL_SCALE, colour);

    let mut best: Vec<(usize, f64)> = ptp
        .iter()
        .enumerate()
        .filter_map(|(c, p)| p.map(|p| (c, p)))
        .collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    best.truncate(TEMPLATE_CHANNELS);
    let depth = |c: usize| f64::from(input.channel_positions[c][1]);
    best.sort_by(|a, b| depth(b.0).total_cmp(&depth(a.0)).then(a.0.cmp(&b.0)));

    let area = Rect {
        x0: cell.x0 + 34,
        y0: cell.y0 + 24,
        x1: cell.x1 - 4,
        y1: cell.y1 - 4,
    };
    let lane = (area.y1 - area.y0) as f64 / best.len() as f64;
    let gain = 1.2 * lane / size;
    let step = (area.x1 - area.x0 - 1) as f64 / nt.saturating_sub(1).max(1) as f64;
    let unit = &s.templates[u * nt * channels..(u + 1) * nt * channels];
    for (k, &(c, _)) in best.iter().enumerate() {
        let centre = area.y0 as f64 + (k as f64 + 0.5) * lane;
        canvas.text(
            cell.x0 + 5,
            centre.round() as i64 - 3,
            &format!("C{c}"),
            1,
            INK,
        );
        canvas.clip_to(area);
        canvas.line(
            [area.x0 as f64, centre],
            [(area.x1 - 1) as f64, centre],
            BASELINE,
        );
        let point = |t: usize| {
            let v = f64::from(unit[t * channels + c]);
            [area.x0 as f64 + t as f64 * step, centre - v * gain]
        };
        for t in 1..nt {
            canvas.line(point(t - 1), point(t), colour);
        }
        canvas.unclip();
    }
}
