//! Files read at explicit offsets (`pread`), shared by every reader of uncompressed data.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A file opened for positional reads: no shared cursor, so any number of threads read at once.
#[derive(Debug)]
pub struct DataFile {
    file: File,
    path: PathBuf,
    len: u64,
}

impl DataFile {
    /// Opens `path` and records its length. An empty file opens (length 0).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file cannot be opened or its metadata read; [`Error::Invalid`] if
    /// `path` is a folder (a folder opens on some systems and reports a length).
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
        let metadata = file
            .metadata()
            .map_err(|e| Error::io(path, "read metadata", e))?;
        if metadata.is_dir() {
            return Err(Error::invalid(path, "is a folder, expected a data file"));
        }
        let len = metadata.len();
        Ok(Self {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// The file's length when it was opened.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when it was opened.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills `buf` with the bytes at `offset`; a file that ends first is an error.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the byte range if the read fails or the file ends first.
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        read_exact_at(&self.file, offset, buf).map_err(|e| {
            Error::io(
                &self.path,
                format!("read {} bytes at offset {offset}", buf.len()),
                e,
            )
        })
    }

    /// Advises the system that the file will be read mostly in order (a larger read-ahead).
    /// A hint: failures are ignored, and it does nothing where `posix_fadvise` is missing.
    pub fn advise_sequential(&self) {
        dspk_core::readahead::advise_sequential(&self.file);
    }

    /// Advises the system that `len` bytes at `offset` will be read soon, so it starts reading
    /// them into the page cache (`posix_fadvise(WILLNEED)`). A hint: failures are ignored, and
    /// it does nothing where `posix_fadvise` is missing.
    pub fn advise_will_need(&self, offset: u64, len: u64) {
        dspk_core::readahead::advise_will_need(&self.file, offset, len);
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> std::io::Result<()> {
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

/// Reads a small metadata file (a sidecar, a `.zarray`) whole, refusing files over `limit`
/// bytes before reading them.
///
/// # Errors
///
/// [`Error::Io`] if the file cannot be opened or read; [`Error::TooLarge`] if it is longer
/// than `limit`.
pub fn read_small_file(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io(path, "read metadata", e))?
        .len();
    if len > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            what: "metadata file".into(),
            size: len,
            limit,
        });
    }
    let mut bytes = Vec::new();
    // `take` bounds the read even if the file grows after the check.
    file.take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, "read", e))?;
    Ok(bytes)
}

/// Checks that `path` exists and can be read (a folder listed, a file opened), so a missing
/// or forbidden path is reported as such rather than as a file or format that does not fit.
///
/// # Errors
///
/// [`Error::NotFound`] if `path` does not exist; [`Error::Io`] with the system's reason
/// (permission denied, not a directory) if it cannot be read.
pub fn check_readable(path: &Path) -> Result<()> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(Error::io(path, "read metadata", e)),
    };
    if metadata.is_dir() {
        std::fs::read_dir(path).map_err(|e| Error::io(path, "list the folder", e))?;
    } else {
        File::open(path).map_err(|e| Error::io(path, "open", e))?;
    }
    Ok(())
}

/// The largest metadata file read whole (sidecars, `binary.json`): 16 MiB.
pub const METADATA_LIMIT: u64 = 16 << 20;
