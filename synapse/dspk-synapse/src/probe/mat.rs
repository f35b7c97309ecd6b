//! A small reader of MATLAB Level 5 MAT-files (`MathWorks`, "MAT-File Format", the v5/v6/v7
//! layout), enough for Kilosort channel maps: numeric, logical and char arrays, stored plainly
//! or in `miCOMPRESSED` (zlib) elements as MATLAB's `save` writes by default.
//!
//! Layout: a 128-byte header (116 bytes of text, 8 bytes of subsystem offset, a 2-byte version
//! `0x0100`, a 2-byte endian indicator `IM` for little-endian files or `MI` for big-endian),
//! then data elements. Each element has an 8-byte tag (`u32` data type, `u32` byte count) and
//! its data padded to 8 bytes, or, for 1 to 4 bytes of data, the "small data element" form:
//! the byte count in the tag's upper 16 bits, the type in the lower 16 and the data in the
//! tag's second 4 bytes. A variable is an `miMATRIX` element holding, in order, the array
//! flags (`miUINT32` x 2: class in the low byte, complex/global/logical bits above), the
//! dimensions (`miINT32`), the name (`miINT8`) and the real part (any numeric type, converted
//! to the class). `miCOMPRESSED` elements hold a zlib stream of one `miMATRIX` element.
//!
//! Everything is checked against the bytes present: an element's byte count against what is
//! left, an array's element count (the product of its dimensions) against its data's byte
//! count, inflated data against [`MAT_INFLATE_LIMIT`]. Nothing is allocated from a header
//! value alone. Variables of other classes (cell, struct, object, sparse, function handles)
//! and complex arrays are kept as [`MatValue::Unsupported`] so that only a variable that is
//! actually needed fails, with an error naming it.

use std::io::Read;
use std::path::Path;

use crate::{Error, Result};

/// The most bytes all `miCOMPRESSED` elements of one file may inflate to: 64 MiB (a
/// 4096-channel map is well under 1 MiB).
pub(crate) const MAT_INFLATE_LIMIT: u64 = 64 << 20;

/// One variable of a MAT-file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MatVariable {
    /// The variable's name.
    pub(crate) name: String,
    /// Its dimensions, as stored (MATLAB arrays have at least 2).
    pub(crate) dims: Vec<usize>,
    /// Its values.
    pub(crate) value: MatValue,
}

/// The values of a variable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MatValue {
    /// A numeric or logical array, in MATLAB's column-major order, converted to `f64`
    /// (64-bit integers beyond 2^53 lose precision).
    Numeric {
        /// The values.
        values: Vec<f64>,
        /// The array is `logical`.
        logical: bool,
    },
    /// A char array's characters in column-major order.
    Char(String),
    /// A variable this reader does not decode; says what it is (`"a cell array"`).
    Unsupported(&'static str),
}

/// Byte order of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Self::Little => u32::from_le_bytes(a),
            Self::Big => u32::from_be_bytes(a),
        }
    }

    fn u16(self, b: &[u8]) -> u16 {
        match self {
            Self::Little => u16::from_le_bytes([b[0], b[1]]),
            Self::Big => u16::from_be_bytes([b[0], b[1]]),
        }
    }

    /// `N` bytes in the file's order as a little-endian array.
    fn le<const N: usize>(self, b: &[u8]) -> [u8; N] {
        let mut a = [0; N];
        a.copy_from_slice(&b[..N]);
        if self == Self::Big {
            a.reverse();
        }
        a
    }
}

// Data types (MAT-File Format, table "MAT-File Data Types").
const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;
const MI_UTF8: u32 = 16;
const MI_UTF16: u32 = 17;
const MI_UTF32: u32 = 18;

// Array classes (table "MATLAB Array Types (Classes)").
const MX_CHAR: u8 = 4;

/// One data element: its type, its data and where the next element starts.
struct Element<'a> {
    data_type: u32,
    data: &'a [u8],
    next: usize,
}

/// Reads the data element at `offset` of `bytes` (small or normal form); `what` names the
/// place for errors.
fn element<'a>(
    bytes: &'a [u8],
    offset: usize,
    endian: Endian,
    path: &Path,
    what: &str,
) -> Result<Element<'a>> {
    let truncated = |needed: usize| {
        Error::Io(dspk_io::Error::Truncated {
            path: path.to_path_buf(),
            what: what.to_string(),
            needed: needed as u64,
            actual: bytes.len() as u64,
        })
    };
    let tag_end = offset.checked_add(8).ok_or_else(|| truncated(usize::MAX))?;
    let tag = bytes
        .get(offset..tag_end)
        .ok_or_else(|| truncated(tag_end))?;
    let first = endian.u32(&tag[..4]);
    if first >> 16 != 0 {
        // Small data element: the count in the upper half-word, the data in the tag.
        let count = (first >> 16) as usize;
        if count > 4 {
            return Err(Error::invalid(
                path,
                format!("{what}: a small data element claims {count} bytes (at most 4 fit)"),
            ));
        }
        return Ok(Element {
            data_type: first & 0xFFFF,
            data: &tag[4..4 + count],
            next: tag_end,
        });
    }
    let count = endian.u32(&tag[4..]) as usize;
    let end = tag_end
        .checked_add(count)
        .ok_or_else(|| truncated(usize::MAX))?;
    let data = bytes.get(tag_end..end).ok_or_else(|| truncated(end))?;
    // Elements are padded to 8 bytes; compressed elements are not (MATLAB writes them back to
    // back), and the last element of a stream may end without its padding.
    let next = if first == MI_COMPRESSED {
        end
    } else {
        end.div_ceil(8).saturating_mul(8).min(bytes.len().max(end))
    };
    Ok(Element {
        data_type: first,
        data,
        next,
    })
}

/// Reads every variable of a Level 5 MAT-file held in `bytes`; errors name `path`.
///
/// # Errors
///
/// [`dspk_io::Error::Truncated`] if the header or an element is cut short; [`dspk_io::Error::Invalid`] for a
/// wrong endian indicator, a malformed element or dimensions that disagree with the data;
/// [`dspk_io::Error::Unsupported`] for other versions (v7.3 files are HDF5) and v4 files;
/// [`dspk_io::Error::Library`] if a compressed element does not inflate.
pub(crate) fn read_mat(bytes: &[u8], path: &Path) -> Result<Vec<MatVariable>> {
    if bytes.len() < 128 {
        return Err(Error::Io(dspk_io::Error::Truncated {
            path: path.to_path_buf(),
            what: "the MAT-file header".into(),
            needed: 128,
            actual: bytes.len() as u64,
        }));
    }
    let endian = match &bytes[126..128] {
        b"IM" => Endian::Little,
        b"MI" => Endian::Big,
        other => {
            return Err(Error::invalid(
                path,
                format!(
                    "not a Level 5 MAT-file: the endian indicator is {:?}, expected \"IM\" or \
                     \"MI\" (MATLAB v4 files have none)",
                    String::from_utf8_lossy(other)
                ),
            ));
        }
    };
    let version = endian.u16(&bytes[124..126]);
    if version != 0x0100 {
        let hint = if version == 0x0200 {
            " (a v7.3 MAT-file, which is HDF5: save with -v7)"
        } else {
            ""
        };
        return Err(Error::unsupported(
            path,
            format!("MAT-file version {version:#06x}{hint}; Level 5 files have 0x0100"),
        ));
    }
    let mut inflate_budget = MAT_INFLATE_LIMIT;
    let mut variables = Vec::new();
    let mut offset = 128;
    while offset < bytes.len() {
        let what = format!("the data element at byte {offset}");
        let el = element(bytes, offset, endian, path, &what)?;
        match el.data_type {
            MI_MATRIX => variables.push(matrix(el.data, endian, path, &what)?),
            MI_COMPRESSED => {
                let inflated = inflate(el.data, &mut inflate_budget, path, &what)?;
                let inner_what = format!("{what} (inflated)");
                let inner = element(&inflated, 0, endian, path, &inner_what)?;
                if inner.data_type != MI_MATRIX {
                    return Err(Error::invalid(
                        path,
                        format!(
                            "{inner_what}: holds a data element of type {}, expected miMATRIX \
                             (14)",
                            inner.data_type
                        ),
                    ));
                }
                variables.push(matrix(inner.data, endian, path, &inner_what)?);
            }
            other => {
                return Err(Error::invalid(
                    path,
                    format!(
                        "{what}: type {other} at the top level, expected miMATRIX (14) or \
                         miCOMPRESSED (15)"
                    ),
                ));
            }
        }
        offset = el.next;
    }
    Ok(variables)
}

/// Inflates a zlib stream, charging its size to `budget`.
fn inflate(data: &[u8], budget: &mut u64, path: &Path, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(data)
        .take(*budget + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::library(path, format!("inflating {what}"), e))?;
    let size = out.len() as u64;
    if size > *budget {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: compressed variables inflate to more than {MAT_INFLATE_LIMIT} bytes in all"
            ),
        ));
    }
    *budget -= size;
    Ok(out)
}

/// Decodes the contents of an `miMATRIX` element.
fn matrix(data: &[u8], endian: Endian, path: &Path, what: &str) -> Result<MatVariable> {
    let flags = element(data, 0, endian, path, &format!("{what}: array flags"))?;
    if flags.data_type != MI_UINT32 || flags.data.len() != 8 {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: the array flags are type {} with {} bytes, expected miUINT32 (6) with 8",
                flags.data_type,
                flags.data.len()
            ),
        ));
    }
    let flag_word = endian.u32(flags.data);
    let class = (flag_word & 0xFF) as u8;
    let complex = flag_word & 0x0800 != 0;
    let logical = flag_word & 0x0200 != 0;

    let dims_el = element(
        data,
        flags.next,
        endian,
        path,
        &format!("{what}: dimensions"),
    )?;
    if dims_el.data_type != MI_INT32
        || !dims_el.data.len().is_multiple_of(4)
        || dims_el.data.len() < 8
    {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: the dimensions are type {} with {} bytes, expected at least 2 miINT32 \
                 (5)",
                dims_el.data_type,
                dims_el.data.len()
            ),
        ));
    }
    let dims = dims_el
        .data
        .chunks_exact(4)
        .map(|d| {
            let v = i32::from_le_bytes(endian.le(d));
            usize::try_from(v)
                .map_err(|_| Error::invalid(path, format!("{what}: negative dimension {v}")))
        })
        .collect::<Result<Vec<_>>>()?;

    let name_el = element(
        data,
        dims_el.next,
        endian,
        path,
        &format!("{what}: array name"),
    )?;
    if !matches!(name_el.data_type, MI_INT8 | MI_UINT8) {
        return Err(Error::invalid(
            path,
            format!(
                "{what}: the array name is type {}, expected miINT8 (1)",
                name_el.data_type
            ),
        ));
    }
    let name = String::from_utf8_lossy(name_el.data).into_owned();

    let unsupported = match class {
        1 => Some("a cell array"),
        2 => Some("a struct"),
        3 => Some("an object"),
        5 => Some("a sparse array"),
        16 => Some("a function handle"),
        17 => Some("an opaque object"),
        4 | 6..=15 if complex => Some("a complex array"),
        4 | 6..=15 => None,
        _ => Some("an array of an unknown class"),
    };
    if let Some(kind) = unsupported {
        return Ok(MatVariable {
            name,
            dims,
            value: MatValue::Unsupported(kind),
        });
    }

    let count = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let count = count.ok_or_else(|| {
        Error::invalid(
            path,
            format!("{what}: variable `{name}`: dimensions {dims:?} overflow"),
        )
    })?;
    let real = element(
        data,
        name_el.next,
        endian,
        path,
        &format!("{what}: variable `{name}`: real part"),
    )?;
    let value =
        if class == MX_CHAR {
            MatValue::Char(chars(real.data_type, real.data, count, endian).ok_or_else(|| {
            Error::invalid(
                path,
                format!(
                    "{what}: char variable `{name}` ({dims:?}) has {} bytes of type {}, which \
                     are not {count} characters",
                    real.data.len(),
                    real.data_type
                ),
            )
        })?)
        } else {
            let size = match real.data_type {
                MI_INT8 | MI_UINT8 => 1,
                MI_INT16 | MI_UINT16 => 2,
                MI_INT32 | MI_UINT32 | MI_SINGLE => 4,
                MI_DOUBLE | MI_INT64 | MI_UINT64 => 8,
                other => {
                    return Err(Error::invalid(
                        path,
                        format!("{what}: variable `{name}`: numeric data of type {other}"),
                    ));
                }
            };
            // The element count is checked against the bytes present before anything is
            // allocated.
            if count.checked_mul(size) != Some(real.data.len()) {
                return Err(Error::invalid(
                    path,
                    format!(
                        "{what}: variable `{name}` has dimensions {dims:?} ({count} values) but {} \
                     bytes of {size}-byte data",
                        real.data.len()
                    ),
                ));
            }
            MatValue::Numeric {
                values: numbers(real.data_type, real.data, endian),
                logical,
            }
        };
    Ok(MatVariable { name, dims, value })
}

/// Values of numeric data of `data_type` (its size already checked) as `f64`.
fn numbers(data_type: u32, data: &[u8], endian: Endian) -> Vec<f64> {
    match data_type {
        MI_INT8 => data.iter().map(|&b| f64::from(b as i8)).collect(),
        MI_UINT8 => data.iter().map(|&b| f64::from(b)).collect(),
        MI_INT16 => data
            .chunks_exact(2)
            .map(|b| f64::from(i16::from_le_bytes(endian.le(b))))
            .collect(),
        MI_UINT16 => data
            .chunks_exact(2)
            .map(|b| f64::from(u16::from_le_bytes(endian.le(b))))
            .collect(),
        MI_INT32 => data
            .chunks_exact(4)
            .map(|b| f64::from(i32::from_le_bytes(endian.le(b))))
            .collect(),
        MI_UINT32 => data
            .chunks_exact(4)
            .map(|b| f64::from(u32::from_le_bytes(endian.le(b))))
            .collect(),
        MI_SINGLE => data
            .chunks_exact(4)
            .map(|b| f64::from(f32::from_le_bytes(endian.le(b))))
            .collect(),
        MI_INT64 => data
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(endian.le(b)) as f64)
            .collect(),
        MI_UINT64 => data
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(endian.le(b)) as f64)
            .collect(),
        _ => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(endian.le(b)))
            .collect(),
    }
}

/// The characters of char data, or `None` if they are not `count` characters.
fn chars(data_type: u32, data: &[u8], count: usize, endian: Endian) -> Option<String> {
    let text: String = match data_type {
        MI_UTF8 => std::str::from_utf8(data).ok()?.to_string(),
        MI_INT8 | MI_UINT8 => data.iter().map(|&b| char::from(b)).collect(),
        MI_UINT16 | MI_UTF16 => {
            if !data.len().is_multiple_of(2) {
                return None;
            }
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes(endian.le(b)))
                .collect();
            // MATLAB chars are UTF-16 code units; a lone surrogate becomes U+FFFD.
            if units.len() != count {
                return None;
            }
            return Some(
                char::decode_utf16(units)
                    .map(|c| c.unwrap_or('\u{FFFD}'))
                    .collect(),
            );
        }
        MI_UTF32 => {
            if !data.len().is_multiple_of(4) {
                return None;
            }
            data.chunks_exact(4)
                .map(|b| char::from_u32(u32::from_le_bytes(endian.le(b))))
                .collect::<Option<_>>()?
        }
        _ => return None,
    };
    (text.chars().count() == count).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian header with `version` and `indicator`.
    fn header(version: u16, indicator: &[u8; 2]) -> Vec<u8> {
        let mut h = vec![b' '; 116];
        h[..10].copy_from_slice(b"MATLAB 5.0");
        h.extend_from_slice(&[0; 8]);
        h.extend_from_slice(&version.to_le_bytes());
        h.extend_from_slice(indicator);
        h
    }

    /// A little-endian element with padding.
    fn el(data_type: u32, data: &[u8]) -> Vec<u8> {
        let mut out = data_type.to_le_bytes().to_vec();
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(8) * 8, 0);
        out
    }

    /// A double matrix variable.
    fn double_matrix(name: &str, dims: &[i32], values: &[f64]) -> Vec<u8> {
        let mut body = el(MI_UINT32, &[6, 0, 0, 0, 0, 0, 0, 0]);
        body.extend(el(
            MI_INT32,
            &dims
                .iter()
                .flat_map(|d| d.to_le_bytes())
                .collect::<Vec<_>>(),
        ));
        body.extend(el(MI_INT8, name.as_bytes()));
        body.extend(el(
            MI_DOUBLE,
            &values
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>(),
        ));
        el(MI_MATRIX, &body)
    }

    #[test]
    fn reads_plain_and_compressed_variables_and_checks_sizes() {
        let path = Path::new("t.mat");
        let mut file = header(0x0100, b"IM");
        file.extend(double_matrix("a", &[2, 1], &[1.5, -2.0]));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &double_matrix("b", &[1, 1], &[7.0])).unwrap();
        let compressed = z.finish().unwrap();
        file.extend(MI_COMPRESSED.to_le_bytes());
        file.extend((compressed.len() as u32).to_le_bytes());
        file.extend(&compressed);
        let vars = read_mat(&file, path).unwrap();
        assert_eq!(vars.len(), 2);
        assert_eq!(vars[0].name, "a");
        assert_eq!(vars[0].dims, vec![2, 1]);
        assert_eq!(
            vars[0].value,
            MatValue::Numeric {
                values: vec![1.5, -2.0],
                logical: false
            }
        );
        assert_eq!(vars[1].name, "b");

        // Dimensions that promise more values than the data holds.
        let mut bad = header(0x0100, b"IM");
        bad.extend(double_matrix("a", &[1_000_000, 1_000_000], &[1.0]));
        let err = read_mat(&bad, path).unwrap_err().to_string();
        assert!(err.contains("dimensions [1000000, 1000000]"), "{err}");
        // Dimensions whose product overflows.
        let mut bad = header(0x0100, b"IM");
        bad.extend(double_matrix("a", &[i32::MAX, i32::MAX, i32::MAX], &[1.0]));
        let err = read_mat(&bad, path).unwrap_err().to_string();
        assert!(err.contains("overflow"), "{err}");
        // A v7.3 header and a wrong indicator.
        let err = read_mat(&header(0x0200, b"IM"), path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("v7.3"), "{err}");
        let err = read_mat(&header(0x0100, b"XX"), path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("endian indicator"), "{err}");
    }

    #[test]
    fn reads_big_endian_files() {
        let mut file = header(0, b"MI");
        file[124..126].copy_from_slice(&0x0100u16.to_be_bytes());
        let be = |words: &[u32]| {
            words
                .iter()
                .flat_map(|w| w.to_be_bytes())
                .collect::<Vec<_>>()
        };
        let mut body = be(&[MI_UINT32, 8, 6, 0]);
        body.extend(be(&[MI_INT32, 8, 2, 1]));
        // The name `x` as a small data element: count 1 and type miINT8 in one word.
        body.extend(be(&[(1 << 16) | MI_INT8]));
        body.extend([b'x', 0, 0, 0]);
        body.extend(be(&[MI_DOUBLE, 16]));
        body.extend(2.5f64.to_be_bytes());
        body.extend((-1.0f64).to_be_bytes());
        file.extend(be(&[MI_MATRIX, body.len() as u32]));
        file.extend(body);
        let vars = read_mat(&file, Path::new("be.mat")).unwrap();
        assert_eq!(vars[0].name, "x");
        assert_eq!(vars[0].dims, vec![2, 1]);
        assert_eq!(
            vars[0].value,
            MatValue::Numeric {
                values: vec![2.5, -1.0],
                logical: false
            }
        );
    }

    #[test]
    fn bounds_inflated_size() {
        let mut budget = 1000;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, &vec![0u8; 5000]).unwrap();
        let data = z.finish().unwrap();
        let err = inflate(&data, &mut budget, Path::new("z.mat"), "x").unwrap_err();
        assert!(err.to_string().contains("inflate to more than"), "{err}");
    }
}
