//! Reading universal templates from an `.npz` file in the layout of Kilosort4's bundled
//! `wTEMP.npz`: arrays `wTEMP` `[K, nt]` and `wPCA` `[P, nt]`, `float32` or `float64`.

use std::path::Path;

use dspk_io::{ElementKind, NpzArchive};

use super::UniversalTemplates;
use crate::{Error, Result};

impl UniversalTemplates {
    /// The templates stored in `path`, an `.npz` archive with arrays `wTEMP` (`[K, nt]`) and
    /// `wPCA` (`[P, nt]`) of `float32` or `float64`, the layout of Kilosort4's bundled
    /// `wTEMP.npz` (used when `templates_from_data = False`). The trough index is Kilosort's
    /// default for the length, `nt0min = floor(20 * nt / 61)` (20 for `nt = 61`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file cannot be read as an `.npz` archive or an array is missing
    /// (the error lists the arrays present); [`Error::Input`] when an array is not a
    /// two-dimensional float array, the two have different lengths, or a value is not finite
    /// in `f32`; as [`UniversalTemplates::new`] for an even length or empty arrays.
    pub fn from_npz(path: &Path) -> Result<Self> {
        let mut archive = NpzArchive::open(path)?;
        let (wtemp, nt) = read_matrix(&mut archive, path, "wTEMP")?;
        let (wpca, nt_pca) = read_matrix(&mut archive, path, "wPCA")?;
        if nt != nt_pca {
            return Err(invalid(
                path,
                format!("wTEMP has {nt} samples per row but wPCA has {nt_pca}"),
            ));
        }
        Self::new(nt, 20 * nt / 61, wtemp, wpca)
    }
}

/// Array `name` of `archive` as `f32` values, with its row length; checks that it is a 2-D
/// float array whose values are finite in `f32`.
fn read_matrix(archive: &mut NpzArchive, path: &Path, name: &str) -> Result<(Vec<f32>, usize)> {
    let array = archive.read(name)?;
    if array.dtype().kind != ElementKind::Float {
        return Err(invalid(
            path,
            format!(
                "{name} holds {} values, not float32 or float64",
                array.dtype()
            ),
        ));
    }
    let (rows, nt) = match array.shape() {
        &[rows, nt] if rows > 0 && nt > 0 => (rows, nt),
        shape => {
            return Err(invalid(
                path,
                format!("{name} has shape {shape:?}, expected [rows, nt] with both above 0"),
            ));
        }
    };
    let values = array.to_f64()?;
    let mut out = Vec::with_capacity(values.len());
    for (i, &v) in values.iter().enumerate() {
        let single = v as f32;
        if !single.is_finite() {
            return Err(invalid(
                path,
                format!(
                    "{name}[{}, {}] is {v}, not a finite float32",
                    i as u64 / nt,
                    i as u64 % nt
                ),
            ));
        }
        out.push(single);
    }
    debug_assert_eq!(out.len() as u64, rows * nt);
    let nt = usize::try_from(nt)
        .map_err(|_| invalid(path, format!("{name} has {nt} samples per row")))?;
    Ok((out, nt))
}

/// An [`Error::Input`] about the templates file `path`.
fn invalid(path: &Path, reason: String) -> Error {
    Error::Input {
        what: "universal templates file",
        reason: format!("{}: {reason}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use dspk_io::{ByteOrder, Dtype, NpyArray};

    use super::*;

    /// CRC-32 (IEEE, reflected), as zip members carry.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    /// A zip archive of stored (uncompressed) members, as `numpy.savez` writes.
    fn stored_zip(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut directory = Vec::new();
        for (name, data) in members {
            let offset = out.len() as u32;
            let crc = crc32(data);
            let size = data.len() as u32;
            let mut fields = Vec::new();
            fields.extend(20u16.to_le_bytes()); // version needed
            fields.extend(0u16.to_le_bytes()); // flags
            fields.extend(0u16.to_le_bytes()); // stored
            fields.extend(0u16.to_le_bytes()); // time
            fields.extend(0x21u16.to_le_bytes()); // date (1980-01-01)
            fields.extend(crc.to_le_bytes());
            fields.extend(size.to_le_bytes());
            fields.extend(size.to_le_bytes());
            fields.extend((name.len() as u16).to_le_bytes());
            fields.extend(0u16.to_le_bytes()); // extra length
            out.extend(0x0403_4b50u32.to_le_bytes());
            out.extend(&fields);
            out.extend(name.as_bytes());
            out.extend(data);
            directory.extend(0x0201_4b50u32.to_le_bytes());
            directory.extend(20u16.to_le_bytes()); // version made by
            directory.extend(&fields);
            directory.extend(0u16.to_le_bytes()); // comment length
            directory.extend(0u16.to_le_bytes()); // disk
            directory.extend(0u16.to_le_bytes()); // internal attributes
            directory.extend(0u32.to_le_bytes()); // external attributes
            directory.extend(offset.to_le_bytes());
            directory.extend(name.as_bytes());
        }
        let directory_offset = out.len() as u32;
        let count = members.len() as u16;
        out.extend(&directory);
        out.extend(0x0605_4b50u32.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(count.to_le_bytes());
        out.extend(count.to_le_bytes());
        out.extend((directory.len() as u32).to_le_bytes());
        out.extend(directory_offset.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out
    }

    /// `.npy` bytes of a C-order float array (`size` 4 or 8) of `shape`.
    fn npy(values: &[f64], shape: &[u64], size: usize) -> Vec<u8> {
        let data: Vec<u8> = if size == 4 {
            values
                .iter()
                .flat_map(|&v| (v as f32).to_le_bytes())
                .collect()
        } else {
            values.iter().flat_map(|v| v.to_le_bytes()).collect()
        };
        let dtype = Dtype {
            kind: ElementKind::Float,
            size,
            order: ByteOrder::Little,
        };
        NpyArray::new(dtype, false, shape.to_vec(), data)
            .unwrap()
            .to_bytes()
    }

    /// Writes `members` as an `.npz` file in a fresh temporary folder.
    fn write_npz(test: &str, members: &[(&str, Vec<u8>)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("dspk-universal-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("wTEMP.npz");
        std::fs::write(&path, stored_zip(members)).unwrap();
        path
    }

    /// `rows x nt` values that differ from each other.
    fn matrix(rows: usize, nt: usize, scale: f64) -> Vec<f64> {
        (0..rows * nt)
            .map(|i| scale * ((i as f64) * 0.37).sin())
            .collect()
    }

    #[test]
    fn universal_npz_reads_float32_and_float64() {
        let (k, p, nt) = (6, 4, 61);
        let wtemp = matrix(k, nt, 0.5);
        let wpca = matrix(p, nt, 0.25);
        for (test, size) in [("f32", 4), ("f64", 8)] {
            let path = write_npz(
                test,
                &[
                    ("wPCA.npy", npy(&wpca, &[p as u64, nt as u64], size)),
                    ("wTEMP.npy", npy(&wtemp, &[k as u64, nt as u64], size)),
                ],
            );
            let templates = UniversalTemplates::from_npz(&path).unwrap();
            assert_eq!((templates.nt(), templates.nt0min()), (61, 20));
            assert_eq!((templates.k(), templates.p()), (k, p));
            let expect: Vec<f32> = wtemp.iter().map(|&v| v as f32).collect();
            assert_eq!(templates.wtemp(), &expect[..]);
            let expect: Vec<f32> = wpca.iter().map(|&v| v as f32).collect();
            assert_eq!(templates.wpca(), &expect[..]);
        }
        // Another length: nt0min = floor(20 nt / 61).
        let path = write_npz(
            "nt41",
            &[
                ("wTEMP.npy", npy(&matrix(2, 41, 1.0), &[2, 41], 4)),
                ("wPCA.npy", npy(&matrix(3, 41, 1.0), &[3, 41], 4)),
            ],
        );
        let templates = UniversalTemplates::from_npz(&path).unwrap();
        assert_eq!((templates.nt(), templates.nt0min()), (41, 13));
    }

    #[test]
    fn universal_npz_refuses_bad_files() {
        let good = npy(&matrix(6, 61, 1.0), &[6, 61], 4);
        let expect_error = |test: &str, members: &[(&str, Vec<u8>)], needle: &str| {
            let path = write_npz(test, members);
            let error = UniversalTemplates::from_npz(&path).unwrap_err();
            let text = error.to_string();
            assert!(text.contains(needle), "{test}: {text}");
        };
        expect_error("missing", &[("wTEMP.npy", good.clone())], "wPCA");
        expect_error(
            "one-d",
            &[
                ("wTEMP.npy", good.clone()),
                ("wPCA.npy", npy(&matrix(1, 61, 1.0), &[61], 4)),
            ],
            "shape [61]",
        );
        expect_error(
            "lengths",
            &[
                ("wTEMP.npy", good.clone()),
                ("wPCA.npy", npy(&matrix(6, 41, 1.0), &[6, 41], 4)),
            ],
            "41",
        );
        let mut bad = matrix(6, 61, 1.0);
        bad[2 * 61 + 5] = f64::NAN;
        expect_error(
            "nan",
            &[
                ("wTEMP.npy", npy(&bad, &[6, 61], 8)),
                ("wPCA.npy", good.clone()),
            ],
            "wTEMP[2, 5] is NaN",
        );
        bad[2 * 61 + 5] = 1e300; // finite in f64, not in f32
        expect_error(
            "overflow",
            &[
                ("wTEMP.npy", npy(&bad, &[6, 61], 8)),
                ("wPCA.npy", good.clone()),
            ],
            "not a finite float32",
        );
        expect_error(
            "even",
            &[
                ("wTEMP.npy", npy(&matrix(6, 60, 1.0), &[6, 60], 4)),
                ("wPCA.npy", npy(&matrix(6, 60, 1.0), &[6, 60], 4)),
            ],
            "odd",
        );
        let ints = NpyArray::new(
            Dtype {
                kind: ElementKind::Int,
                size: 4,
                order: ByteOrder::Little,
            },
            false,
            vec![6, 61],
            vec![0; 6 * 61 * 4],
        )
        .unwrap()
        .to_bytes();
        expect_error(
            "ints",
            &[("wTEMP.npy", ints), ("wPCA.npy", good)],
            "not float32 or float64",
        );
        let path = write_npz("not-zip", &[]);
        std::fs::write(&path, b"not a zip").unwrap();
        assert!(matches!(
            UniversalTemplates::from_npz(&path),
            Err(Error::Io(_))
        ));
    }
}
