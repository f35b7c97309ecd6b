//! `.npy` arrays held in memory with their dtype: read, converted, written.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::header::NpyHeader;
use crate::dtype::{ByteOrder, Dtype, ElementKind};
use crate::file::DataFile;
use crate::{Error, Result};

/// An array read from a `.npy` file (or an `.npz` member), with its dtype decided at run time:
/// the raw element bytes as stored, plus dtype, shape and order.
///
/// Convert with [`to_f64`](Self::to_f64), [`to_i64`](Self::to_i64) or
/// [`to_strings`](Self::to_strings), which return elements in C (row-major) order whatever the
/// stored order and byte order, and refuse a dtype they cannot convert exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    dtype: Dtype,
    fortran_order: bool,
    shape: Vec<u64>,
    data: Vec<u8>,
    /// The file it came from (`<memory>` for arrays built in memory), named in errors.
    path: PathBuf,
}

impl NpyArray {
    /// An array from its parts.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] (with path `"<memory>"`) if `data` is not `shape`'s element count
    /// times the element size.
    pub fn new(dtype: Dtype, fortran_order: bool, shape: Vec<u64>, data: Vec<u8>) -> Result<Self> {
        let expected = shape
            .iter()
            .try_fold(dtype.size as u64, |n, &d| n.checked_mul(d));
        if expected != Some(data.len() as u64) {
            return Err(Error::invalid(
                Path::new("<memory>"),
                format!(
                    "an array of shape {shape:?} of {dtype} needs {expected:?} bytes, got {}",
                    data.len()
                ),
            ));
        }
        Ok(Self {
            dtype,
            fortran_order,
            shape,
            data,
            path: PathBuf::from("<memory>"),
        })
    }

    /// A one-dimensional little-endian `float64` array.
    #[must_use]
    pub fn from_f64(values: &[f64]) -> Self {
        Self {
            dtype: Dtype {
                kind: ElementKind::Float,
                size: 8,
                order: ByteOrder::Little,
            },
            fortran_order: false,
            shape: vec![values.len() as u64],
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            path: PathBuf::from("<memory>"),
        }
    }

    /// Reads a whole `.npy` file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it cannot be read; the header's errors (see [`NpyHeader::parse`]);
    /// [`Error::Truncated`] if the file is shorter than the header says.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = DataFile::open(path)?;
        let header = read_header(&file)?;
        let len = header.data_len().unwrap_or(u64::MAX);
        let available = file.len().saturating_sub(header.data_offset);
        if len > available {
            return Err(Error::Truncated {
                path: path.to_path_buf(),
                what: format!("an array of shape {:?} of {}", header.shape, header.dtype),
                needed: header.data_offset.saturating_add(len),
                actual: file.len(),
            });
        }
        // Bounded by the file's length, checked above.
        let mut data = vec![0u8; len as usize];
        file.read_exact_at(header.data_offset, &mut data)?;
        Ok(Self {
            dtype: header.dtype,
            fortran_order: header.fortran_order,
            shape: header.shape,
            data,
            path: path.to_path_buf(),
        })
    }

    /// Parses a whole `.npy` file held in `bytes` (`path` names it in errors).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), without I/O errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        let header = NpyHeader::parse(bytes, path)?;
        let len = header.data_len().unwrap_or(u64::MAX);
        let data = usize::try_from(header.data_offset)
            .ok()
            .zip(usize::try_from(len).ok())
            .and_then(|(offset, len)| bytes.get(offset..offset.checked_add(len)?));
        let Some(data) = data else {
            return Err(Error::Truncated {
                path: path.to_path_buf(),
                what: format!("an array of shape {:?} of {}", header.shape, header.dtype),
                needed: header.data_offset.saturating_add(len),
                actual: bytes.len() as u64,
            });
        };
        Ok(Self {
            dtype: header.dtype,
            fortran_order: header.fortran_order,
            shape: header.shape,
            data: data.to_vec(),
            path: path.to_path_buf(),
        })
    }

    /// Writes the array as a `.npy` file (version 1 header, 64-byte aligned data).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file cannot be written.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let mut file = File::create(path).map_err(|e| Error::io(path, "create", e))?;
        file.write_all(&self.to_bytes())
            .map_err(|e| Error::io(path, "write", e))
    }

    /// The array as the bytes of a `.npy` file.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = NpyHeader::encode(self.dtype, self.fortran_order, &self.shape);
        bytes.extend_from_slice(&self.data);
        bytes
    }

    /// The element type.
    #[must_use]
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The shape.
    #[must_use]
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Whether the data is stored in Fortran (column-major) order.
    #[must_use]
    pub fn fortran_order(&self) -> bool {
        self.fortran_order
    }

    /// The element bytes as stored (in the stored order and byte order).
    #[must_use]
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The number of elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size.max(1)
    }

    /// Whether the array has no elements.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The file the array was read from (`<memory>` for arrays built in memory).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored bytes of each element, in C (row-major) order.
    fn elements_c_order(&self) -> impl Iterator<Item = &[u8]> {
        let size = self.dtype.size;
        // The data holds every element, so each dimension (and each stride) fits in usize.
        let shape: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        let fortran = self.fortran_order && shape.len() > 1 && !self.data.is_empty();
        let mut strides = vec![0usize; shape.len()];
        let mut stride = 1;
        for (d, &dim) in shape.iter().enumerate() {
            strides[d] = stride;
            stride = stride.saturating_mul(dim);
        }
        (0..self.len()).map(move |index| {
            let stored = if fortran {
                // Unravel the C index, then ravel it in Fortran order.
                let (mut rest, mut offset) = (index, 0);
                for (d, &dim) in shape.iter().enumerate().rev() {
                    offset += (rest % dim) * strides[d];
                    rest /= dim;
                }
                offset
            } else {
                index
            };
            &self.data[stored * size..(stored + 1) * size]
        })
    }

    /// The elements as `f64`, in C order: exact for bool, integers up to 32 bits and floats;
    /// 64-bit integers are converted only if every value is exactly representable.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the array's file, for a non-numeric dtype or a 64-bit integer that
    /// `f64` cannot hold exactly.
    pub fn to_f64(&self) -> Result<Vec<f64>> {
        let wrong = || {
            Error::invalid(
                &self.path,
                format!("cannot read {} values as float64 exactly", self.dtype),
            )
        };
        if !self.dtype.is_numeric() {
            return Err(wrong());
        }
        let mut values = Vec::with_capacity(self.len());
        for bytes in self.elements_c_order() {
            let value = match (self.dtype.kind, self.dtype.size) {
                (ElementKind::Float, 4) => {
                    f64::from(f32::from_bits(le_bits(bytes, self.dtype.order) as u32))
                }
                (ElementKind::Float, _) => f64::from_bits(le_bits(bytes, self.dtype.order)),
                _ => {
                    let integer = self.integer(bytes).ok_or_else(wrong)?;
                    let float = integer as f64;
                    if float as i128 != integer {
                        return Err(wrong());
                    }
                    float
                }
            };
            values.push(value);
        }
        Ok(values)
    }

    /// The elements as `i64`, in C order (bool and integers that fit).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the array's file, for a float or text dtype, or a `uint64` value
    /// over `i64::MAX`.
    pub fn to_i64(&self) -> Result<Vec<i64>> {
        let wrong = || {
            Error::invalid(
                &self.path,
                format!("cannot read {} values as int64 exactly", self.dtype),
            )
        };
        self.elements_c_order()
            .map(|bytes| {
                self.integer(bytes)
                    .and_then(|v| i64::try_from(v).ok())
                    .ok_or_else(wrong)
            })
            .collect()
    }

    /// The elements of a text array (`U` or `S`) as strings, in C order, with trailing NULs
    /// removed.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the array's file, for a numeric dtype or text that is not valid
    /// UTF-32 / UTF-8.
    pub fn to_strings(&self) -> Result<Vec<String>> {
        let bad = |why: &str| {
            Error::invalid(
                &self.path,
                format!("cannot read {} values as text: {why}", self.dtype),
            )
        };
        self.elements_c_order()
            .map(|bytes| match self.dtype.kind {
                ElementKind::Unicode => bytes
                    .chunks_exact(4)
                    .map(|unit| {
                        let unit = [unit[0], unit[1], unit[2], unit[3]];
                        let code = match self.dtype.order {
                            ByteOrder::Little => u32::from_le_bytes(unit),
                            ByteOrder::Big => u32::from_be_bytes(unit),
                        };
                        char::from_u32(code).ok_or_else(|| bad("an invalid code point"))
                    })
                    .collect::<Result<String>>()
                    .map(|s| s.trim_end_matches('\0').to_string()),
                ElementKind::Bytes => String::from_utf8(bytes.to_vec())
                    .map(|s| s.trim_end_matches('\0').to_string())
                    .map_err(|_| bad("bytes that are not UTF-8")),
                _ => Err(bad("not a text dtype")),
            })
            .collect()
    }

    /// One bool or integer element as `i128`, or `None` for other kinds.
    fn integer(&self, bytes: &[u8]) -> Option<i128> {
        let bits = le_bits(bytes, self.dtype.order);
        let size = self.dtype.size;
        match self.dtype.kind {
            ElementKind::Bool => Some(i128::from(bits != 0)),
            ElementKind::UInt => Some(i128::from(bits)),
            ElementKind::Int => {
                let shift = 64 - 8 * size as u32;
                Some(i128::from(((bits << shift) as i64) >> shift))
            }
            _ => None,
        }
    }
}

/// The value of up to 8 bytes in `order` as an unsigned integer.
fn le_bits(bytes: &[u8], order: ByteOrder) -> u64 {
    let fold = |bits: u64, &b: &u8| (bits << 8) | u64::from(b);
    match order {
        ByteOrder::Little => bytes.iter().rev().fold(0, fold),
        ByteOrder::Big => bytes.iter().fold(0, fold),
    }
}

/// Reads and parses the header of an open `.npy` file, reading no more than the header.
pub(crate) fn read_header(file: &DataFile) -> Result<NpyHeader> {
    let path = file.path();
    let mut first = [0u8; 12];
    let available = file.len().min(12) as usize;
    file.read_exact_at(0, &mut first[..available])?;
    let total = NpyHeader::header_len(&first[..available], path)?;
    if total as u64 > file.len() {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            what: "the .npy header".into(),
            needed: total as u64,
            actual: file.len(),
        });
    }
    // Bounded by the 1 MiB header limit and the file's length.
    let mut bytes = vec![0u8; total];
    file.read_exact_at(0, &mut bytes)?;
    NpyHeader::parse(&bytes, path)
}

/// Reads at most `limit` bytes of `reader` (which may be shorter) into a vector that grows
/// with what is actually read, never with what a header claims.
pub(crate) fn read_bounded(reader: impl Read, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}
