//! `.npz` archives: zip files of `.npy` members (`numpy.savez`, `savez_compressed`), zip64
//! included.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::array::{NpyArray, read_bounded};
use crate::{Error, Result};

/// Deflate cannot expand data more than about 1032 times; a member that claims more is lying.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// An open `.npz` archive.
#[derive(Debug)]
pub struct NpzArchive {
    archive: zip::ZipArchive<File>,
    path: PathBuf,
}

impl NpzArchive {
    /// Opens an `.npz` file and reads its directory.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it cannot be opened; [`Error::Library`] if it is not a zip archive.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
        let archive = zip::ZipArchive::new(file)
            .map_err(|e| Error::library(path, "reading the zip directory", e))?;
        Ok(Self {
            archive,
            path: path.to_path_buf(),
        })
    }

    /// The names of the arrays (member names without `.npy`), in archive order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.archive
            .file_names_raw()
            .map(|name| {
                String::from_utf8_lossy(name)
                    .trim_end_matches(".npy")
                    .to_string()
            })
            .collect()
    }

    /// Reads the array `name` (with or without `.npy`).
    ///
    /// Memory grows with the bytes actually decompressed, never with a size a header claims:
    /// a member is read up to the size its `.npy` header implies, and that size must be within
    /// what its compressed bytes can expand to.
    ///
    /// # Errors
    ///
    /// [`Error::Missing`] if there is no such member; [`Error::Library`] if the member cannot
    /// be decompressed (unsupported method, corrupt data, wrong checksum); the `.npy` errors of
    /// [`NpyArray::from_bytes`], with the path `archive.npz/name.npy`;
    /// [`Error::TooLarge`] if the header claims more than the compressed bytes can hold.
    pub fn read(&mut self, name: &str) -> Result<NpyArray> {
        let member = if name.ends_with(".npy") {
            name.to_string()
        } else {
            format!("{name}.npy")
        };
        let member_path = self.path.join(&member);
        if self.archive.index_for_name(&member).is_none() {
            return Err(Error::Missing {
                path: self.path.clone(),
                what: format!("array `{member}` (members: {})", self.names().join(", ")),
            });
        }
        let mut file = match self.archive.by_name(&member) {
            Ok(file) => file,
            Err(e) => return Err(Error::library(&self.path, format!("opening `{member}`"), e)),
        };
        let compressed = file.compressed_size();
        let limit = compressed
            .saturating_mul(MAX_DEFLATE_RATIO)
            .saturating_add(4096);
        if file.size() > limit {
            return Err(Error::TooLarge {
                path: member_path,
                what: format!("a member of {compressed} compressed bytes"),
                size: file.size(),
                limit,
            });
        }
        let size = file.size();
        // One byte past the declared size, so the reader reaches its end and checks the CRC.
        let bytes = read_bounded(&mut file, size.saturating_add(1))
            .map_err(|e| Error::library(&self.path, format!("decompressing `{member}`"), e))?;
        if bytes.len() as u64 != size {
            return Err(Error::invalid(
                &member_path,
                format!(
                    "the member decompresses to more than the {size} bytes the archive declares"
                ),
            ));
        }
        NpyArray::from_bytes(&bytes, &member_path)
    }
}
