//! Data-to-pixel scales, "nice" tick positions and labelled axis frames.

use super::font;
use super::{Canvas, Rect, Rgb};

/// Colour of frames, ticks and their labels.
pub const INK: Rgb = [40, 40, 40];
/// Scale of tick labels (font pixels per canvas pixel side).
pub const LABEL_SCALE: usize = 2;
/// Length of a tick mark in pixels.
pub const TICK: i64 = 6;

/// A linear map from data range `[lo, hi]` to pixel range `[p0, p1]` (`p1 < p0` for an axis
/// that grows upwards).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// The data value at `p0`.
    pub lo: f64,
    /// The data value at `p1`.
    pub hi: f64,
    /// The pixel coordinate of `lo`.
    pub p0: f64,
    /// The pixel coordinate of `hi`.
    pub p1: f64,
}

impl Scale {
    /// The pixel coordinate of data value `v`.
    #[must_use]
    pub fn px(&self, v: f64) -> f64 {
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }
}

/// The range `[lo, hi]` of the finite values of `values`, widened by `pad` of its span on each
/// side (and to at least `min_span`); `fallback` when there is no finite value.
#[must_use]
pub fn padded_range(
    values: impl IntoIterator<Item = f64>,
    pad: f64,
    min_span: f64,
    fallback: [f64; 2],
) -> [f64; 2] {
    let mut range: Option<[f64; 2]> = None;
    for v in values.into_iter().filter(|v| v.is_finite()) {
        range = Some(match range {
            None => [v, v],
            Some([lo, hi]) => [lo.min(v), hi.max(v)],
        });
    }
    let Some([lo, hi]) = range else {
        return fallback;
    };
    let span = (hi - lo).max(min_span);
    let mid = 0.5 * (lo + hi);
    let half = 0.5 * span * (1.0 + 2.0 * pad);
    [mid - half, mid + half]
}

/// Ticks inside `[lo, hi]` at a step of 1, 2 or 5 times a power of ten, chosen so that there
/// are at most `max_ticks` of them (and as many as that allows), each with its label printed
/// with the decimals the step needs.
#[must_use]
pub fn ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<(f64, String)> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) || max_ticks == 0 {
        return Vec::new();
    }
    let raw = span / max_ticks as f64;
    let power = raw.log10().floor();
    let base = 10_f64.powf(power);
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|&s| (span / s).floor() < max_ticks as f64)
        .unwrap_or(10.0 * base);
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()).max(0.0) as usize
    };
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last)
        .map(|k| {
            let v = k as f64 * step;
            // `+ 0.0` turns a negative zero into a positive one, so "-0" is never printed.
            (v, format!("{:.*}", decimals, v + 0.0))
        })
        .collect()
}

/// Draws the frame `rect` with ticks and labels: `x` ticks below it, `y` ticks left of it
/// (labels right-aligned against the ticks).
pub fn frame(
    canvas: &mut Canvas,
    rect: Rect,
    x: Option<(&Scale, usize)>,
    y: Option<(&Scale, usize)>,
) {
    canvas.outline_rect(rect, INK);
    let h = (font::HEIGHT * LABEL_SCALE) as i64;
    if let Some((scale, n)) = x {
        for (v, label) in ticks(scale.lo, scale.hi, n) {
            let px = scale.px(v).round();
            let base = rect.y1 as f64;
            canvas.line([px, base], [px, base + TICK as f64], INK);
            let w = font::text_width(&label, LABEL_SCALE) as i64;
            canvas.text(
                px as i64 - w / 2,
                rect.y1 + TICK + 4,
                &label,
                LABEL_SCALE,
                INK,
            );
        }
    }
    if let Some((scale, n)) = y {
        for (v, label) in ticks(scale.lo, scale.hi, n) {
            let py = scale.px(v).round();
            let left = rect.x0 as f64;
            canvas.line([left - TICK as f64, py], [left, py], INK);
            let w = font::text_width(&label, LABEL_SCALE) as i64;
            canvas.text(
                rect.x0 - TICK - 4 - w,
                py as i64 - h / 2,
                &label,
                LABEL_SCALE,
                INK,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_and_inside() {
        let t = ticks(0.0, 3840.0, 10);
        let values: Vec<f64> = t.iter().map(|(v, _)| *v).collect();
        assert_eq!(
            values,
            (0..=7).map(|k| 500.0 * k as f64).collect::<Vec<_>>()
        );
        assert_eq!(t[1].1, "500");
        let t = ticks(-0.13, 0.31, 5);
        let labels: Vec<&str> = t.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["-0.1", "0.0", "0.1", "0.2", "0.3"]);
        assert!(ticks(1.0, 1.0, 5).is_empty());
        assert!(ticks(0.0, f64::NAN, 5).is_empty());
        assert!(ticks(0.0, 1.0, 0).is_empty());
        for (lo, hi, n) in [(0.0, 1.0, 1), (3.0, 1e6, 7), (-5e-3, 2e-3, 3)] {
            let t = ticks(lo, hi, n);
            assert!(!t.is_empty() && t.len() <= n, "{lo} {hi} {n}: {t:?}");
            assert!(t.iter().all(|(v, _)| *v >= lo && *v <= hi));
        }
    }

    #[test]
    fn ranges_pad_and_fall_back() {
        assert_eq!(
            padded_range([2.0, f64::NAN, 0.0], 0.5, 0.0, [0.0, 1.0]),
            [-1.0, 3.0]
        );
        assert_eq!(padded_range([5.0], 0.0, 2.0, [0.0, 1.0]), [4.0, 6.0]);
        assert_eq!(
            padded_range([f64::INFINITY], 0.1, 1.0, [0.0, 1.0]),
            [0.0, 1.0]
        );
        let s = Scale {
            lo: 0.0,
            hi: 10.0,
            p0: 100.0,
            p1: 0.0,
        };
        assert_eq!(s.px(2.5), 75.0);
    }
}
