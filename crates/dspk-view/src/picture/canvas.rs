//! An RGB canvas with a few drawing operations: pixels, rectangles, clipped lines, discs and
//! rings, and text in the bitmap font of [`super::font`]; PNG encoding by the `png` crate.
//! Coordinates are pixels, x to the right and y downwards from the top-left corner; whatever
//! falls outside the canvas or the current clip rectangle is dropped.

use std::path::Path;

use super::font;
use crate::{Error, Result};

/// The most pixels a canvas may have (768 MiB of RGB): a bound on the memory a picture takes
/// whatever its requested size.
pub const MAX_PIXELS: u64 = 1 << 28;

/// An 8-bit RGB colour.
pub type Rgb = [u8; 3];

/// A half-open pixel rectangle `[x0, x1) x [y0, y1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// The leftmost column.
    pub x0: i64,
    /// The top row.
    pub y0: i64,
    /// One past the rightmost column.
    pub x1: i64,
    /// One past the bottom row.
    pub y1: i64,
}

impl Rect {
    /// Whether pixel `(x, y)` lies inside.
    #[must_use]
    pub fn contains(&self, x: i64, y: i64) -> bool {
        x >= self.x0 && x < self.x1 && y >= self.y0 && y < self.y1
    }
}

/// Row-major RGB pixels, three bytes each, with a clip rectangle that limits drawing.
#[derive(Debug, Clone)]
pub struct Canvas {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
    clip: Rect,
}

impl Canvas {
    /// A `width x height` canvas painted `background`, clipped to itself.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a zero width or height; [`Error::OverLimit`] above
    /// [`MAX_PIXELS`] pixels.
    pub fn new(width: u32, height: u32, background: Rgb) -> Result<Self> {
        if width == 0 || height == 0 {
            return Err(Error::invalid(
                "canvas: size",
                format!("{width} x {height} pixels (both must be at least 1)"),
            ));
        }
        let n = u64::from(width) * u64::from(height);
        if n > MAX_PIXELS {
            return Err(Error::OverLimit {
                what: "canvas: pixels",
                requested: n,
                limit: MAX_PIXELS,
            });
        }
        // n <= MAX_PIXELS, so 3 * n fits a usize.
        let pixels = background.repeat(n as usize);
        Ok(Self {
            width,
            height,
            pixels,
            clip: Self::full(width, height),
        })
    }

    fn full(width: u32, height: u32) -> Rect {
        Rect {
            x0: 0,
            y0: 0,
            x1: i64::from(width),
            y1: i64::from(height),
        }
    }

    /// Width in pixels.
    #[must_use]
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    #[must_use]
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The RGB bytes, row by row.
    #[must_use]
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// The colour at `(x, y)`, `None` outside the canvas.
    #[must_use]
    pub fn get(&self, x: i64, y: i64) -> Option<Rgb> {
        let i = self.index(x, y)?;
        Some([self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]])
    }

    /// Limits drawing to `clip` (and the canvas) until [`Canvas::unclip`].
    pub fn clip_to(&mut self, clip: Rect) {
        self.clip = clip;
    }

    /// Lets drawing reach the whole canvas again.
    pub fn unclip(&mut self) {
        self.clip = Self::full(self.width, self.height);
    }

    fn index(&self, x: i64, y: i64) -> Option<usize> {
        let inside = x >= 0 && y >= 0 && x < i64::from(self.width) && y < i64::from(self.height);
        // Both coordinates are non-negative and below u32 sizes here, so the casts are exact.
        inside.then(|| 3 * (y as usize * self.width as usize + x as usize))
    }

    fn index_clipped(&self, x: i64, y: i64) -> Option<usize> {
        if self.clip.contains(x, y) {
            self.index(x, y)
        } else {
            None
        }
    }

    /// Paints pixel `(x, y)`.
    pub fn put(&mut self, x: i64, y: i64, colour: Rgb) {
        if let Some(i) = self.index_clipped(x, y) {
            self.pixels[i..i + 3].copy_from_slice(&colour);
        }
    }

    /// Darkens pixel `(x, y)` towards `colour`: each channel becomes the smaller of the two, so
    /// overlapping marks give the same picture in any drawing order.
    pub fn darken(&mut self, x: i64, y: i64, colour: Rgb) {
        if let Some(i) = self.index_clipped(x, y) {
            for (p, c) in self.pixels[i..i + 3].iter_mut().zip(colour) {
                *p = (*p).min(c);
            }
        }
    }

    /// Fills `rect` (only its part inside the clip rectangle is visited).
    pub fn fill_rect(&mut self, rect: Rect, colour: Rgb) {
        let r = self.clip;
        for y in rect.y0.max(r.y0)..rect.y1.min(r.y1) {
            for x in rect.x0.max(r.x0)..rect.x1.min(r.x1) {
                self.put(x, y, colour);
            }
        }
    }

    /// Draws the one-pixel border of `rect` (its outermost pixels).
    pub fn outline_rect(&mut self, rect: Rect, colour: Rgb) {
        let (x0, y0, x1, y1) = (rect.x0, rect.y0, rect.x1 - 1, rect.y1 - 1);
        for x in x0..=x1 {
            self.put(x, y0, colour);
            self.put(x, y1, colour);
        }
        for y in y0..=y1 {
            self.put(x0, y, colour);
            self.put(x1, y, colour);
        }
    }

    /// Draws the straight segment between two points given in (sub-)pixel coordinates, cut to
    /// the clip rectangle first (Liang-Barsky) so that far-away ends cost nothing. A segment with a
    /// non-finite end draws nothing.
    pub fn line(&mut self, a: [f64; 2], b: [f64; 2], colour: Rgb) {
        let Some((a, b)) = clip_segment(a, b, self.clip) else {
            return;
        };
        // Bresenham between the rounded ends; both lie within the clip rectangle.
        let (mut x, mut y) = (a[0].round() as i64, a[1].round() as i64);
        let (x1, y1) = (b[0].round() as i64, b[1].round() as i64);
        let dx = (x1 - x).abs();
        let dy = -(y1 - y).abs();
        let sx = if x < x1 { 1 } else { -1 };
        let sy = if y < y1 { 1 } else { -1 };
        let mut err = dx + dy;
        loop {
            self.put(x, y, colour);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Fills the disc of radius `r` pixels around `(cx, cy)`.
    pub fn disc(&mut self, cx: i64, cy: i64, r: i64, colour: Rgb) {
        let outer = r * r + r;
        for dy in -r..=r {
            for dx in -r..=r {
                if dx * dx + dy * dy <= outer {
                    self.put(cx + dx, cy + dy, colour);
                }
            }
        }
    }

    /// Draws the circle of radius `r` pixels around `(cx, cy)`, `width` pixels thick inwards.
    pub fn ring(&mut self, cx: i64, cy: i64, r: i64, width: i64, colour: Rgb) {
        let outer = r * r + r;
        let ri = r - width;
        let inner = if ri >= 0 { ri * ri + ri } else { -1 };
        for dy in -r..=r {
            for dx in -r..=r {
                let d = dx * dx + dy * dy;
                if d <= outer && d > inner {
                    self.put(cx + dx, cy + dy, colour);
                }
            }
        }
    }

    /// Writes `text` with its top-left corner at `(x, y)`, each font pixel a `scale x scale`
    /// square; returns the x just right of the last glyph.
    pub fn text(&mut self, x: i64, y: i64, text: &str, scale: usize, colour: Rgb) -> i64 {
        let s = scale as i64;
        let mut left = x;
        for c in text.chars() {
            for (row, line) in font::glyph(c).iter().enumerate() {
                for (col, p) in line.chars().enumerate() {
                    if p == '#' {
                        let px = left + col as i64 * s;
                        let py = y + row as i64 * s;
                        self.fill_rect(
                            Rect {
                                x0: px,
                                y0: py,
                                x1: px + s,
                                y1: py + s,
                            },
                            colour,
                        );
                    }
                }
            }
            left += (font::ADVANCE * scale) as i64;
        }
        left
    }

    /// The picture as PNG bytes (8-bit RGB, no metadata): the same canvas gives the same bytes.
    ///
    /// # Panics
    ///
    /// Never: a canvas is at least 1 x 1 and holds exactly its pixels, and writing to memory
    /// does not fail, which leaves the encoder no error to report.
    #[must_use]
    pub fn encode_png(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let written = encoder.write_header().and_then(|mut writer| {
            writer.write_image_data(&self.pixels)?;
            writer.finish()
        });
        written.expect("a non-empty RGB canvas encodes to memory");
        out
    }

    /// Writes the picture to `path` as a PNG file ([`encode_png`](Self::encode_png)).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file cannot be written.
    pub fn write_png(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.encode_png()).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The part of segment `a`-`b` inside `clip` (pixel centres `x0..x1-1`, `y0..y1-1`), or `None`
/// when it misses or an end is not finite.
fn clip_segment(a: [f64; 2], b: [f64; 2], clip: Rect) -> Option<([f64; 2], [f64; 2])> {
    if a.iter().chain(&b).any(|v| !v.is_finite()) || clip.x1 <= clip.x0 || clip.y1 <= clip.y0 {
        return None;
    }
    let lo = [clip.x0 as f64, clip.y0 as f64];
    let hi = [(clip.x1 - 1) as f64, (clip.y1 - 1) as f64];
    let d = [b[0] - a[0], b[1] - a[1]];
    let (mut t0, mut t1) = (0.0_f64, 1.0_f64);
    for k in 0..2 {
        for (p, q) in [(-d[k], a[k] - lo[k]), (d[k], hi[k] - a[k])] {
            if p == 0.0 {
                if q < 0.0 {
                    return None;
                }
            } else {
                let t = q / p;
                if p < 0.0 {
                    t0 = t0.max(t);
                } else {
                    t1 = t1.min(t);
                }
            }
        }
    }
    if t0 > t1 {
        return None;
    }
    let at = |t: f64| {
        [
            (a[0] + t * d[0]).clamp(lo[0], hi[0]),
            (a[1] + t * d[1]).clamp(lo[1], hi[1]),
        ]
    };
    Some((at(t0), at(t1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHITE: Rgb = [255, 255, 255];
    const BLACK: Rgb = [0, 0, 0];

    fn canvas(width: u32, height: u32) -> Canvas {
        Canvas::new(width, height, WHITE).unwrap()
    }

    fn inked(c: &Canvas) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        for y in 0..i64::from(c.height()) {
            for x in 0..i64::from(c.width()) {
                if c.get(x, y) != Some(WHITE) {
                    out.push((x, y));
                }
            }
        }
        out
    }

    #[test]
    fn every_glyph_renders_its_rows() {
        for (ch, rows) in font::GLYPHS {
            let mut c = canvas(20, 24);
            let right = c.text(1, 2, &ch.to_string(), 2, BLACK);
            assert_eq!(right, 1 + 12);
            for (row, line) in rows.iter().enumerate() {
                for (col, p) in line.chars().enumerate() {
                    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let x = 1 + 2 * col as i64 + dx;
                        let y = 2 + 2 * row as i64 + dy;
                        let want = if p == '#' { BLACK } else { WHITE };
                        assert_eq!(c.get(x, y), Some(want), "glyph {ch:?} at {x},{y}");
                    }
                }
            }
            let ink = rows
                .iter()
                .flat_map(|r| r.chars())
                .filter(|&p| p == '#')
                .count();
            assert_eq!(
                inked(&c).len(),
                4 * ink,
                "glyph {ch:?} drew outside its box"
            );
        }
    }

    #[test]
    fn lines_are_clipped_and_connected() {
        let mut c = canvas(10, 10);
        c.line([-100.0, 5.0], [1e12, 5.0], BLACK);
        assert_eq!(inked(&c), (0..10).map(|x| (x, 5)).collect::<Vec<_>>());
        let mut c = canvas(10, 10);
        c.clip_to(Rect {
            x0: 2,
            y0: 2,
            x1: 8,
            y1: 8,
        });
        c.line([0.0, 0.0], [9.0, 9.0], BLACK);
        assert_eq!(inked(&c), (2..8).map(|i| (i, i)).collect::<Vec<_>>());
        c.line([f64::NAN, 0.0], [9.0, 9.0], [1, 1, 1]);
        c.line([0.0, 9.0], [1.0, 9.0], [1, 1, 1]);
        assert_eq!(inked(&c).len(), 6);
        c.unclip();
        c.line([0.0, 9.0], [1.0, 9.0], BLACK);
        assert_eq!(inked(&c).len(), 8);
    }

    #[test]
    fn darken_is_order_free_and_shapes_stay_in_their_box() {
        let mut a = canvas(4, 1);
        let mut b = canvas(4, 1);
        a.darken(1, 0, [10, 200, 30]);
        a.darken(1, 0, [100, 20, 40]);
        b.darken(1, 0, [100, 20, 40]);
        b.darken(1, 0, [10, 200, 30]);
        assert_eq!(a.get(1, 0), Some([10, 20, 30]));
        assert_eq!(a.pixels(), b.pixels());

        let mut c = canvas(21, 21);
        c.disc(10, 10, 4, BLACK);
        let disc = inked(&c);
        assert!(
            disc.iter()
                .all(|&(x, y)| (x - 10).abs() <= 4 && (y - 10).abs() <= 4)
        );
        assert!(disc.contains(&(10, 10)) && disc.contains(&(14, 10)) && disc.contains(&(10, 6)));
        let mut r = canvas(21, 21);
        r.ring(10, 10, 4, 1, BLACK);
        let ring = inked(&r);
        assert!(!ring.contains(&(10, 10)) && ring.contains(&(14, 10)));
        assert!(ring.iter().all(|p| disc.contains(p)));
        assert!(ring.len() < disc.len());

        let mut o = canvas(6, 6);
        o.outline_rect(
            Rect {
                x0: 1,
                y0: 1,
                x1: 5,
                y1: 5,
            },
            BLACK,
        );
        assert_eq!(inked(&o).len(), 12);
        assert_eq!(o.get(3, 3), Some(WHITE));
    }

    #[test]
    fn sizes_are_checked() {
        for (w, h) in [(0, 5), (5, 0)] {
            assert!(matches!(
                Canvas::new(w, h, WHITE),
                Err(Error::InvalidRequest { .. })
            ));
        }
        assert!(matches!(
            Canvas::new(1 << 16, (1 << 12) + 1, WHITE),
            Err(Error::OverLimit { .. })
        ));
        let c = canvas(3, 2);
        assert_eq!(c.pixels().len(), 18);
        assert_eq!(c.get(3, 0), None);
        assert_eq!(c.get(0, -1), None);
    }

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

    #[test]
    fn png_round_trips_and_writes() {
        // Odd sizes and pseudo-random colours, so that every row filter and byte counts.
        let (w, h) = (37u32, 11u32);
        let mut c = canvas(w, h);
        let mut state = 0x9e37_79b9_u32;
        for y in 0..i64::from(h) {
            for x in 0..i64::from(w) {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let [r, g, b, _] = state.to_le_bytes();
                c.put(x, y, [r, g, b]);
            }
        }
        let bytes = c.encode_png();
        assert_eq!(bytes, c.encode_png());
        assert_eq!(decode(&bytes), (w, h, c.pixels().to_vec()));

        let dir = std::env::temp_dir();
        let path = dir.join(format!("dspk_view_canvas_{}.png", std::process::id()));
        c.write_png(&path).unwrap();
        let written = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written, bytes);
        let missing = dir.join("dspk_view_no_such_dir").join("x.png");
        assert!(matches!(c.write_png(&missing), Err(Error::Io { .. })));
    }
}
