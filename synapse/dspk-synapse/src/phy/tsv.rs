//! `cluster_<name>.tsv`: one value per cluster and column, as Kilosort, phy and SpikeInterface
//! write them (`cluster_id\t<column>` header, one row per cluster).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::{Error, Result};

/// One column of a `cluster_*.tsv` file: a value per cluster id, as text.
///
/// phylib's `load_metadata` reads these files into its cluster metadata (the header's column
/// name is the field name; empty cells are skipped); `cluster_group.tsv`'s `group` column is
/// the curation label (`good`, `mua`, `noise`, `unsorted`) and `cluster_KSLabel.tsv`'s
/// `KSLabel` column Kilosort's own label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterColumn {
    /// The file the column is in (`cluster_KSLabel.tsv`); columns with the same file are
    /// written to one file, in order.
    pub file: String,
    /// The column's header (`KSLabel`, `group`, `ContamPct`).
    pub name: String,
    /// The value of each cluster that has one (empty cells are left out).
    pub values: BTreeMap<u32, String>,
}

impl ClusterColumn {
    /// The column `name` in `cluster_<name>.tsv`, as Kilosort and phy name their files.
    #[must_use]
    pub fn new(name: &str, values: BTreeMap<u32, String>) -> Self {
        Self {
            file: format!("cluster_{name}.tsv"),
            name: name.to_string(),
            values,
        }
    }

    /// The value of `cluster`, if it has one.
    #[must_use]
    pub fn get(&self, cluster: u32) -> Option<&str> {
        self.values.get(&cluster).map(String::as_str)
    }
}

/// The columns of one `cluster_*.tsv` file (`text` is its content, `path` names it in
/// errors; `file` is its name). Accepts LF and CRLF line ends and a missing final newline.
///
/// # Errors
///
/// [`dspk_io::Error::Invalid`] naming the file and the line: no header, a first column that is not
/// `cluster_id`, a row with a different number of fields from the header, a cluster id that is
/// not an integer in `0..=i32::MAX`, or an id given twice.
pub(crate) fn parse(text: &str, path: &Path, file: &str) -> Result<Vec<ClusterColumn>> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, line)| line).ok_or_else(|| {
        Error::invalid(path, "the file is empty (expected a `cluster_id` header)")
    })?;
    let names: Vec<&str> = header.split('\t').collect();
    if names.first().map(|n| n.trim()) != Some("cluster_id") || names.len() < 2 {
        return Err(Error::invalid(
            path,
            format!(
                "line 1: expected a header `cluster_id<TAB><column>...`, got `{}`",
                super::shown(header)
            ),
        ));
    }
    let mut columns: Vec<ClusterColumn> = names[1..]
        .iter()
        .map(|name| ClusterColumn {
            file: file.to_string(),
            name: name.trim().to_string(),
            values: BTreeMap::new(),
        })
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for (index, line) in lines {
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| {
            Error::invalid(
                path,
                format!("line {}: {why}: `{}`", index + 1, super::shown(line)),
            )
        };
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != names.len() {
            return Err(bad(format!(
                "{} fields, the header has {}",
                fields.len(),
                names.len()
            )));
        }
        let id = fields[0]
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&id| i32::try_from(id).is_ok())
            .ok_or_else(|| bad("the cluster id is not an integer in 0..=2147483647".into()))?;
        if !seen.insert(id) {
            return Err(bad(format!("cluster {id} is listed twice")));
        }
        for (column, value) in columns.iter_mut().zip(&fields[1..]) {
            if !value.is_empty() {
                column.values.insert(id, (*value).to_string());
            }
        }
    }
    Ok(columns)
}

/// The text of a TSV file holding `columns` (all of one file): the `cluster_id` header, then
/// one row per cluster that has a value in any column, cells empty where a column has none.
pub(crate) fn format(columns: &[&ClusterColumn]) -> String {
    let mut ids: Vec<u32> = columns
        .iter()
        .flat_map(|c| c.values.keys().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut text = String::from("cluster_id");
    for column in columns {
        text.push('\t');
        text.push_str(&column.name);
    }
    text.push('\n');
    for id in ids {
        // Writing to a String cannot fail.
        let _ = write!(text, "{id}");
        for column in columns {
            text.push('\t');
            text.push_str(column.get(id).unwrap_or(""));
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_and_empty_cells() {
        let text = "cluster_id\tKSLabel\tnote\r\n0\tgood\t\r\n2\tmua\tx\r\n";
        let columns = parse(text, Path::new("c.tsv"), "c.tsv").expect("valid");
        assert_eq!(columns.len(), 2);
        assert_eq!(columns[0].get(2), Some("mua"));
        assert_eq!(columns[1].get(0), None);
        assert_eq!(columns[1].get(2), Some("x"));
        let written = format(&[&columns[0], &columns[1]]);
        assert_eq!(written, "cluster_id\tKSLabel\tnote\n0\tgood\t\n2\tmua\tx\n");
    }

    #[test]
    fn refused() {
        for (text, why) in [
            ("", "empty"),
            ("id\tgroup\n", "line 1"),
            ("cluster_id\tgroup\n0\tgood\textra\n", "line 2: 3 fields"),
            ("cluster_id\tgroup\n-1\tgood\n", "line 2: the cluster id"),
            (
                "cluster_id\tgroup\n1\tgood\n1\tmua\n",
                "line 3: cluster 1 is listed twice",
            ),
        ] {
            let error = parse(text, Path::new("c.tsv"), "c.tsv")
                .expect_err(text)
                .to_string();
            assert!(error.contains(why), "{text:?}: {error}");
        }
    }
}
