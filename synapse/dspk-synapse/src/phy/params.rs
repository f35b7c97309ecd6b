//! `params.py`: the recording parameters of a Phy folder, read as `name = literal` lines.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use dspk_core::{ChannelInfo, SampleRate};
use dspk_io::{
    ByteOrder, Dtype, ElementKind, METADATA_LIMIT, RawRecording, RawSpec, SampleOrder,
    read_small_file,
};

use crate::{Error, Result};

/// A Python literal of `params.py`: what the reader accepts on the right of `=`.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An integer literal (`4`, `-1`, `30_000`).
    Int(i64),
    /// A float literal (`30000.0`, `30000.`, `3e4`).
    Float(f64),
    /// A string literal (`'...'`, `"..."`, raw `r'...'`).
    Str(String),
    /// A one-line list of literals (`['a.dat', 'b.dat']`).
    List(Vec<ParamValue>),
}

impl ParamValue {
    /// The literal as Python source (strings as escaped `'...'`, floats always with a `.` or
    /// an exponent).
    fn to_python(&self) -> String {
        match self {
            Self::None => "None".into(),
            Self::Bool(true) => "True".into(),
            Self::Bool(false) => "False".into(),
            Self::Int(value) => value.to_string(),
            Self::Float(value) => python_float(*value),
            Self::Str(text) => escaped_string(text),
            Self::List(items) => {
                let items: Vec<String> = items.iter().map(Self::to_python).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_python())
    }
}

/// The parameters phylib's `load_model` takes from `params.py`: where the raw recording is and
/// how to read it, and how the templates are scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct PhyParams {
    /// `dat_path`: the raw recording file(s), as written (relative paths are relative to the
    /// folder, as phylib resolves them). A single string is one path; a list, several files
    /// read one after the other.
    pub dat_path: Vec<PathBuf>,
    /// `n_channels_dat`: channels (columns) in the raw file.
    pub n_channels_dat: usize,
    /// `dtype`: the raw file's sample type (`'int16'`).
    pub dtype: Dtype,
    /// `offset`: bytes before the first sample of the raw file.
    pub offset: u64,
    /// `sample_rate` in Hz.
    pub sample_rate: f64,
    /// `hp_filtered`: whether the raw file is already high-pass filtered (default `False`).
    pub hp_filtered: bool,
    /// `template_scaling` (Kilosort 2.5/3 write it; phylib multiplies unwhitened templates by
    /// it, 1.0 when absent).
    pub template_scaling: Option<f64>,
    /// Every other `name = literal` line, kept and written back as it was.
    pub other: BTreeMap<String, ParamValue>,
}

impl PhyParams {
    /// Parameters for one raw file `dat_path` of `n_channels_dat` channels of `int16` samples
    /// at `sample_rate` Hz, no header, not filtered.
    #[must_use]
    pub fn new(dat_path: impl Into<PathBuf>, n_channels_dat: usize, sample_rate: f64) -> Self {
        Self {
            dat_path: vec![dat_path.into()],
            n_channels_dat,
            dtype: Dtype {
                kind: ElementKind::Int,
                size: 2,
                order: ByteOrder::Little,
            },
            offset: 0,
            sample_rate,
            hp_filtered: false,
            template_scaling: None,
            other: BTreeMap::new(),
        }
    }

    /// Reads and parses the `params.py` file `path` (see [`parse`](Self::parse)).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if it cannot be read or is over 16 MiB; [`dspk_io::Error::Invalid`] if it is not
    /// UTF-8 or does not parse.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = read_small_file(path, METADATA_LIMIT)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(path, "the file is not UTF-8 text"))?;
        Self::parse(&text, path)
    }

    /// Parses the text of a `params.py` (`path` names it in errors).
    ///
    /// Each non-blank line that is not a `#` comment must be `name = literal`, the literal a
    /// string (`'..'`, `".."`, `r'..'`), a number, `True`, `False`, `None` or a one-line list of
    /// those, optionally followed by a `#` comment: the subset of Python that Kilosort, phy and
    /// SpikeInterface write. phylib runs the file with `exec`; anything else (imports, names,
    /// arithmetic) is refused here rather than guessed at.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] naming `path` and the line, for a line that is not `name = literal`,
    /// a repeated name, a missing required name (`dat_path`, `n_channels_dat`, `dtype`,
    /// `offset`, `sample_rate`) or a value of the wrong type or range.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let mut values = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let bad = |why: &str| {
                Error::invalid(
                    path,
                    format!("line {}: {why}: `{}`", index + 1, super::shown(line.trim())),
                )
            };
            let content = line.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let Some((name, literal)) = content.split_once('=') else {
                return Err(bad("expected `name = literal`"));
            };
            let name = name.trim();
            if !is_identifier(name) {
                return Err(bad("expected a Python name before `=`"));
            }
            let mut parser = Literal {
                text: literal.trim(),
            };
            let value = parser.value().map_err(|why| bad(&why))?;
            let rest = parser.text.trim_start();
            if !(rest.is_empty() || rest.starts_with('#')) {
                return Err(bad(
                    "expected only a literal (string, number, True, False, None or a list) after `=`",
                ));
            }
            if values.insert(name.to_string(), value).is_some() {
                return Err(bad(&format!("`{name}` is set twice")));
            }
        }
        Self::from_values(values, path)
    }

    /// The parameters from the parsed `name -> value` pairs.
    fn from_values(mut values: BTreeMap<String, ParamValue>, path: &Path) -> Result<Self> {
        let mut take = |name: &str| {
            values
                .remove(name)
                .ok_or_else(|| Error::invalid(path, format!("`{name}` is not set")))
        };
        let wrong = |name: &str, expected: &str, value: &ParamValue| {
            Error::invalid(path, format!("`{name}` must be {expected}, got {value}"))
        };
        let dat_path = match take("dat_path")? {
            ParamValue::Str(text) => vec![PathBuf::from(text)],
            ParamValue::List(items) if items.iter().all(|i| matches!(i, ParamValue::Str(_))) => {
                items
                    .into_iter()
                    .filter_map(|item| match item {
                        ParamValue::Str(text) => Some(PathBuf::from(text)),
                        _ => None,
                    })
                    .collect()
            }
            other => return Err(wrong("dat_path", "a string or a list of strings", &other)),
        };
        let n_channels_dat = match take("n_channels_dat")? {
            ParamValue::Int(n) if n > 0 => usize::try_from(n).ok(),
            _ => None,
        };
        let n_channels_dat = match n_channels_dat {
            Some(n) => n,
            None => {
                return Err(Error::invalid(
                    path,
                    "`n_channels_dat` must be a positive integer",
                ));
            }
        };
        let dtype = match take("dtype")? {
            ParamValue::Str(text) => text
                .parse::<Dtype>()
                .ok()
                .filter(|d| d.is_numeric())
                .ok_or_else(|| {
                    Error::invalid(
                        path,
                        format!("`dtype` `{text}` is not a numeric numpy dtype"),
                    )
                })?,
            other => return Err(wrong("dtype", "a string", &other)),
        };
        let offset = match take("offset")? {
            ParamValue::Int(n) if n >= 0 => n.unsigned_abs(),
            other => return Err(wrong("offset", "a non-negative integer", &other)),
        };
        let sample_rate = match take("sample_rate")? {
            ParamValue::Float(rate) => rate,
            ParamValue::Int(rate) => rate as f64,
            other => return Err(wrong("sample_rate", "a number", &other)),
        };
        if !(sample_rate.is_finite() && sample_rate > 0.0) {
            return Err(Error::invalid(
                path,
                format!("`sample_rate` must be positive, got {sample_rate}"),
            ));
        }
        let hp_filtered = match values.remove("hp_filtered") {
            None => false,
            Some(ParamValue::Bool(flag)) => flag,
            Some(other) => return Err(wrong("hp_filtered", "True or False", &other)),
        };
        let template_scaling = match values.remove("template_scaling") {
            None | Some(ParamValue::None) => None,
            Some(ParamValue::Float(scale)) => Some(scale),
            Some(ParamValue::Int(scale)) => Some(scale as f64),
            Some(other) => return Err(wrong("template_scaling", "a number", &other)),
        };
        Ok(Self {
            dat_path,
            n_channels_dat,
            dtype,
            offset,
            sample_rate,
            hp_filtered,
            template_scaling,
            other: values,
        })
    }

    /// The text of a `params.py` holding these parameters, one `name = literal` line each:
    /// `dat_path` as a raw string `r'...'` (a list for several files; an escaped string when a
    /// raw one cannot spell it), `dtype` as numpy's name (`'int16'`), `sample_rate` as a
    /// float, then `template_scaling` and the other values (strings as escaped `'...'`).
    ///
    /// # Errors
    ///
    /// [`Error::Argument`] if a `dat_path` is not valid UTF-8, a name in
    /// [`other`](Self::other) is not a Python name or repeats a standard one, a number is
    /// not finite, or `offset` is over `i64::MAX`.
    pub fn to_python(&self) -> Result<String> {
        let mut paths = Vec::with_capacity(self.dat_path.len());
        for path in &self.dat_path {
            let text = path.to_str().ok_or_else(|| {
                Error::Argument(format!(
                    "params.py: dat_path `{}` is not valid UTF-8",
                    path.display()
                ))
            })?;
            paths.push(raw_string(text));
        }
        let dat_path = match <[String; 1]>::try_from(paths) {
            Ok([single]) => single,
            Err(paths) => format!("[{}]", paths.join(", ")),
        };
        let finite = |name: &str, value: f64| {
            if value.is_finite() {
                Ok(ParamValue::Float(value))
            } else {
                Err(Error::Argument(format!(
                    "params.py: `{name}` must be finite, got {value}"
                )))
            }
        };
        let integer = |name: &str, value: u64| {
            i64::try_from(value).map_err(|_| {
                Error::Argument(format!(
                    "params.py: `{name}` = {value} is over {}",
                    i64::MAX
                ))
            })
        };
        let mut text = format!("dat_path = {dat_path}\n");
        let mut lines = vec![
            (
                "n_channels_dat".into(),
                ParamValue::Int(integer("n_channels_dat", self.n_channels_dat as u64)?),
            ),
            ("dtype".into(), ParamValue::Str(numpy_name(self.dtype))),
            (
                "offset".into(),
                ParamValue::Int(integer("offset", self.offset)?),
            ),
            (
                "sample_rate".into(),
                finite("sample_rate", self.sample_rate)?,
            ),
            ("hp_filtered".into(), ParamValue::Bool(self.hp_filtered)),
        ];
        if let Some(scale) = self.template_scaling {
            lines.push((
                "template_scaling".into(),
                finite("template_scaling", scale)?,
            ));
        }
        for (name, value) in &self.other {
            if !is_identifier(name) || name == "dat_path" || lines.iter().any(|(n, _)| n == name) {
                return Err(Error::Argument(format!(
                    "params.py: `{}` cannot be written as an extra parameter name",
                    super::shown(name)
                )));
            }
            if !all_finite(value) {
                return Err(Error::Argument(format!(
                    "params.py: `{name}` holds a number that is not finite"
                )));
            }
            lines.push((name.clone(), value.clone()));
        }
        for (name, value) in lines {
            // Writing to a String cannot fail.
            let _ = writeln!(text, "{name} = {value}");
        }
        Ok(text)
    }

    /// The raw file paths with relative ones joined to `folder` (as phylib resolves them
    /// against the folder of `params.py`).
    #[must_use]
    pub fn dat_paths_in(&self, folder: &Path) -> Vec<PathBuf> {
        self.dat_path.iter().map(|p| folder.join(p)).collect()
    }

    /// Opens the raw recording of a Phy folder in `folder`, as phylib's traces reader does:
    /// `n_channels_dat` interleaved channels of `dtype` after `offset` bytes, at
    /// `sample_rate`, the sample count from the file length. Phy records no scaling, so the
    /// channels (named by their column, `"0"`, `"1"`, ...) have gain 1, offset 0 and no unit:
    /// scaled values are the stored ones.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Unsupported`] naming `params.py` for several `dat_path` files, a `dtype`
    /// that is not `int16`, `uint16`, `int32` or `float32`, or more than 65 536 channels; [`dspk_io::Error::Invalid`] if the sample
    /// rate is not an exact decimal; the raw reader's errors ([`RawRecording::new`]: a
    /// missing file, a length that is not a whole number of samples after the offset).
    pub fn open_recording(&self, folder: &Path) -> Result<RawRecording> {
        let params_path = folder.join("params.py");
        let [dat_path] = self.dat_path.as_slice() else {
            return Err(Error::unsupported(
                &params_path,
                format!(
                    "{} raw files in dat_path (one is supported)",
                    self.dat_path.len()
                ),
            ));
        };
        let format = self.dtype.sample_format().ok_or_else(|| {
            Error::unsupported(
                &params_path,
                format!(
                    "raw samples of dtype {} (int16, uint16, int32, float32 are)",
                    self.dtype
                ),
            )
        })?;
        let sample_rate: SampleRate = format!("{}", self.sample_rate).parse().map_err(|e| {
            Error::invalid(
                &params_path,
                format!("sample_rate {}: {e}", self.sample_rate),
            )
        })?;
        if self.n_channels_dat > MAX_RAW_CHANNELS {
            return Err(Error::unsupported(
                &params_path,
                format!(
                    "n_channels_dat = {} (at most {MAX_RAW_CHANNELS} channels are read)",
                    self.n_channels_dat
                ),
            ));
        }
        let channels = (0..self.n_channels_dat)
            .map(|c| ChannelInfo::new(c.to_string(), 1.0, 0.0, ""))
            .collect();
        let spec = RawSpec {
            channels,
            sample_rate,
            format,
            byte_order: self.dtype.order,
            order: SampleOrder::Interleaved,
            header_bytes: self.offset,
            num_samples: None,
        };
        Ok(RawRecording::new(folder.join(dat_path), spec)?)
    }
}

/// The most raw-file channels [`PhyParams::open_recording`] describes (a bound on what
/// `n_channels_dat` can make it allocate; probes record hundreds to a few thousand).
const MAX_RAW_CHANNELS: usize = 1 << 16;

/// Whether every float in `value` is finite (Python has no literal for the others).
fn all_finite(value: &ParamValue) -> bool {
    match value {
        ParamValue::Float(v) => v.is_finite(),
        ParamValue::List(items) => items.iter().all(all_finite),
        _ => true,
    }
}

/// numpy's name for a dtype (`int16`, `float32`), or its dtype string for big-endian types.
fn numpy_name(dtype: Dtype) -> String {
    let kind = match dtype.kind {
        ElementKind::Int => "int",
        ElementKind::UInt => "uint",
        ElementKind::Float => "float",
        ElementKind::Bool => return "bool".into(),
        ElementKind::Unicode | ElementKind::Bytes => return dtype.to_string(),
    };
    if dtype.order == ByteOrder::Big && dtype.size > 1 {
        dtype.to_string()
    } else {
        format!("{kind}{}", dtype.size * 8)
    }
}

/// Whether `name` is an ASCII Python identifier.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A float as Python source: always with a `.` or an exponent so it reads back as a float.
fn python_float(value: f64) -> String {
    let text = format!("{value:?}");
    if text.contains(['.', 'e', 'E', 'n', 'i']) {
        text
    } else {
        format!("{text}.0")
    }
}

/// A path as Python source: a raw string `r'...'` (as SpikeInterface writes `dat_path`, so
/// Windows backslashes stay as they are) when that spells it exactly, otherwise escaped.
fn raw_string(text: &str) -> String {
    let raw_ok = !text.contains(['\'', '\n', '\r']) && !text.ends_with('\\');
    if raw_ok {
        format!("r'{text}'")
    } else {
        escaped_string(text)
    }
}

/// A string as an escaped Python literal `'...'`.
fn escaped_string(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A cursor over the literal on the right of `=`.
struct Literal<'a> {
    text: &'a str,
}

impl Literal<'_> {
    /// Reads one literal, leaving the cursor after it.
    fn value(&mut self) -> Result<ParamValue, String> {
        self.text = self.text.trim_start();
        let first = self
            .text
            .chars()
            .next()
            .ok_or("expected a literal after `=`")?;
        match first {
            '[' => self.list(),
            '\'' | '"' => self.string(false),
            'r' | 'R' if self.text[1..].starts_with(['\'', '"']) => {
                self.text = &self.text[1..];
                self.string(true)
            }
            _ => self.word(),
        }
    }

    /// A one-line list `[a, b, ...]` (a trailing comma allowed).
    fn list(&mut self) -> Result<ParamValue, String> {
        self.text = &self.text[1..];
        let mut items = Vec::new();
        loop {
            self.text = self.text.trim_start();
            if let Some(rest) = self.text.strip_prefix(']') {
                self.text = rest;
                return Ok(ParamValue::List(items));
            }
            items.push(self.value()?);
            self.text = self.text.trim_start();
            if let Some(rest) = self.text.strip_prefix(',') {
                self.text = rest;
            } else if !self.text.starts_with(']') {
                return Err("expected `,` or `]` in a list (lists must fit on one line)".into());
            }
        }
    }

    /// A single-quoted or double-quoted string, raw or with Python's escapes.
    fn string(&mut self, raw: bool) -> Result<ParamValue, String> {
        let quote = self.text.chars().next().unwrap_or('\'');
        let body = &self.text[1..];
        if body.starts_with([quote, quote]) && body[1..].starts_with(quote) {
            return Err("triple-quoted strings are not supported".into());
        }
        let mut out = String::new();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                self.text = &body[i + 1..];
                return Ok(ParamValue::Str(out));
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some((_, next)) = chars.next() else { break };
            if raw {
                // A raw string keeps the backslash; it only stops the quote ending the string.
                out.push('\\');
                out.push(next);
                continue;
            }
            match next {
                '\\' | '\'' | '"' => out.push(next),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                '0' => out.push('\0'),
                // Python keeps unknown escapes (`\d`) as written.
                _ => {
                    out.push('\\');
                    out.push(next);
                }
            }
        }
        Err("the string is not closed on this line".into())
    }

    /// `True`, `False`, `None` or a number.
    fn word(&mut self) -> Result<ParamValue, String> {
        let end = self
            .text
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-')))
            .unwrap_or(self.text.len());
        let word = &self.text[..end];
        // An exponent sign is part of the number; other signs only lead.
        let value = match word {
            "True" => ParamValue::Bool(true),
            "False" => ParamValue::Bool(false),
            "None" => ParamValue::None,
            _ => number(word).ok_or_else(|| {
                format!(
                    "`{}` is not a literal (string, number, True, False, None or a list)",
                    super::shown(word)
                )
            })?,
        };
        self.text = &self.text[end..];
        Ok(value)
    }
}

/// A Python int or float literal (decimal, `_` separators allowed between digits).
fn number(word: &str) -> Option<ParamValue> {
    let (sign, digits) = match word.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", word.strip_prefix('+').unwrap_or(word)),
    };
    if digits.is_empty()
        || digits.contains("__")
        || digits.starts_with('_')
        || digits.ends_with('_')
    {
        return None;
    }
    let cleaned = format!("{sign}{}", digits.replace('_', ""));
    let body = &cleaned[sign.len()..];
    if body.bytes().all(|b| b.is_ascii_digit()) {
        // Python refuses leading zeros on non-zero ints (`007`).
        if body.len() > 1 && body.starts_with('0') && body.bytes().any(|b| b != b'0') {
            return None;
        }
        return cleaned.parse().ok().map(ParamValue::Int);
    }
    let float_chars = body
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    let has_digit = body.bytes().any(|b| b.is_ascii_digit());
    if !(float_chars && has_digit) || body.starts_with(['e', 'E', '+', '-']) {
        return None;
    }
    cleaned.parse::<f64>().ok().map(ParamValue::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PhyParams> {
        PhyParams::parse(text, Path::new("params.py"))
    }

    const BASE: &str = "n_channels_dat = 4\ndtype = 'int16'\noffset = 0\nsample_rate = 30000.\n";

    #[test]
    fn literals() {
        let params = parse(&format!(
            "{BASE}dat_path = r'C:\\data\\run.bin'  # raw\nhp_filtered = True\n\
             x = [1, -2.5e3, 'a\\'b', None,]\ny = 1_000\n"
        ))
        .expect("valid params");
        assert_eq!(params.dat_path, vec![PathBuf::from("C:\\data\\run.bin")]);
        assert!(params.hp_filtered);
        assert_eq!(params.sample_rate, 30000.0);
        assert_eq!(
            params.other["x"],
            ParamValue::List(vec![
                ParamValue::Int(1),
                ParamValue::Float(-2500.0),
                ParamValue::Str("a'b".into()),
                ParamValue::None
            ])
        );
        assert_eq!(params.other["y"], ParamValue::Int(1000));
        let written = params.to_python().expect("writable");
        assert!(
            written.contains("dat_path = r'C:\\data\\run.bin'\n"),
            "{written}"
        );
        assert_eq!(parse(&written).expect("reads back"), params);
    }

    #[test]
    fn refused() {
        for (line, why) in [
            ("dat_path = np.zeros(3)", "not a literal"),
            ("import numpy", "expected `name = literal`"),
            ("dat_path = 'open", "not closed"),
            ("dat_path = 'a' + 'b'", "expected only a literal"),
            ("dat_path = '''a'''", "triple-quoted"),
            ("dat_path = 007", "not a literal"),
            ("2x = 1", "Python name"),
        ] {
            let error = parse(&format!("{BASE}{line}\n"))
                .expect_err(line)
                .to_string();
            assert!(
                error.contains(why) && error.contains("line 5"),
                "{line}: {error}"
            );
        }
        let error = parse(BASE).expect_err("no dat_path").to_string();
        assert!(error.contains("`dat_path` is not set"), "{error}");
        let error = parse(&format!("{BASE}dat_path = 'a'\noffset = 1\n"))
            .expect_err("twice")
            .to_string();
        assert!(error.contains("`offset` is set twice"), "{error}");
    }

    #[test]
    fn python_literals_round_trip() {
        assert_eq!(python_float(30000.0), "30000.0");
        assert_eq!(python_float(1e300), "1e300");
        assert_eq!(raw_string("a'b\\"), "'a\\'b\\\\'");
        assert_eq!(raw_string("C:\\x"), "r'C:\\x'");
        assert_eq!(numpy_name("<i2".parse().expect("dtype")), "int16");
        assert_eq!(numpy_name(">f4".parse().expect("dtype")), ">f4");
    }
}
