//! A minimal complex `f64` for pole/zero arithmetic (no dependency needed for a few operations).

use std::ops::{Add, Div, Mul, Neg, Sub};

/// A complex number `re + i im`, with numpy's `complex128` arithmetic (Smith's division, C99
/// `csqrt` branch cut).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Complex {
    pub(crate) re: f64,
    pub(crate) im: f64,
}

impl Complex {
    /// `re + i im`.
    pub(crate) const fn new(re: f64, im: f64) -> Self {
        Self { re, im }
    }

    /// `re + 0i`.
    pub(crate) const fn real(re: f64) -> Self {
        Self { re, im: 0.0 }
    }

    /// `re - i im`.
    pub(crate) fn conj(self) -> Self {
        Self::new(self.re, -self.im)
    }

    /// `|z|`, computed without overflow.
    pub(crate) fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }

    /// numpy's `isreal`: the imaginary part is exactly zero.
    pub(crate) fn is_real(self) -> bool {
        self.im == 0.0
    }

    /// `z * s` for a real `s`.
    pub(crate) fn scale(self, s: f64) -> Self {
        Self::new(self.re * s, self.im * s)
    }

    /// The principal square root; on the negative real axis the sign of the zero imaginary part
    /// picks the side of the cut, as C99 `csqrt` (and numpy) do.
    pub(crate) fn sqrt(self) -> Self {
        let (x, y) = (self.re, self.im);
        if y == 0.0 {
            return if x < 0.0 {
                Self::new(0.0, (-x).sqrt().copysign(y))
            } else {
                Self::new(x.sqrt(), 0.0_f64.copysign(y))
            };
        }
        if x == 0.0 {
            let r = (0.5 * y.abs()).sqrt();
            return Self::new(r, r.copysign(y));
        }
        let d = x.hypot(y);
        if x > 0.0 {
            let r = (0.5 * (d + x)).sqrt();
            Self::new(r, 0.5 * (y / r))
        } else {
            let s = (0.5 * (d - x)).sqrt();
            Self::new((0.5 * (y / s)).abs(), s.copysign(y))
        }
    }

    /// The product of `values` (1 when empty), multiplied from the first.
    pub(crate) fn product(values: &[Complex]) -> Self {
        values.iter().fold(Self::real(1.0), |acc, &v| acc * v)
    }
}

impl Add for Complex {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self::new(self.re + o.re, self.im + o.im)
    }
}

impl Sub for Complex {
    type Output = Self;
    fn sub(self, o: Self) -> Self {
        Self::new(self.re - o.re, self.im - o.im)
    }
}

impl Neg for Complex {
    type Output = Self;
    fn neg(self) -> Self {
        Self::new(-self.re, -self.im)
    }
}

impl Mul for Complex {
    type Output = Self;
    fn mul(self, o: Self) -> Self {
        Self::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

impl Div for Complex {
    type Output = Self;
    /// Smith's algorithm (numpy's complex division): no overflow from squaring the divisor.
    fn div(self, o: Self) -> Self {
        if o.re.abs() >= o.im.abs() {
            let rat = o.im / o.re;
            let scl = 1.0 / (o.re + o.im * rat);
            Self::new(
                (self.re + self.im * rat) * scl,
                (self.im - self.re * rat) * scl,
            )
        } else {
            let rat = o.re / o.im;
            let scl = 1.0 / (o.im + o.re * rat);
            Self::new(
                (self.re * rat + self.im) * scl,
                (self.im * rat - self.re) * scl,
            )
        }
    }
}
