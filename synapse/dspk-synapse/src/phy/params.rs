//! `params.py`: the recording parameters of a Phy folder, read as `name = literal` statements
//! by the crate's Python-literal parser (shared with `.prb` probe files).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use dspk_core::{ChannelInfo, SampleRate};
use dspk_io::{
    ByteOrder, Dtype, ElementKind, METADATA_LIMIT, RawRecording, RawSpec, SampleOrder,
    read_small_file,
};

use crate::pyliteral::{self, Limits, LiteralError, Problem, PyValue, Value};
use crate::{Error, Result};

/// The bounds of the literal parser for a `params.py`: no calls, and no more values than a
/// list of a million raw files would hold.
const PARAMS_LIMITS: Limits = Limits {
    max_bytes: METADATA_LIMIT as usize,
    max_depth: 32,
    max_values: 1 << 20,
    range_budget: None,
};

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
    /// A list of literals (`['a.dat', 'b.dat']`).
    List(Vec<ParamValue>),
    /// A tuple of literals (`(1, 2)`, `('a',)`).
    Tuple(Vec<ParamValue>),
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
            Self::Tuple(items) => {
                let items: Vec<String> = items.iter().map(Self::to_python).collect();
                match items.as_slice() {
                    [one] => format!("({one},)"),
                    _ => format!("({})", items.join(", ")),
                }
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
        let text =
            pyliteral::decode(&bytes, &PARAMS_LIMITS).map_err(|e| located_error(e, "", path))?;
        Self::parse(text, path)
    }

    /// Parses the text of a `params.py` (`path` names it in errors).
    ///
    /// The file must be `name = literal` statements (one a line or separated by `;`, with `#`
    /// comments), each literal a string (`'..'`, `".."`, `r'..'`, with Python's escapes), a
    /// number, `True`, `False`, `None`, or a list or tuple of those: the subset of Python that
    /// Kilosort, phy and SpikeInterface write. phylib runs the file with `exec`; anything else
    /// (imports, names, calls, arithmetic, dicts) is refused here rather than guessed at.
    ///
    /// # Errors
    ///
    /// [`dspk_io::Error::Invalid`] naming `path`, the line and column and quoting the line,
    /// for text that is not Python literals or a repeated name;
    /// [`dspk_io::Error::Unsupported`] likewise for Python beyond literals; `Invalid` for a
    /// missing required name (`dat_path`, `n_channels_dat`, `dtype`, `offset`, `sample_rate`)
    /// or a value of the wrong type or range.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let statements =
            pyliteral::parse(text, &PARAMS_LIMITS).map_err(|e| located_error(e, text, path))?;
        let mut values = BTreeMap::new();
        for statement in statements {
            let value =
                param_value(statement.value, text).map_err(|e| located_error(e, text, path))?;
            if values.contains_key(&statement.name) {
                let twice = LiteralError::new(
                    Problem::Invalid,
                    text,
                    statement.pos,
                    format!("`{}` is set twice", statement.name),
                );
                return Err(located_error(twice, text, path));
            }
            values.insert(statement.name, value);
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
        ParamValue::List(items) | ParamValue::Tuple(items) => items.iter().all(all_finite),
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

/// The error for `params.py` at `path` from a parse error in `text`: its line and column,
/// and the line quoted.
fn located_error(error: LiteralError, text: &str, path: &Path) -> Error {
    let line = error
        .line()
        .and_then(|n| text.lines().nth(n.saturating_sub(1)))
        .map(str::trim)
        .unwrap_or_default();
    let message = if line.is_empty() {
        error.to_string()
    } else {
        format!("{error}: `{}`", super::shown(line))
    };
    error.into_error(path, message)
}

/// The parameter value of a parsed literal: dicts are refused (phylib's readers take none).
fn param_value(value: Value, text: &str) -> Result<ParamValue, LiteralError> {
    let items = |items: Vec<Value>| {
        items
            .into_iter()
            .map(|item| param_value(item, text))
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(match value.kind {
        PyValue::None => ParamValue::None,
        PyValue::Bool(flag) => ParamValue::Bool(flag),
        PyValue::Int(n) => ParamValue::Int(n),
        PyValue::Float(x) => ParamValue::Float(x),
        PyValue::Str(s) => ParamValue::Str(s),
        PyValue::List(list) => ParamValue::List(items(list)?),
        PyValue::Tuple(tuple) => ParamValue::Tuple(items(tuple)?),
        PyValue::Dict(_) => {
            return Err(LiteralError::new(
                Problem::Unsupported,
                text,
                value.pos,
                "a dict (params.py values are strings, numbers, True, False, None, lists and \
                 tuples)",
            ));
        }
    })
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
            (
                "dat_path = np.zeros(3)",
                "line 5, column 12: the call `np.zeros(...)` is Python code, not a literal",
            ),
            (
                "import numpy",
                "line 5, column 1: expected `name = literal`, found a Python `import` statement",
            ),
            (
                "dat_path = 'open",
                "line 5, column 12: the string is never closed",
            ),
            (
                "dat_path = 'a' + 'b'",
                "line 5, column 16: expected the end of the statement",
            ),
            (
                "dat_path = '''a'''",
                "line 5, column 12: a triple-quoted string",
            ),
            ("dat_path = 007", "line 5, column 12: `007`: leading zeros"),
            (
                "2x = 1",
                "line 5, column 1: expected `name = literal` starting with a Python name",
            ),
            ("x = {'a': 1}", "line 5, column 5: a dict"),
            ("x = [1,\n 2, 3 4]", "line 6, column 7: expected `,` or `]`"),
            ("True = 1", "line 5, column 1: cannot assign to `True`"),
        ] {
            let error = parse(&format!("{BASE}{line}\n"))
                .expect_err(line)
                .to_string();
            // The line of the error is quoted as well.
            let last = line.lines().last().unwrap_or_default().trim();
            assert!(
                error.contains(why) && error.contains(&format!("`{last}`")),
                "{line}: {error}"
            );
        }
        let deep = format!("x = {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
        for (text, why) in [
            (
                format!("{BASE}{deep}"),
                "line 5, column 37: brackets nest deeper than 32",
            ),
            (BASE.to_string(), "`dat_path` is not set"),
            (
                format!("{BASE}dat_path = 'a'\noffset = 1\n"),
                "line 6, column 1: `offset` is set twice: `offset = 1`",
            ),
        ] {
            let error = parse(&text).expect_err(why).to_string();
            assert!(error.contains(why), "{error}");
        }
    }

    #[test]
    fn statements_span_lines_and_tuples_round_trip() {
        let params = parse(&format!(
            "{BASE}dat_path = [r'a.dat',\n            'b\\x41.dat',]; pair = (1, 'x')\n\
             one = (2.5,)\nempty = ()\nwords = 'ab' \"cd\"\n"
        ))
        .expect("valid params");
        assert_eq!(
            params.dat_path,
            [PathBuf::from("a.dat"), PathBuf::from("bA.dat")]
        );
        assert_eq!(
            params.other["pair"],
            ParamValue::Tuple(vec![ParamValue::Int(1), ParamValue::Str("x".into())])
        );
        assert_eq!(params.other["one"].to_string(), "(2.5,)");
        assert_eq!(params.other["empty"].to_string(), "()");
        assert_eq!(params.other["words"], ParamValue::Str("abcd".into()));
        let written = params.to_python().expect("writable");
        assert_eq!(parse(&written).expect("reads back"), params);
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
