//! The cache file of a pyramid: a header naming the recording and the layout, a table of the
//! pages filled, and one fixed-size slot per page, each with its checksum.
//!
//! ```text
//! 0     magic "DSPKPYR\0", format version (u32), 0 (u32)
//! 16    recording: file size (u64), modification time in ns since the Unix epoch (i128),
//!       channels (u64), samples (u64), sample rate numerator and denominator (u64, u64)
//! 72    layout: base bucket, factor, page samples (u64 each)
//! 96    checksum of bytes 0..96 (u64), zeros up to 128
//! 128   one byte per page: 1 when its slot was written whole, else 0
//! slots (from the next multiple of 8): per page its values, NaN counts and checksum
//! ```
//!
//! Everything is little-endian. A slot is written before its byte in the table, and a page
//! whose checksum fails on opening is built again, so a write cut short is never trusted.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use dspk_core::{RecordingInfo, SampleRate};

use crate::pyramid::layout::PyramidLayout;
use crate::pyramid::page::{PageData, checksum};
use crate::{Error, Result};

const MAGIC: [u8; 8] = *b"DSPKPYR\0";
const VERSION: u32 = 1;
const HEADER_LEN: u64 = 128;
const TABLE_AT: u64 = HEADER_LEN;
/// The header's bytes covered by its checksum (the checksum follows them).
const HEADED: usize = 96;

/// What identifies the recording a cache file was built from: a cache is reused only while
/// every field is the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordingSignature {
    /// The recording file's size in bytes.
    pub file_size: u64,
    /// Its modification time, in nanoseconds since the Unix epoch (negative before it).
    pub modified_ns: i128,
    /// Its channels.
    pub channels: u64,
    /// Its samples per channel.
    pub samples: u64,
    /// Its sample rate.
    pub rate: SampleRate,
}

impl RecordingSignature {
    /// The signature of the recording file at `path` (its size and modification time, as the
    /// file system reports them) described by `info`. For a recording of several files, give
    /// the one that holds the samples.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file's metadata cannot be read; [`Error::Cache`] when the system
    /// gives no modification time.
    pub fn of_file(path: &Path, info: &RecordingInfo) -> Result<Self> {
        let metadata = std::fs::metadata(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let modified = metadata.modified().map_err(|e| Error::Cache {
            path: path.to_path_buf(),
            reason: format!("the recording's modification time is not available: {e}"),
        })?;
        let modified_ns = match modified.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_nanos() as i128,
            Err(before) => -(before.duration().as_nanos() as i128),
        };
        Ok(Self {
            file_size: metadata.len(),
            modified_ns,
            channels: info.num_channels() as u64,
            samples: info.num_samples,
            rate: info.sample_rate,
        })
    }

    /// What differs from the recording a cache header names, in words, or `None` when
    /// nothing does.
    fn difference(&self, stored: &StoredSignature) -> Option<String> {
        if self.file_size != stored.file_size {
            return Some(format!(
                "the recording's size changed ({} -> {} bytes)",
                stored.file_size, self.file_size
            ));
        }
        if self.modified_ns != stored.modified_ns {
            return Some(format!(
                "the recording's modification time changed ({} -> {} ns since the epoch)",
                stored.modified_ns, self.modified_ns
            ));
        }
        if (self.channels, self.samples) != (stored.channels, stored.samples) {
            return Some(format!(
                "the recording's shape changed ({} x {} -> {} x {} samples)",
                stored.channels, stored.samples, self.channels, self.samples
            ));
        }
        let rate = (self.rate.numerator(), self.rate.denominator());
        (rate != stored.rate).then(|| {
            format!(
                "the recording's rate changed ({}/{} -> {}/{} Hz)",
                stored.rate.0, stored.rate.1, rate.0, rate.1
            )
        })
    }
}

/// The recording signature as a cache header stores it.
struct StoredSignature {
    file_size: u64,
    modified_ns: i128,
    channels: u64,
    samples: u64,
    rate: (u64, u64),
}

/// What opening a pyramid found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// The pyramid lives in memory only: every page is to be built.
    InMemory,
    /// A new cache file was made: every page is to be built.
    Fresh,
    /// A cache file of this recording and layout was found: `pages` pages are reused,
    /// `damaged` were marked filled but failed their checksum and will be built again.
    Resumed {
        /// Pages reused.
        pages: u64,
        /// Pages whose slot was damaged (built again).
        damaged: u64,
    },
    /// A cache file was found but could not be used (another recording, a changed one, another
    /// layout, a damaged header, a wrong length); it was emptied and every page is to be built.
    Rebuilt {
        /// Why it could not be used.
        reason: String,
    },
}

/// A pyramid's pages in a cache file, written and read with positional I/O from any thread.
#[derive(Debug)]
pub(crate) struct CacheFile {
    path: PathBuf,
    file: File,
    slots_at: u64,
    slot_len: u64,
}

impl CacheFile {
    /// Opens (or makes) the cache file at `path` for a recording with `signature` and
    /// `layout`; calls `found(page, data)` in page order for each page it reuses.
    pub(crate) fn open(
        path: &Path,
        signature: &RecordingSignature,
        layout: &PyramidLayout,
        mut found: impl FnMut(u64, &PageData),
    ) -> Result<(Self, CacheState)> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        if (signature.channels, signature.samples) != (layout.channels() as u64, layout.samples()) {
            return Err(Error::invalid(
                "pyramid: cache",
                format!(
                    "the layout is for {} x {} samples, the recording has {} x {}",
                    layout.channels(),
                    layout.samples(),
                    signature.channels,
                    signature.samples
                ),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let slots_at = (TABLE_AT + layout.pages()).next_multiple_of(8);
        let slot_len = layout.page_bytes() + 8;
        let cache = Self {
            path: path.to_path_buf(),
            file,
            slots_at,
            slot_len,
        };
        let expected_len = slots_at + layout.pages() * slot_len;
        let len = cache.file.metadata().map_err(io)?.len();
        let mut head = [0u8; HEADER_LEN as usize];
        let present = len.min(HEADER_LEN) as usize;
        read_at(&cache.file, &mut head[..present], 0).map_err(io)?;
        let prefix = present.min(MAGIC.len());
        if head[..prefix] != MAGIC[..prefix] {
            return Err(Error::Cache {
                path: path.to_path_buf(),
                reason: "the file is not a dspk pyramid cache (it does not start with \
                         DSPKPYR); not overwritten"
                    .into(),
            });
        }
        let header = header(signature, layout);
        let reason = if len == 0 {
            None
        } else if present < HEADER_LEN as usize {
            Some(format!(
                "{len} bytes, shorter than the {HEADER_LEN}-byte header"
            ))
        } else if head[8..12] != header[8..12] {
            Some(format!(
                "format version {}, this is version {VERSION}",
                u32::from_le_bytes([head[8], head[9], head[10], head[11]])
            ))
        } else if checksum(0, &head[..HEADED]).to_le_bytes() != head[HEADED..HEADED + 8] {
            Some("its header is damaged (checksum)".into())
        } else if let Some(change) = signature.difference(&read_signature(&head)) {
            Some(change)
        } else if head[72..96] != header[72..96] {
            Some("it was built with another layout (bucket, factor or page)".into())
        } else if len != expected_len {
            Some(format!(
                "{len} bytes, expected {expected_len} (truncated or damaged)"
            ))
        } else {
            return cache.resume(layout, &mut found).map(|state| (cache, state));
        };
        cache.reset(&header, expected_len).map_err(io)?;
        let state = match reason {
            None => CacheState::Fresh,
            Some(reason) => CacheState::Rebuilt { reason },
        };
        Ok((cache, state))
    }

    /// The cache file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the table and checks every page marked filled, calling `found` for the good ones
    /// and unmarking the damaged.
    fn resume(
        &self,
        layout: &PyramidLayout,
        found: &mut impl FnMut(u64, &PageData),
    ) -> Result<CacheState> {
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        // One byte per page; the page count comes from the recording, not from the file.
        let mut table = vec![0u8; layout.pages() as usize];
        read_at(&self.file, &mut table, TABLE_AT).map_err(io)?;
        let mut slot = vec![0u8; self.slot_len as usize];
        let (mut pages, mut damaged) = (0, 0);
        for (page, &mark) in (0u64..).zip(&table) {
            if mark == 0 {
                continue;
            }
            read_at(&self.file, &mut slot, self.slot_at(page)).map_err(io)?;
            match PageData::decode(layout, page, &slot) {
                Some(data) if mark == 1 => {
                    found(page, &data);
                    pages += 1;
                }
                _ => {
                    write_at(&self.file, &[0], TABLE_AT + page).map_err(io)?;
                    damaged += 1;
                }
            }
        }
        Ok(CacheState::Resumed { pages, damaged })
    }

    /// Empties the file and writes a header with no page filled.
    fn reset(&self, header: &[u8], len: u64) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.set_len(len)?;
        write_at(&self.file, header, 0)
    }

    fn slot_at(&self, page: u64) -> u64 {
        self.slots_at + page * self.slot_len
    }

    /// Writes page `page`'s slot (encoded into `scratch`), then marks it filled.
    pub(crate) fn write_page(
        &self,
        page: u64,
        data: &PageData,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        data.encode(page, scratch);
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        write_at(&self.file, scratch, self.slot_at(page)).map_err(io)?;
        write_at(&self.file, &[1], TABLE_AT + page).map_err(io)
    }

    /// Reads `out.len()` values (`f32`) of page `page` from value `at` on.
    pub(crate) fn read_values(
        &self,
        page: u64,
        at: usize,
        out: &mut [f32],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        scratch.resize(4 * out.len(), 0);
        read_at(&self.file, scratch, self.slot_at(page) + 4 * at as u64).map_err(|source| {
            Error::Io {
                path: self.path.clone(),
                source,
            }
        })?;
        for (o, v) in out.iter_mut().zip(crate::pyramid::page::f32s(scratch)) {
            *o = v;
        }
        Ok(())
    }
}

/// The header of a cache for `signature` and `layout`.
fn header(signature: &RecordingSignature, layout: &PyramidLayout) -> Vec<u8> {
    let mut head = Vec::with_capacity(HEADER_LEN as usize);
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&signature.file_size.to_le_bytes());
    head.extend_from_slice(&signature.modified_ns.to_le_bytes());
    for v in [
        signature.channels,
        signature.samples,
        signature.rate.numerator(),
        signature.rate.denominator(),
        layout.base_bucket(),
        layout.factor(),
        layout.page_samples(),
    ] {
        head.extend_from_slice(&v.to_le_bytes());
    }
    let sum = checksum(0, &head);
    head.extend_from_slice(&sum.to_le_bytes());
    head.resize(HEADER_LEN as usize, 0);
    head
}

/// The recording signature a header holds (its checksum already checked).
fn read_signature(head: &[u8]) -> StoredSignature {
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let mut ns = [0u8; 16];
    ns.copy_from_slice(&head[24..40]);
    StoredSignature {
        file_size: u64_at(16),
        modified_ns: i128::from_le_bytes(ns),
        channels: u64_at(40),
        samples: u64_at(48),
        rate: (u64_at(56), u64_at(64)),
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(windows)]
fn write_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_write(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
