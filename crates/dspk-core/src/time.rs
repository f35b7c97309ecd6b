//! Exact sample rates and times.
//!
//! Acquisition systems report rates such as 30000.12 Hz (a calibrated SpikeGLX clock) or
//! 30000 Hz; a sorter that turns sample indices into seconds over hours of data must not drift,
//! so rates and times are rationals, reduced, and converted to `f64` only for display.

use std::cmp::Ordering;
use std::fmt;
use std::ops::Add;
use std::str::FromStr;

use crate::{Error, Result};

const fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// A sample rate in hertz, kept exactly as `num / den` (reduced, both positive).
///
/// ```
/// use dspk_core::SampleRate;
/// let rate: SampleRate = "30000.12".parse()?;
/// assert_eq!((rate.numerator(), rate.denominator()), (750003, 25));
/// assert_eq!(rate.time_of_sample(750003).to_string(), "25 s");
/// # Ok::<(), dspk_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SampleRate {
    num: u64,
    den: u64,
}

impl SampleRate {
    /// `num / den` hertz.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRate`] if either is zero.
    pub fn new(num: u64, den: u64) -> Result<Self> {
        if num == 0 || den == 0 {
            return Err(Error::InvalidRate(format!(
                "a sample rate needs a positive numerator and denominator, got {num}/{den}"
            )));
        }
        let g = gcd(u128::from(num), u128::from(den)) as u64;
        Ok(Self {
            num: num / g,
            den: den / g,
        })
    }

    /// A whole number of hertz.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRate`] if `hz` is zero.
    pub fn from_hz(hz: u64) -> Result<Self> {
        Self::new(hz, 1)
    }

    /// The reduced numerator (hertz times the denominator).
    #[must_use]
    pub const fn numerator(self) -> u64 {
        self.num
    }

    /// The reduced denominator.
    #[must_use]
    pub const fn denominator(self) -> u64 {
        self.den
    }

    /// The rate as `f64` hertz (rounded; for display and filter design, not for time keeping).
    #[must_use]
    pub fn as_hz(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// The exact time of sample `index` counted from the first sample: `index / rate` seconds.
    #[must_use]
    pub fn time_of_sample(self, index: u64) -> RationalTime {
        RationalTime::reduced(
            i128::from(index) * i128::from(self.den),
            u128::from(self.num),
        )
    }

    /// The index of the last sample at or before `time` (counted from the first sample):
    /// `floor(time * rate)`, or `None` for a negative time or one past `u64::MAX` samples.
    #[must_use]
    pub fn sample_at(self, time: RationalTime) -> Option<u64> {
        if time.num < 0 {
            return None;
        }
        let num = (time.num as u128).checked_mul(u128::from(self.num))?;
        let den = time.den.checked_mul(u128::from(self.den))?;
        u64::try_from(num / den).ok()
    }
}

impl FromStr for SampleRate {
    type Err = Error;

    /// Parses `"30000"`, `"30000.12"` (exact decimal) or `"90000/3"`.
    fn from_str(text: &str) -> Result<Self> {
        let bad = || Error::InvalidRate(format!("cannot read `{text}` as a sample rate in Hz"));
        let text = text.trim();
        if let Some((num, den)) = text.split_once('/') {
            let num = num.trim().parse().map_err(|_| bad())?;
            let den = den.trim().parse().map_err(|_| bad())?;
            return Self::new(num, den);
        }
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        if whole.is_empty() && frac.is_empty()
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
            || frac.len() > 18
        {
            return Err(bad());
        }
        let den = 10u64.pow(frac.len() as u32);
        let digits = format!("{whole}{frac}");
        let num: u64 = digits.parse().map_err(|_| bad())?;
        Self::new(num, den)
    }
}

impl fmt::Display for SampleRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{} Hz", self.num)
        } else {
            write!(f, "{}/{} Hz (~{} Hz)", self.num, self.den, self.as_hz())
        }
    }
}

/// A time in seconds kept exactly as `num / den` (reduced, `den` positive), e.g. a recording's
/// start time or the time of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RationalTime {
    num: i128,
    den: u128,
}

impl RationalTime {
    /// Time zero.
    pub const ZERO: Self = Self { num: 0, den: 1 };

    /// `num / den` seconds.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRate`] if `den` is zero.
    pub fn new(num: i64, den: u64) -> Result<Self> {
        if den == 0 {
            return Err(Error::InvalidRate(format!(
                "a time needs a positive denominator, got {num}/0"
            )));
        }
        Ok(Self::reduced(i128::from(num), u128::from(den)))
    }

    /// A whole number of seconds.
    #[must_use]
    pub fn from_secs(secs: i64) -> Self {
        Self::reduced(i128::from(secs), 1)
    }

    fn reduced(num: i128, den: u128) -> Self {
        let g = gcd(num.unsigned_abs(), den).max(1);
        Self {
            num: num / g as i128,
            den: den / g,
        }
    }

    /// The reduced numerator.
    #[must_use]
    pub const fn numerator(self) -> i128 {
        self.num
    }

    /// The reduced denominator.
    #[must_use]
    pub const fn denominator(self) -> u128 {
        self.den
    }

    /// Seconds as `f64` (rounded; for display).
    #[must_use]
    pub fn as_secs_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// `self + other`, or `None` if the exact result does not fit.
    #[must_use]
    pub fn checked_add(self, other: Self) -> Option<Self> {
        let g = gcd(self.den, other.den);
        let lhs = self.num.checked_mul(i128::try_from(other.den / g).ok()?)?;
        let rhs = other.num.checked_mul(i128::try_from(self.den / g).ok()?)?;
        let den = (self.den / g).checked_mul(other.den)?;
        Some(Self::reduced(lhs.checked_add(rhs)?, den))
    }
}

impl Add for RationalTime {
    type Output = Self;

    /// # Panics
    ///
    /// If the exact sum does not fit (denominators past 2^128); see
    /// [`checked_add`](Self::checked_add).
    fn add(self, other: Self) -> Self {
        self.checked_add(other)
            .expect("rational time overflow: denominators too large to add exactly")
    }
}

impl PartialOrd for RationalTime {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RationalTime {
    fn cmp(&self, other: &Self) -> Ordering {
        let lhs = i128::try_from(other.den)
            .ok()
            .and_then(|d| self.num.checked_mul(d));
        let rhs = i128::try_from(self.den)
            .ok()
            .and_then(|d| other.num.checked_mul(d));
        match (lhs, rhs) {
            (Some(lhs), Some(rhs)) => lhs.cmp(&rhs),
            // Only reachable with denominators near 2^64; f64 order is then the best we have.
            _ => self.as_secs_f64().total_cmp(&other.as_secs_f64()),
        }
    }
}

impl fmt::Display for RationalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 1 {
            write!(f, "{} s", self.num)
        } else {
            write!(f, "{}/{} s", self.num, self.den)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_rates_are_exact() {
        let rate: SampleRate = "30000.12".parse().unwrap();
        assert_eq!((rate.numerator(), rate.denominator()), (750_003, 25));
        // After one hour of samples the time is exact, not 3599.99999...
        let samples_per_hour = 3_000_012 * 36; // 3600 s * 30000.12 Hz
        assert_eq!(
            rate.time_of_sample(samples_per_hour),
            RationalTime::from_secs(3600)
        );
        assert_eq!(
            rate.sample_at(RationalTime::from_secs(3600)),
            Some(samples_per_hour)
        );
        assert_eq!(
            "30000".parse::<SampleRate>().unwrap(),
            SampleRate::from_hz(30_000).unwrap()
        );
        assert_eq!(
            "90000/3".parse::<SampleRate>().unwrap(),
            SampleRate::from_hz(30_000).unwrap()
        );
    }

    #[test]
    fn bad_rates_are_errors() {
        for text in [
            "",
            ".",
            "0",
            "-30000",
            "3e4",
            "30000.1.2",
            "abc",
            "1/0",
            "0/5",
            "1.0000000000000000001",
        ] {
            assert!(text.parse::<SampleRate>().is_err(), "`{text}` parsed");
        }
    }

    #[test]
    fn sample_at_floors() {
        let rate = SampleRate::from_hz(3).unwrap();
        assert_eq!(rate.sample_at(RationalTime::new(1, 2).unwrap()), Some(1));
        assert_eq!(rate.sample_at(RationalTime::new(-1, 2).unwrap()), None);
    }

    #[test]
    fn times_add_and_order_exactly() {
        let a = RationalTime::new(1, 3).unwrap();
        let b = RationalTime::new(1, 6).unwrap();
        assert_eq!(a + b, RationalTime::new(1, 2).unwrap());
        assert!(b < a);
        assert!(RationalTime::new(-1, 3).unwrap() < RationalTime::ZERO);
        assert_eq!(RationalTime::new(2, 4).unwrap().to_string(), "1/2 s");
    }
}
