//! The `.meta` file: `key=value` lines, tables written as `(header)(entry)(entry)...`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dspk_io::{METADATA_LIMIT, read_small_file};

use crate::{Error, Result};

/// The most channels a stream may declare (acquired or saved). The largest SpikeGLX streams
/// hold a few thousand; the limit keeps a corrupt count from sizing an allocation.
pub const MAX_CHANNELS: usize = 1 << 16;

/// A parsed SpikeGLX `.meta` file: its `key=value` pairs, in file order, with the `~` that
/// marks table keys (`~imroTbl`, `~snsChanMap`, ...) dropped from the key.
///
/// Parsing checks only the syntax; what the values mean is read by
/// [`Meta::stream`](crate::spikeglx::Meta::stream) and [`Meta::probe`].
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    path: PathBuf,
    entries: BTreeMap<String, String>,
}

impl Meta {
    /// Parses the bytes of a `.meta` file; `path` names the file in errors.
    ///
    /// Lines are `key=value` (the value may be empty or contain `=`), with `\n` or `\r\n`
    /// ends; blank lines are skipped; bytes that are not UTF-8 are replaced.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] for a line without `=`, an empty key, or a key given twice.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        let text = String::from_utf8_lossy(bytes);
        let mut entries = BTreeMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(Error::invalid(
                    path,
                    format!(
                        "line {}: expected `key=value`, got `{}`",
                        number + 1,
                        clip(line)
                    ),
                ));
            };
            let key = key.trim();
            let key = key.strip_prefix('~').unwrap_or(key);
            if key.is_empty() {
                return Err(Error::invalid(
                    path,
                    format!("line {}: empty key", number + 1),
                ));
            }
            if entries
                .insert(key.to_string(), value.trim().to_string())
                .is_some()
            {
                return Err(Error::invalid(
                    path,
                    format!("line {}: key `{key}` appears twice", number + 1),
                ));
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            entries,
        })
    }

    /// Reads and parses the `.meta` file at `path` (at most [`METADATA_LIMIT`] bytes).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file cannot be read or is too large, and the errors of
    /// [`Meta::parse`].
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = read_small_file(path, METADATA_LIMIT)?;
        Self::parse(&bytes, path)
    }

    /// The file the metadata came from.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value of `key` (written without the `~` of table keys), if present.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// All `key=value` pairs, sorted by key (table keys without their `~`).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The value of a key that must be present.
    pub(crate) fn require(&self, key: &str) -> Result<&str> {
        self.get(key)
            .ok_or_else(|| Error::invalid(&self.path, format!("the key `{key}` is missing")))
    }

    /// A key's value parsed as `T`, if present.
    pub(crate) fn parsed<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>> {
        self.get(key)
            .map(|value| {
                value.parse::<T>().map_err(|_| {
                    Error::invalid(
                        &self.path,
                        format!("`{key}={}` is not a valid {}", clip(value), kind_of::<T>()),
                    )
                })
            })
            .transpose()
    }

    /// A required key's value parsed as `T`.
    pub(crate) fn required<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        self.require(key)?;
        self.parsed(key)?
            .ok_or_else(|| Error::invalid(&self.path, format!("the key `{key}` is missing")))
    }

    /// A positive finite number (a voltage range, a gain, a maximum integer) from `key`.
    pub(crate) fn positive(&self, key: &str) -> Result<Option<f64>> {
        match self.parsed::<f64>(key)? {
            Some(v) if !(v.is_finite() && v > 0.0) => Err(Error::invalid(
                &self.path,
                format!("`{key}={v}` must be a positive number"),
            )),
            other => Ok(other),
        }
    }

    /// A comma-separated list of channel counts (`acqApLfSy=384,384,1`), each at most
    /// [`MAX_CHANNELS`].
    pub(crate) fn counts(&self, key: &str, expected: usize) -> Result<Vec<usize>> {
        let value = self.require(key)?;
        let counts = value
            .split(',')
            .map(|v| {
                v.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|&n| n <= MAX_CHANNELS)
            })
            .collect::<Option<Vec<_>>>()
            .filter(|c| c.len() == expected)
            .ok_or_else(|| {
                Error::invalid(
                    &self.path,
                    format!(
                        "`{key}={}` must be {expected} comma-separated channel counts of at most \
                         {MAX_CHANNELS}",
                        clip(value)
                    ),
                )
            })?;
        if counts.iter().sum::<usize>() > MAX_CHANNELS {
            return Err(Error::invalid(
                &self.path,
                format!("`{key}={value}` adds up to more than {MAX_CHANNELS} channels"),
            ));
        }
        Ok(counts)
    }

    /// The entries of a table value `(header)(entry)(entry)...`: the header and the entries,
    /// each without its parentheses.
    pub(crate) fn table(&self, key: &str) -> Result<Option<(&str, Vec<&str>)>> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let bad = |problem: &str| {
            Error::invalid(
                &self.path,
                format!("`~{key}` is not a table of `(...)` entries: {problem}"),
            )
        };
        let mut items = Vec::new();
        let mut rest = value.trim();
        while !rest.is_empty() {
            let Some(inner) = rest.strip_prefix('(') else {
                return Err(bad("text outside parentheses"));
            };
            let Some(end) = inner.find(')') else {
                return Err(bad("an unclosed parenthesis"));
            };
            let item = &inner[..end];
            if item.contains('(') {
                return Err(bad("nested parentheses"));
            }
            items.push(item);
            rest = inner[end + 1..].trim_start();
        }
        if items.is_empty() {
            return Err(bad("no header"));
        }
        let header = items.remove(0);
        Ok(Some((header, items)))
    }

    /// The acquisition channels saved in the file, in file order, from `snsSaveChanSubset`
    /// (`all`, or a list like `0:3,768` of channels and inclusive ranges, ascending), checked
    /// against the `acquired` channel count and `nSavedChans`.
    pub(crate) fn saved_channels(&self, acquired: usize, saved: usize) -> Result<Vec<usize>> {
        let value = self.get("snsSaveChanSubset").unwrap_or("all").trim();
        let bad = |problem: String| {
            Error::invalid(
                &self.path,
                format!("`snsSaveChanSubset={}`: {problem}", clip(value)),
            )
        };
        let channels: Vec<usize> = if value == "all" {
            (0..acquired).collect()
        } else {
            let mut channels = Vec::new();
            for item in value.split(',') {
                let item = item.trim();
                let (first, last) = match item.split_once(':') {
                    Some((a, b)) => (a.trim(), b.trim()),
                    None => (item, item),
                };
                let (Ok(first), Ok(last)) = (first.parse::<usize>(), last.parse::<usize>()) else {
                    return Err(bad(format!("`{}` is not a channel or a range", clip(item))));
                };
                if first > last || last >= acquired {
                    return Err(bad(format!(
                        "`{item}` is not a range inside the {acquired} acquired channels"
                    )));
                }
                if channels.last().is_some_and(|&prev| first <= prev) {
                    return Err(bad(format!("`{item}` is not in ascending order")));
                }
                if channels.len() + (last - first + 1) > saved {
                    return Err(bad(format!("lists more channels than nSavedChans={saved}")));
                }
                channels.extend(first..=last);
            }
            channels
        };
        if channels.len() != saved {
            return Err(bad(format!(
                "lists {} channels, nSavedChans says {saved}",
                channels.len()
            )));
        }
        Ok(channels)
    }
}

/// A value shortened for an error message.
pub(crate) fn clip(text: &str) -> String {
    const LIMIT: usize = 80;
    if text.chars().count() <= LIMIT {
        text.to_string()
    } else {
        let head: String = text.chars().take(LIMIT).collect();
        format!("{head}...")
    }
}

/// A readable name for what `T` parses.
fn kind_of<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    if name.contains("f64") || name.contains("f32") {
        "number"
    } else if name.contains("SampleRate") {
        "sample rate"
    } else {
        "non-negative integer"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(text: &str) -> Result<Meta> {
        Meta::parse(text.as_bytes(), Path::new("x.meta"))
    }

    #[test]
    fn parses_keys_tables_and_subsets() {
        let m = meta("a=1\r\n~tbl=(0,2)(0 1)( 1 2)\n\nnSavedChans=3\nsnsSaveChanSubset=0:1,5\n")
            .unwrap();
        assert_eq!(m.get("a"), Some("1"));
        let (header, items) = m.table("tbl").unwrap().unwrap();
        assert_eq!((header, items), ("0,2", vec!["0 1", " 1 2"]));
        assert_eq!(m.saved_channels(6, 3).unwrap(), vec![0, 1, 5]);
        assert!(m.saved_channels(5, 3).is_err());
        assert!(m.saved_channels(6, 2).is_err());
        assert!(meta("novalue\n").is_err());
        assert!(meta("a=1\na=2\n").is_err());
        assert!(meta("=1\n").is_err());
        let huge = meta("snsSaveChanSubset=0:18446744073709551615\n").unwrap();
        assert!(huge.saved_channels(10, 10).is_err());
        let unordered = meta("snsSaveChanSubset=3,1\n").unwrap();
        assert!(unordered.saved_channels(10, 2).is_err());
        let bad_table = meta("t=(0)(1\n").unwrap();
        assert!(bad_table.table("t").is_err());
    }
}
