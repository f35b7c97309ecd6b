//! The `.npy` header: magic, version, and the Python dict literal that gives dtype, order and
//! shape (<https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).

use std::path::Path;

use crate::dtype::Dtype;
use crate::{Error, Result};

/// The first bytes of every `.npy` file.
pub const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest header accepted (numpy itself refuses headers over 10 000 bytes by default).
const MAX_HEADER_LEN: usize = 1 << 20;

/// The most dimensions accepted (numpy's own limit is 64).
const MAX_DIMS: usize = 64;

/// A parsed `.npy` header: what the data after it holds and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// The element type.
    pub dtype: Dtype,
    /// Whether the data is in Fortran (column-major) order rather than C (row-major) order.
    pub fortran_order: bool,
    /// The array's shape (empty for a scalar).
    pub shape: Vec<u64>,
    /// Where the data starts: the length of magic, version, length field and header.
    pub data_offset: u64,
}

impl NpyHeader {
    /// How many bytes the prefix before the header dict has, and the dict's length, from the
    /// first 12 bytes of a file (fewer is fine for version 1, which needs 10).
    fn prefix(bytes: &[u8], path: &Path) -> Result<(usize, usize)> {
        if bytes.len() < 10 || &bytes[..6] != NPY_MAGIC {
            return Err(Error::invalid(
                path,
                "not a .npy file: the magic string `\\x93NUMPY` is missing",
            ));
        }
        match bytes[6] {
            1 => Ok((10, usize::from(u16::from_le_bytes([bytes[8], bytes[9]])))),
            2 | 3 if bytes.len() >= 12 => {
                let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
                Ok((12, usize::try_from(len).unwrap_or(usize::MAX)))
            }
            2 | 3 => Err(Error::invalid(path, "the .npy header is cut short")),
            major => Err(Error::invalid(
                path,
                format!(
                    ".npy format version {major}.{} is not supported (1, 2 and 3 are)",
                    bytes[7]
                ),
            )),
        }
    }

    /// The total length of magic, version, length field and header dict, from the first 12
    /// bytes of a file, checked against the 1 MiB header limit.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a missing magic string or an unknown version;
    /// [`Error::TooLarge`] for a header over 1 MiB.
    pub fn header_len(first_bytes: &[u8], path: &Path) -> Result<usize> {
        let (prefix, len) = Self::prefix(first_bytes, path)?;
        if len > MAX_HEADER_LEN {
            return Err(Error::TooLarge {
                path: path.to_path_buf(),
                what: ".npy header".into(),
                size: len as u64,
                limit: MAX_HEADER_LEN as u64,
            });
        }
        Ok(prefix + len)
    }

    /// Parses the header at the start of `bytes` (which must hold at least the whole header;
    /// data after it is ignored). `path` names the file in errors.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the problem (magic, version, a header cut short, a malformed
    /// dict, a missing or repeated key, an unsupported or structured dtype, a bad shape);
    /// [`Error::TooLarge`] for a header over 1 MiB or a shape whose byte size overflows `u64`.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let total = Self::header_len(bytes, path)?;
        let (prefix, _) = Self::prefix(bytes, path)?;
        let Some(dict) = bytes.get(prefix..total) else {
            return Err(Error::invalid(
                path,
                format!(
                    "the .npy header says it is {} bytes long, the file has {}",
                    total - prefix,
                    bytes.len() - prefix
                ),
            ));
        };
        let text = std::str::from_utf8(dict)
            .map_err(|_| Error::invalid(path, "the .npy header is not UTF-8 text"))?;
        let bad =
            |problem: String| Error::invalid(path, format!("malformed .npy header: {problem}"));
        let mut parser = Parser { text, at: 0 };
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        parser.expect('{').map_err(bad)?;
        loop {
            parser.skip_space();
            if parser.eat('}') {
                break;
            }
            let key = parser.string().map_err(bad)?;
            parser.expect(':').map_err(bad)?;
            parser.skip_space();
            let repeated = match key {
                "descr" => {
                    if parser.peek() == Some('[') {
                        return Err(Error::invalid(
                            path,
                            "structured .npy dtypes (a list `descr`) are not supported",
                        ));
                    }
                    descr.replace(parser.string().map_err(bad)?).is_some()
                }
                "fortran_order" => fortran.replace(parser.boolean().map_err(bad)?).is_some(),
                "shape" => shape.replace(parser.shape().map_err(bad)?).is_some(),
                other => return Err(bad(format!("unexpected key `{}`", other.escape_debug()))),
            };
            if repeated {
                return Err(bad(format!("key `{key}` appears twice")));
            }
            parser.skip_space();
            if !parser.eat(',') {
                parser.skip_space();
                parser.expect('}').map_err(bad)?;
                break;
            }
        }
        let rest = parser.text[parser.at..].trim_matches([' ', '\n', '\r', '\t', '\0']);
        if !rest.is_empty() {
            return Err(bad("text after the closing `}`".into()));
        }
        let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran, shape) else {
            return Err(bad(
                "`descr`, `fortran_order` and `shape` are all required".into()
            ));
        };
        let dtype: Dtype = descr.parse().map_err(|e: String| Error::invalid(path, e))?;
        let header = Self {
            dtype,
            fortran_order,
            shape,
            data_offset: total as u64,
        };
        if header.data_len().is_none() {
            return Err(Error::TooLarge {
                path: path.to_path_buf(),
                what: format!("an array of shape {:?} of {}", header.shape, header.dtype),
                size: u64::MAX,
                limit: u64::MAX,
            });
        }
        Ok(header)
    }

    /// The number of elements, or `None` if it overflows `u64`.
    #[must_use]
    pub fn num_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
    }

    /// The data's length in bytes, or `None` if it overflows `u64`.
    #[must_use]
    pub fn data_len(&self) -> Option<u64> {
        self.num_elements()?.checked_mul(self.dtype.size as u64)
    }

    /// The header bytes numpy would write for this dtype, order and shape (version 1, or 2 if
    /// the dict needs more than 65535 bytes), padded so the data starts on a 64-byte boundary.
    #[must_use]
    pub fn encode(dtype: Dtype, fortran_order: bool, shape: &[u64]) -> Vec<u8> {
        let shape_text = match shape {
            [single] => format!("({single},)"),
            dims => format!(
                "({})",
                dims.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let order = if fortran_order { "True" } else { "False" };
        let dict =
            format!("{{'descr': '{dtype}', 'fortran_order': {order}, 'shape': {shape_text}, }}");
        let (version, prefix) = if dict.len() + 128 <= usize::from(u16::MAX) {
            (1u8, 10)
        } else {
            (2u8, 12)
        };
        let unpadded = prefix + dict.len() + 1;
        let padding = unpadded.next_multiple_of(64) - unpadded;
        let len = dict.len() + padding + 1;
        let mut bytes = Vec::with_capacity(prefix + len);
        bytes.extend_from_slice(NPY_MAGIC);
        bytes.extend_from_slice(&[version, 0]);
        if version == 1 {
            bytes.extend_from_slice(&(len as u16).to_le_bytes());
        } else {
            bytes.extend_from_slice(&(len as u32).to_le_bytes());
        }
        bytes.extend_from_slice(dict.as_bytes());
        bytes.resize(bytes.len() + padding, b' ');
        bytes.push(b'\n');
        bytes
    }
}

/// A cursor over the header dict's text; each method reports what it expected.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn skip_space(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_ascii_whitespace()) {
            self.at += c.len_utf8();
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        self.skip_space();
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{c}` at byte {}", self.at))
        }
    }

    /// A quoted string without escapes.
    fn string(&mut self) -> Result<&'a str, String> {
        let quote = match self.peek() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(format!("expected a quoted string at byte {}", self.at)),
        };
        let start = self.at + 1;
        let Some(len) = self.text[start..].find(quote) else {
            return Err("a string is not closed".into());
        };
        let value = &self.text[start..start + len];
        if value.contains('\\') {
            return Err("escapes in strings are not supported".into());
        }
        self.at = start + len + 1;
        Ok(value)
    }

    fn boolean(&mut self) -> Result<bool, String> {
        let rest = &self.text[self.at..];
        if rest.starts_with("True") {
            self.at += 4;
            Ok(true)
        } else if rest.starts_with("False") {
            self.at += 5;
            Ok(false)
        } else {
            Err(format!("expected True or False at byte {}", self.at))
        }
    }

    /// A tuple of non-negative integers: `()`, `(3,)`, `(3000, 4)`.
    fn shape(&mut self) -> Result<Vec<u64>, String> {
        self.expect('(')?;
        let mut dims = Vec::new();
        loop {
            self.skip_space();
            if self.eat(')') {
                break;
            }
            let digits_start = self.at;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.at += 1;
            }
            let digits = &self.text[digits_start..self.at];
            let dim: u64 = digits.parse().map_err(|_| {
                format!("expected a non-negative integer dimension at byte {digits_start}")
            })?;
            if dims.len() == MAX_DIMS {
                return Err(format!("more than {MAX_DIMS} dimensions"));
            }
            dims.push(dim);
            self.skip_space();
            if !self.eat(',') {
                self.expect(')')?;
                break;
            }
        }
        Ok(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_parse() {
        for (dtype, fortran, shape) in [
            ("<i2", false, vec![3000u64, 4]),
            (">f8", true, vec![7]),
            ("|b1", false, vec![]),
        ] {
            let dtype: Dtype = dtype.parse().unwrap();
            let bytes = NpyHeader::encode(dtype, fortran, &shape);
            assert_eq!(bytes.len() % 64, 0);
            let header = NpyHeader::parse(&bytes, Path::new("x.npy")).unwrap();
            assert_eq!(
                (header.dtype, header.fortran_order, header.shape),
                (dtype, fortran, shape)
            );
            assert_eq!(header.data_offset, bytes.len() as u64);
        }
    }

    #[test]
    fn refuses_bad_headers() {
        let path = Path::new("bad.npy");
        let with_dict = |dict: &str| {
            let mut bytes = NPY_MAGIC.to_vec();
            bytes.extend_from_slice(&[1, 0]);
            bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            bytes.extend_from_slice(dict.as_bytes());
            bytes
        };
        for dict in [
            "{'descr': '<i2', 'fortran_order': False}",
            "{'descr': '<i2', 'fortran_order': False, 'shape': (-1,), }",
            "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}",
            "{'descr': [('a', '<i2')], 'fortran_order': False, 'shape': (3,)}",
            "{'descr': '<c16', 'fortran_order': False, 'shape': (3,)}",
            "{'descr': '<i2', 'fortran_order': Maybe, 'shape': (3,)}",
            "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
            "{'descr': '<i2', 'fortran_order': False, 'shape': (3,)} x",
            "{'descr': '<i2",
        ] {
            let error = NpyHeader::parse(&with_dict(dict), path).unwrap_err();
            assert_eq!(error.path(), path, "{dict}");
        }
        assert!(NpyHeader::parse(b"\x93NUMPY\x01\x00\xff\xff{}", path).is_err());
        assert!(NpyHeader::parse(b"PK\x03\x04", path).is_err());
    }
}
