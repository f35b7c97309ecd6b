//! numpy dtype strings (`"<i2"`, `">f8"`, `"|b1"`, `"<U2"`): element kinds, sizes and byte orders.

use std::fmt;

use dspk_core::SampleFormat;

/// The order of bytes within one stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Least significant byte first (`<`; x86, ARM, and almost every recording).
    Little,
    /// Most significant byte first (`>`).
    Big,
}

impl ByteOrder {
    /// The byte order of this machine (what numpy's `=` means).
    pub const NATIVE: Self = if cfg!(target_endian = "big") {
        Self::Big
    } else {
        Self::Little
    };

    /// numpy's character for this order (`<` or `>`).
    #[must_use]
    pub const fn numpy_char(self) -> char {
        match self {
            Self::Little => '<',
            Self::Big => '>',
        }
    }
}

/// The kind of one array element, as numpy's dtype kind character says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// `b`: boolean, one byte.
    Bool,
    /// `i`: signed integer.
    Int,
    /// `u`: unsigned integer.
    UInt,
    /// `f`: IEEE 754 float.
    Float,
    /// `U`: fixed-length UTF-32 text (the size counts bytes, four per character).
    Unicode,
    /// `S`: fixed-length bytes (zero-padded).
    Bytes,
}

/// A simple (non-structured) numpy dtype: kind, size in bytes and byte order.
///
/// ```
/// use dspk_io::{ByteOrder, Dtype, ElementKind};
/// let dtype: Dtype = ">i2".parse()?;
/// assert_eq!((dtype.kind, dtype.size, dtype.order), (ElementKind::Int, 2, ByteOrder::Big));
/// assert_eq!(dtype.to_string(), ">i2");
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dtype {
    /// What each element is.
    pub kind: ElementKind,
    /// Bytes per element.
    pub size: usize,
    /// The order of bytes within an element (single-byte elements say [`ByteOrder::Little`]).
    pub order: ByteOrder,
}

/// The largest element accepted (a 1 MiB string), so an element size from a header is bounded.
const MAX_ELEMENT_SIZE: usize = 1 << 20;

impl Dtype {
    /// The little-endian dtype of a stored sample format (`<i2`, `<u2`, `<i4`, `<f4`).
    #[must_use]
    pub const fn from_format(format: SampleFormat) -> Self {
        let (kind, size) = match format {
            SampleFormat::U16 => (ElementKind::UInt, 2),
            SampleFormat::I32 => (ElementKind::Int, 4),
            SampleFormat::F32 => (ElementKind::Float, 4),
            // I16 and any format added later default to the common case; `sample_format`
            // round-trips exactly the four formats above.
            _ => (ElementKind::Int, 2),
        };
        Self {
            kind,
            size,
            order: ByteOrder::Little,
        }
    }

    /// The recording sample format with this kind and size (any byte order), if there is one.
    #[must_use]
    pub fn sample_format(self) -> Option<SampleFormat> {
        match (self.kind, self.size) {
            (ElementKind::Int, 2) => Some(SampleFormat::I16),
            (ElementKind::UInt, 2) => Some(SampleFormat::U16),
            (ElementKind::Int, 4) => Some(SampleFormat::I32),
            (ElementKind::Float, 4) => Some(SampleFormat::F32),
            _ => None,
        }
    }

    /// Whether the kind is numeric (bool, integer or float).
    #[must_use]
    pub fn is_numeric(self) -> bool {
        matches!(
            self.kind,
            ElementKind::Bool | ElementKind::Int | ElementKind::UInt | ElementKind::Float
        )
    }
}

impl std::str::FromStr for Dtype {
    type Err = String;

    /// Parses a numpy dtype string: an optional byte order (`<`, `>`, `|`, `=`), a kind
    /// (`b`, `i`, `u`, `f`, `U`, `S`) and a size; also the names `int16`, `uint16`, `int32`,
    /// `float32`, `float64`, `int64` (little-endian).
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("unsupported dtype `{}`: {why}", text.escape_debug());
        let named = match text {
            "int8" => Some("<i1"),
            "uint8" => Some("<u1"),
            "int16" => Some("<i2"),
            "uint16" => Some("<u2"),
            "int32" => Some("<i4"),
            "uint32" => Some("<u4"),
            "int64" => Some("<i8"),
            "uint64" => Some("<u8"),
            "float32" => Some("<f4"),
            "float64" => Some("<f8"),
            "bool" => Some("|b1"),
            _ => None,
        };
        let text_used = named.unwrap_or(text);
        let mut chars = text_used.chars();
        let (order, rest) = match chars.next() {
            Some('<') => (Some(ByteOrder::Little), chars.as_str()),
            Some('>') => (Some(ByteOrder::Big), chars.as_str()),
            Some('=') => (Some(ByteOrder::NATIVE), chars.as_str()),
            Some('|') => (None, chars.as_str()),
            _ => (Some(ByteOrder::NATIVE), text_used),
        };
        let mut rest_chars = rest.chars();
        let kind = match rest_chars.next() {
            Some('b') => ElementKind::Bool,
            Some('i') => ElementKind::Int,
            Some('u') => ElementKind::UInt,
            Some('f') => ElementKind::Float,
            Some('U') => ElementKind::Unicode,
            Some('S') => ElementKind::Bytes,
            _ => return Err(bad("expected a kind b, i, u, f, U or S")),
        };
        let digits = rest_chars.as_str();
        if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("expected a size in digits after the kind"));
        }
        let count: usize = digits.parse().map_err(|_| bad("size out of range"))?;
        let size = match kind {
            ElementKind::Unicode => count
                .checked_mul(4)
                .ok_or_else(|| bad("size out of range"))?,
            _ => count,
        };
        let valid = match kind {
            ElementKind::Bool => size == 1,
            ElementKind::Int | ElementKind::UInt => matches!(size, 1 | 2 | 4 | 8),
            ElementKind::Float => matches!(size, 4 | 8),
            ElementKind::Unicode | ElementKind::Bytes => (1..=MAX_ELEMENT_SIZE).contains(&size),
        };
        if !valid {
            return Err(bad("no such element size"));
        }
        let order = match (order, size, kind) {
            (_, 1, _) | (_, _, ElementKind::Bytes) => ByteOrder::Little,
            (Some(order), _, _) => order,
            (None, _, _) => return Err(bad("`|` (no byte order) on a multi-byte element")),
        };
        Ok(Self { kind, size, order })
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, count) = match self.kind {
            ElementKind::Bool => ('b', self.size),
            ElementKind::Int => ('i', self.size),
            ElementKind::UInt => ('u', self.size),
            ElementKind::Float => ('f', self.size),
            ElementKind::Unicode => ('U', self.size / 4),
            ElementKind::Bytes => ('S', self.size),
        };
        let order = if self.size == 1 || self.kind == ElementKind::Bytes {
            '|'
        } else {
            self.order.numpy_char()
        };
        write!(f, "{order}{kind}{count}")
    }
}

/// Converts stored values of `size` bytes in `order` to little-endian, in place.
pub(crate) fn to_little_endian(bytes: &mut [u8], size: usize, order: ByteOrder) {
    if order == ByteOrder::Big && size > 1 {
        for value in bytes.chunks_exact_mut(size) {
            value.reverse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for text in [
            "<i2", ">i2", "<u2", "<i4", ">f4", "<f8", "|b1", "|i1", "<U2", "|S5", ">U3",
        ] {
            let dtype: Dtype = text.parse().unwrap();
            assert_eq!(dtype.to_string(), text);
        }
        assert_eq!("int16".parse::<Dtype>().unwrap().to_string(), "<i2");
        let u2: Dtype = "<U2".parse().unwrap();
        assert_eq!(u2.size, 8);
    }

    #[test]
    fn refuses_nonsense() {
        for text in [
            "",
            "<",
            "<x2",
            "<i3",
            "<f2",
            "<i",
            "<i99999999999",
            "|i2",
            "<U0",
            "<U999999999",
            "i2i",
        ] {
            assert!(text.parse::<Dtype>().is_err(), "{text}");
        }
    }
}
