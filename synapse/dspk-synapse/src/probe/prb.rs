//! `.prb` probe files: Python source holding plain literals, as klusta, spyking-circus,
//! Kilosort 4 and probeinterface's `read_prb` read them.
//!
//! A `.prb` is Python code that those tools `exec`. This module does **not** run Python: it
//! parses the literal subset that real `.prb` files use and refuses everything else with an
//! error naming the construct and its line:
//!
//! - statements `name = value`, one per line or separated by `;`, comments `#`, and line
//!   continuations (inside brackets or after `\`);
//! - values: integers, floats, strings (`'..'`, `".."`, adjacent strings concatenated),
//!   `True`, `False`, `None`, lists, tuples, dicts, a leading `-`/`+` on numbers, and
//!   `range(..)` / `list(range(..))` with integer arguments (the one call real files use);
//! - limits: the file is at most [`PRB_SIZE_LIMIT`] bytes, brackets nest at most
//!   [`PRB_DEPTH_LIMIT`] deep and `range` calls yield at most [`PRB_RANGE_LIMIT`] integers in
//!   all, so a hostile file costs bounded time and memory.
//!
//! `np.int64(0)`-style reprs (what probeinterface 0.4's `write_prb` writes under numpy 2), names
//! of earlier variables, imports and other expressions are [`dspk_io::Error::Unsupported`]; syntax errors
//! are [`dspk_io::Error::Invalid`]. Both name the file, the line and the column.
//!
//! The top-level `channel_groups` (matched case-insensitively, as probeinterface does) maps a
//! group key to `{'channels': [...], 'geometry': {channel: (x, y)}, ...}`; other keys (`graph`,
//! `label`) and other top-level assignments (`total_nb_channels`, `radius`) are parsed and
//! ignored.

use std::collections::HashMap;
use std::path::Path;

use super::{Contact, Probe};
use crate::{Error, Result};

/// The largest `.prb` file read: 4 MiB (a 1024-channel file is about 50 kB).
pub const PRB_SIZE_LIMIT: u64 = 4 << 20;

/// The deepest nesting of brackets accepted in a `.prb` file.
pub const PRB_DEPTH_LIMIT: usize = 32;

/// The most integers all `range(..)` calls of one `.prb` file may produce together.
pub const PRB_RANGE_LIMIT: u64 = 1 << 20;

/// Reads a `.prb` file: one [`Probe`] per entry of `channel_groups`, in the file's order, as
/// probeinterface's `read_prb` builds a `ProbeGroup`.
///
/// Each contact is one entry of the group's `channels` list, in that order: its device channel
/// is the entry, its position `geometry[entry]` (µm), its id the channel number written in
/// decimal. The probe's name is the group key (`"0"`, or the string key). The shank of every
/// contact of a group is the group's index in the file (0 for the first group): a `.prb` has
/// no shanks of its own, and numbering groups keeps them apart when the probes' contacts are
/// put together (Kilosort 4's `load_probe` likewise makes the group its `kcoords`).
///
/// # Errors
///
/// I/O errors; [`dspk_io::Error::Invalid`] for syntax errors, a missing `channel_groups`, `channels` or
/// `geometry`, a channel without a position, a negative channel, or a channel in two groups;
/// [`dspk_io::Error::Unsupported`] for anything that is not a plain literal (see the module doc), each
/// naming the file (and the line where there is one).
pub fn read_prb(path: &Path) -> Result<Vec<Probe>> {
    let bytes = dspk_io::read_small_file(path, PRB_SIZE_LIMIT)?;
    parse_prb(&bytes, path)
}

/// Parses the bytes of a `.prb` file as [`read_prb`] does; errors name `path`.
///
/// # Errors
///
/// As [`read_prb`], plus [`dspk_io::Error::Invalid`] if `bytes` is longer than [`PRB_SIZE_LIMIT`].
pub fn parse_prb(bytes: &[u8], path: &Path) -> Result<Vec<Probe>> {
    if bytes.len() as u64 > PRB_SIZE_LIMIT {
        return Err(Error::invalid(
            path,
            format!(
                "the .prb file has {} bytes, more than the {PRB_SIZE_LIMIT} accepted",
                bytes.len()
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        Error::invalid(path, format!("line {line}: the file is not valid UTF-8"))
    })?;
    let assignments = Parser::new(text, path).file()?;
    let groups = assignments
        .into_iter()
        .rev()
        .find(|(name, _)| name.eq_ignore_ascii_case("channel_groups"))
        .map(|(_, value)| value)
        .ok_or_else(|| Error::invalid(path, "no `channel_groups = {...}` assignment"))?;
    probes_from_groups(&groups, path)
}

/// Builds the probes from the `channel_groups` value.
fn probes_from_groups(groups: &Node, path: &Path) -> Result<Vec<Probe>> {
    let Kind::Dict(entries) = &groups.kind else {
        return Err(Error::invalid(
            path,
            format!(
                "line {}: `channel_groups` is {}, expected a dict",
                groups.pos.line,
                groups.kind.describe()
            ),
        ));
    };
    if entries.is_empty() {
        return Err(Error::invalid(
            path,
            format!("line {}: `channel_groups` is empty", groups.pos.line),
        ));
    }
    // Device channel -> (group index, group name), to refuse a channel in two groups.
    let mut owner: HashMap<usize, (usize, String)> = HashMap::new();
    let mut probes = Vec::with_capacity(entries.len());
    for (index, (key, group)) in entries.iter().enumerate() {
        let name = match &key.kind {
            Kind::Str(s) => s.clone(),
            other => other.repr(),
        };
        let shank = u32::try_from(index)
            .map_err(|_| Error::invalid(path, format!("more than {} channel groups", u32::MAX)))?;
        let here = |problem: String| {
            Error::invalid(
                path,
                format!("line {}: channel group {name}: {problem}", group.pos.line),
            )
        };
        let Kind::Dict(fields) = &group.kind else {
            return Err(here(format!(
                "is {}, expected a dict",
                group.kind.describe()
            )));
        };
        let field = |wanted: &str| {
            fields
                .iter()
                .rev()
                .find(|(k, _)| matches!(&k.kind, Kind::Str(s) if s == wanted))
                .map(|(_, v)| v)
        };
        let channels_node = field("channels").ok_or_else(|| here("no 'channels'".into()))?;
        let geometry_node = field("geometry").ok_or_else(|| here("no 'geometry'".into()))?;
        let (Kind::List(items) | Kind::Tuple(items)) = &channels_node.kind else {
            return Err(here(format!(
                "'channels' is {}, expected a list",
                channels_node.kind.describe()
            )));
        };
        let Kind::Dict(geometry) = &geometry_node.kind else {
            return Err(here(format!(
                "'geometry' is {}, expected a dict",
                geometry_node.kind.describe()
            )));
        };
        let positions: HashMap<HashKey, &Node> = geometry
            .iter()
            .filter_map(|(k, v)| k.kind.hash_key().map(|key| (key, v)))
            .collect();
        let mut contacts = Vec::with_capacity(items.len());
        for item in items {
            let channel = item
                .kind
                .as_int()
                .and_then(|c| usize::try_from(c).ok())
                .ok_or_else(|| {
                    Error::invalid(
                        path,
                        format!(
                            "line {}: channel group {name}: channel {} is not a non-negative integer",
                            item.pos.line,
                            item.kind.repr()
                        ),
                    )
                })?;
            if let Some((other_index, other)) = owner.insert(channel, (index, name.clone()))
                && other_index != index
            {
                return Err(here(format!(
                    "channel {channel} is also in channel group {other}"
                )));
            }
            let position = positions
                .get(&HashKey::Int(channel as i64))
                .ok_or_else(|| here(format!("channel {channel} has no entry in 'geometry'")))?;
            contacts.push(Contact {
                id: channel.to_string(),
                position: position_of(position, channel, path)?,
                shank,
                device_channel: Some(channel),
            });
        }
        probes.push(Probe::from_file(path, name, contacts)?);
    }
    Ok(probes)
}

/// `(x, y)` from a geometry entry.
fn position_of(node: &Node, channel: usize, path: &Path) -> Result<[f64; 2]> {
    let bad = || {
        Error::invalid(
            path,
            format!(
                "line {}: the geometry of channel {channel} is {}, expected (x, y) numbers",
                node.pos.line,
                node.kind.repr()
            ),
        )
    };
    let (Kind::List(xy) | Kind::Tuple(xy)) = &node.kind else {
        return Err(bad());
    };
    match xy.as_slice() {
        [x, y] => Ok([
            x.kind.as_number().ok_or_else(bad)?,
            y.kind.as_number().ok_or_else(bad)?,
        ]),
        _ => Err(bad()),
    }
}

/// Where a token or value starts: its line (1-based) and byte offset in the text.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pos {
    line: usize,
    offset: usize,
}

/// A parsed literal and where it starts.
#[derive(Debug, Clone)]
struct Node {
    pos: Pos,
    kind: Kind,
}

/// The literal kinds of the subset.
#[derive(Debug, Clone)]
enum Kind {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    List(Vec<Node>),
    Tuple(Vec<Node>),
    /// Entries in insertion order; a repeated key replaced the earlier value in place, as in
    /// Python.
    Dict(Vec<(Node, Node)>),
}

impl Kind {
    /// The integer value (Python's `True`/`False` are 1/0, as Python compares them).
    fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(v) => Some(*v),
            Self::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The numeric value of an int or a float.
    fn as_number(&self) -> Option<f64> {
        match self {
            Self::Int(v) => Some(*v as f64),
            Self::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// A short description for error messages.
    fn describe(&self) -> &'static str {
        match self {
            Self::Int(_) => "an int",
            Self::Float(_) => "a float",
            Self::Str(_) => "a string",
            Self::Bool(_) => "a bool",
            Self::None => "None",
            Self::List(_) => "a list",
            Self::Tuple(_) => "a tuple",
            Self::Dict(_) => "a dict",
        }
    }

    /// Python-like text of a scalar (containers are described, not printed).
    fn repr(&self) -> String {
        match self {
            Self::Int(v) => v.to_string(),
            Self::Float(v) => format!("{v:?}"),
            Self::Str(s) => format!("{s:?}"),
            Self::Bool(true) => "True".into(),
            Self::Bool(false) => "False".into(),
            Self::None => "None".into(),
            other => other.describe().into(),
        }
    }

    /// The key Python would hash this value by (`1`, `1.0` and `True` are one key), or `None`
    /// for unhashable values (lists, dicts).
    fn hash_key(&self) -> Option<HashKey> {
        Some(match self {
            Self::Int(v) => HashKey::Int(*v),
            Self::Bool(b) => HashKey::Int(i64::from(*b)),
            Self::Float(v) if v.fract() == 0.0 && v.abs() < 9.0e18 => HashKey::Int(*v as i64),
            Self::Float(v) => HashKey::Float(v.to_bits()),
            Self::Str(s) => HashKey::Str(s.clone()),
            Self::None => HashKey::None,
            Self::Tuple(items) => HashKey::Tuple(
                items
                    .iter()
                    .map(|n| n.kind.hash_key())
                    .collect::<Option<_>>()?,
            ),
            Self::List(_) | Self::Dict(_) => return None,
        })
    }
}

/// A dict key as Python compares keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HashKey {
    Int(i64),
    Float(u64),
    Str(String),
    None,
    Tuple(Vec<HashKey>),
}

/// Tokens of the literal subset.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    Punct(char),
    /// The end of a logical line (a newline outside brackets, or `;`).
    End,
    Eof,
}

/// A recursive-descent parser over the text, with its own tokenizer.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    /// The tokenizer's byte offset.
    offset: usize,
    /// The tokenizer's line (1-based).
    line: usize,
    /// Brackets opened and not yet closed by the tokens handed out: a newline inside brackets
    /// does not end a statement.
    open_brackets: usize,
    /// Integers `range` calls may still produce.
    range_budget: u64,
    peeked: Option<(Token, Pos)>,
    path: &'a Path,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, path: &'a Path) -> Self {
        Self {
            text,
            bytes: text.as_bytes(),
            offset: 0,
            line: 1,
            open_brackets: 0,
            range_budget: PRB_RANGE_LIMIT,
            peeked: None,
            path,
        }
    }

    /// `line L, column C` of `pos` (the column counted in characters, computed only for
    /// messages).
    fn at(&self, pos: Pos) -> String {
        let offset = pos.offset.min(self.text.len());
        let line_start = self.bytes[..offset]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = self
            .text
            .get(line_start..offset)
            .map_or(1, |s| s.chars().count() + 1);
        format!("line {}, column {column}", pos.line)
    }

    /// An [`dspk_io::Error::Invalid`] at `pos`.
    fn invalid(&self, pos: Pos, problem: impl std::fmt::Display) -> Error {
        Error::invalid(self.path, format!("{}: {problem}", self.at(pos)))
    }

    /// An [`dspk_io::Error::Unsupported`] at `pos`.
    fn unsupported(&self, pos: Pos, what: impl std::fmt::Display) -> Error {
        Error::unsupported(
            self.path,
            format!(
                "{}: {what}; a .prb file is read as plain Python literals (numbers, strings, \
                 lists, tuples, dicts, True/False/None, range()), not executed",
                self.at(pos)
            ),
        )
    }

    /// All top-level assignments, in order.
    fn file(mut self) -> Result<Vec<(String, Node)>> {
        let mut out = Vec::new();
        loop {
            let (token, pos) = self.next()?;
            match token {
                Token::Eof => return Ok(out),
                Token::End => {}
                Token::Name(name) => {
                    let (eq, eq_pos) = self.next()?;
                    if eq != Token::Punct('=') {
                        return Err(match name.as_str() {
                            "import" | "from" | "def" | "class" | "for" | "if" | "while"
                            | "with" | "del" | "print" | "assert" | "exec" | "lambda" => {
                                self.unsupported(pos, format!("a `{name}` statement"))
                            }
                            _ => self.unsupported(
                                eq_pos,
                                format!(
                                    "`{name}` followed by {}: only `name = literal` \
                                     statements are read",
                                    describe_token(&eq)
                                ),
                            ),
                        });
                    }
                    let value = self.value(0)?;
                    let (end, end_pos) = self.next()?;
                    if !matches!(end, Token::End | Token::Eof) {
                        return Err(self.invalid(
                            end_pos,
                            format!(
                                "expected the end of the statement after the value of `{name}`, \
                                 found {}",
                                describe_token(&end)
                            ),
                        ));
                    }
                    out.push((name, value));
                    if end == Token::Eof {
                        return Ok(out);
                    }
                }
                other => {
                    return Err(self.invalid(
                        pos,
                        format!("expected `name = value`, found {}", describe_token(&other)),
                    ));
                }
            }
        }
    }

    /// One value; `depth` counts the enclosing brackets.
    fn value(&mut self, depth: usize) -> Result<Node> {
        let (token, pos) = self.next()?;
        let kind = match token {
            Token::Int(v) => Kind::Int(v),
            Token::Float(v) => Kind::Float(v),
            Token::Str(mut s) => {
                while let Token::Str(_) = self.peek()?.0 {
                    if let (Token::Str(more), _) = self.next()? {
                        s.push_str(&more);
                    }
                }
                Kind::Str(s)
            }
            Token::Punct(sign @ ('-' | '+')) => match self.next()? {
                (Token::Int(v), _) if sign == '+' => Kind::Int(v),
                (Token::Int(v), at) => Kind::Int(
                    v.checked_neg()
                        .ok_or_else(|| self.invalid(at, "integer out of the 64-bit range"))?,
                ),
                (Token::Float(v), _) => Kind::Float(if sign == '-' { -v } else { v }),
                (other @ (Token::Name(_) | Token::Punct(_)), at) => {
                    return Err(self.unsupported(
                        at,
                        format!("`{sign}` applied to {}", describe_token(&other)),
                    ));
                }
                (other, at) => {
                    return Err(self.invalid(
                        at,
                        format!(
                            "expected a number after `{sign}`, found {}",
                            describe_token(&other)
                        ),
                    ));
                }
            },
            Token::Punct(open @ ('[' | '(' | '{')) => {
                if depth >= PRB_DEPTH_LIMIT {
                    return Err(
                        self.invalid(pos, format!("brackets nest deeper than {PRB_DEPTH_LIMIT}"))
                    );
                }
                self.container(open, depth + 1, pos)?
            }
            Token::Name(name) => self.name_value(name, depth, pos)?,
            other => {
                return Err(self.invalid(
                    pos,
                    format!("expected a value, found {}", describe_token(&other)),
                ));
            }
        };
        Ok(Node { pos, kind })
    }

    /// `True`/`False`/`None`, `range(..)`, `list(range(..))`, `tuple(range(..))`; any other name
    /// or call is refused.
    fn name_value(&mut self, name: String, depth: usize, pos: Pos) -> Result<Kind> {
        match name.as_str() {
            "True" => return Ok(Kind::Bool(true)),
            "False" => return Ok(Kind::Bool(false)),
            "None" => return Ok(Kind::None),
            _ => {}
        }
        // The full dotted name, for the message (`np.int64`).
        let mut full = name;
        while self.peek()?.0 == Token::Punct('.') {
            self.next()?;
            match self.next()? {
                (Token::Name(part), _) => {
                    full.push('.');
                    full.push_str(&part);
                }
                (other, at) => {
                    return Err(self.invalid(
                        at,
                        format!(
                            "expected a name after `.`, found {}",
                            describe_token(&other)
                        ),
                    ));
                }
            }
        }
        if self.peek()?.0 != Token::Punct('(') {
            return Err(self.unsupported(
                pos,
                format!("the name `{full}` (variables are not evaluated)"),
            ));
        }
        if depth >= PRB_DEPTH_LIMIT {
            return Err(self.invalid(pos, format!("brackets nest deeper than {PRB_DEPTH_LIMIT}")));
        }
        match full.as_str() {
            "range" => {
                self.next()?;
                Ok(Kind::List(self.range_call(depth + 1, pos)?))
            }
            "list" | "tuple" => {
                self.next()?;
                let (inner, inner_pos) = self.next()?;
                if inner != Token::Name("range".into()) || self.next()?.0 != Token::Punct('(') {
                    return Err(self.unsupported(
                        inner_pos,
                        format!("`{full}(...)` of anything but range(...)"),
                    ));
                }
                let items = self.range_call(depth + 1, inner_pos)?;
                match self.next()? {
                    (Token::Punct(')'), _) => {}
                    (other, at) => {
                        return Err(self.invalid(
                            at,
                            format!(
                                "expected `)` closing `{full}(range(...))`, found {}",
                                describe_token(&other)
                            ),
                        ));
                    }
                }
                Ok(if full == "list" {
                    Kind::List(items)
                } else {
                    Kind::Tuple(items)
                })
            }
            _ => Err(self.unsupported(
                pos,
                format!("the call `{full}(...)` is Python code, not a literal"),
            )),
        }
    }

    /// The arguments of `range(` up to its `)`, expanded.
    fn range_call(&mut self, depth: usize, pos: Pos) -> Result<Vec<Node>> {
        let mut args = Vec::new();
        loop {
            if self.peek()?.0 == Token::Punct(')') {
                self.next()?;
                break;
            }
            let arg = self.value(depth)?;
            let Kind::Int(v) = arg.kind else {
                return Err(self.invalid(
                    arg.pos,
                    format!("range() takes integers, found {}", arg.kind.describe()),
                ));
            };
            args.push(v);
            match self.next()? {
                (Token::Punct(','), _) => {}
                (Token::Punct(')'), _) => break,
                (other, at) => {
                    return Err(self.invalid(
                        at,
                        format!(
                            "expected `,` or `)` in range(), found {}",
                            describe_token(&other)
                        ),
                    ));
                }
            }
        }
        let (start, stop, step) = match args.as_slice() {
            [stop] => (0, *stop, 1),
            [start, stop] => (*start, *stop, 1),
            [start, stop, step] if *step != 0 => (*start, *stop, *step),
            [_, _, _] => return Err(self.invalid(pos, "range() step is zero")),
            _ => {
                return Err(self.invalid(
                    pos,
                    format!("range() takes 1 to 3 arguments, found {}", args.len()),
                ));
            }
        };
        // Number of values, in i128 so no step or bound overflows.
        let (start, stop, step) = (i128::from(start), i128::from(stop), i128::from(step));
        let span = if step > 0 { stop - start } else { start - stop };
        let count = if span <= 0 {
            0
        } else {
            (span + step.abs() - 1) / step.abs()
        };
        if count > i128::from(self.range_budget) {
            return Err(self.invalid(
                pos,
                format!(
                    "range() calls produce more than {PRB_RANGE_LIMIT} integers in all (this one \
                     {count})"
                ),
            ));
        }
        // count <= range_budget <= PRB_RANGE_LIMIT, and every value lies between start and
        // stop, so the conversions below hold.
        self.range_budget -= u64::try_from(count).unwrap_or(u64::MAX);
        Ok((0..count)
            .map(|i| Node {
                pos,
                kind: Kind::Int(i64::try_from(start + i * step).unwrap_or_default()),
            })
            .collect())
    }

    /// A list, tuple, parenthesized value or dict after its opening bracket at `pos`.
    fn container(&mut self, open: char, depth: usize, pos: Pos) -> Result<Kind> {
        let close = match open {
            '[' => ']',
            '(' => ')',
            _ => '}',
        };
        let mut items = Vec::new();
        let mut entries: Vec<(Node, Node)> = Vec::new();
        let mut index: HashMap<HashKey, usize> = HashMap::new();
        let mut trailing_comma = false;
        loop {
            let (token, at) = self.peek()?;
            if token == Token::Punct(close) {
                self.next()?;
                break;
            }
            if token == Token::Eof {
                return Err(self.never_closed(open, pos, at));
            }
            let item = self.value(depth)?;
            if open == '{' {
                let (colon, colon_pos) = self.peek()?;
                if colon != Token::Punct(':') {
                    return Err(if entries.is_empty() {
                        self.unsupported(item.pos, "a set literal")
                    } else {
                        self.invalid(
                            colon_pos,
                            format!(
                                "expected `:` after a dict key, found {}",
                                describe_token(&colon)
                            ),
                        )
                    });
                }
                self.next()?;
                let value = self.value(depth)?;
                let key = item.kind.hash_key().ok_or_else(|| {
                    self.invalid(
                        item.pos,
                        format!("{} cannot be a dict key", item.kind.describe()),
                    )
                })?;
                if let Some(&existing) = index.get(&key) {
                    entries[existing].1 = value;
                } else {
                    index.insert(key, entries.len());
                    entries.push((item, value));
                }
            } else {
                items.push(item);
            }
            match self.next()? {
                (Token::Punct(','), _) => trailing_comma = true,
                (Token::Punct(p), _) if p == close => {
                    trailing_comma = false;
                    break;
                }
                (Token::Eof, at) => return Err(self.never_closed(open, pos, at)),
                (other, at) => {
                    return Err(self.invalid(
                        at,
                        format!(
                            "expected `,` or `{close}` (for the `{open}` at {}), found {}",
                            self.at(pos),
                            describe_token(&other)
                        ),
                    ));
                }
            }
        }
        Ok(match (open, items.pop()) {
            ('[', last) => {
                items.extend(last);
                Kind::List(items)
            }
            ('{', _) => Kind::Dict(entries),
            // `(x)` is x itself; `(x,)` and `()` are tuples.
            (_, Some(only)) if items.is_empty() && !trailing_comma => only.kind,
            (_, last) => {
                items.extend(last);
                Kind::Tuple(items)
            }
        })
    }

    /// The error for a bracket `open` at `pos` that the file ends (at `end`) without closing.
    fn never_closed(&self, open: char, pos: Pos, end: Pos) -> Error {
        self.invalid(
            pos,
            format!(
                "`{open}` is never closed (the file ends at {})",
                self.at(end)
            ),
        )
    }

    fn peek(&mut self) -> Result<(Token, Pos)> {
        if let Some(peeked) = &self.peeked {
            return Ok(peeked.clone());
        }
        let token = self.lex()?;
        self.peeked = Some(token.clone());
        Ok(token)
    }

    fn next(&mut self) -> Result<(Token, Pos)> {
        let token = match self.peeked.take() {
            Some(token) => token,
            None => self.lex()?,
        };
        // Only handed-out tokens count, and the tokenizer never runs ahead of the one peeked
        // token, so a newline is judged with every bracket before it accounted for.
        match token.0 {
            Token::Punct('[' | '(' | '{') => self.open_brackets += 1,
            Token::Punct(']' | ')' | '}') => {
                self.open_brackets = self.open_brackets.saturating_sub(1);
            }
            _ => {}
        }
        Ok(token)
    }

    /// The next token and where it starts.
    fn lex(&mut self) -> Result<(Token, Pos)> {
        loop {
            let here = Pos {
                line: self.line,
                offset: self.offset,
            };
            let Some(&b) = self.bytes.get(self.offset) else {
                return Ok((Token::Eof, here));
            };
            match b {
                b' ' | b'\t' | b'\r' | b'\x0c' => self.offset += 1,
                b'#' => {
                    while self.bytes.get(self.offset).is_some_and(|&c| c != b'\n') {
                        self.offset += 1;
                    }
                }
                b'\\' if self.bytes.get(self.offset + 1) == Some(&b'\n') => {
                    self.offset += 2;
                    self.line += 1;
                }
                b'\\' if self.bytes[self.offset + 1..].starts_with(b"\r\n") => {
                    self.offset += 3;
                    self.line += 1;
                }
                b'\n' => {
                    self.offset += 1;
                    self.line += 1;
                    if self.open_brackets == 0 {
                        return Ok((Token::End, here));
                    }
                }
                _ => break,
            }
        }
        let start = self.offset;
        let pos = Pos {
            line: self.line,
            offset: start,
        };
        let b = self.bytes[start];
        let token = match b {
            b';' => {
                self.offset += 1;
                Token::End
            }
            b'[' | b']' | b'(' | b')' | b'{' | b'}' | b':' | b',' | b'=' | b'-' | b'+' => {
                self.offset += 1;
                Token::Punct(char::from(b))
            }
            b'.' if !self.bytes.get(start + 1).is_some_and(u8::is_ascii_digit) => {
                self.offset += 1;
                Token::Punct('.')
            }
            b'0'..=b'9' | b'.' => self.number(pos)?,
            b'\'' | b'"' => self.string(pos)?,
            _ if b == b'_' || b.is_ascii_alphabetic() => {
                while self
                    .bytes
                    .get(self.offset)
                    .is_some_and(|&c| c == b'_' || c.is_ascii_alphanumeric())
                {
                    self.offset += 1;
                }
                let word = &self.text[start..self.offset];
                // String prefixes (r'..', b'..', f'..') are not plain literals here.
                if matches!(self.bytes.get(self.offset), Some(b'\'' | b'"')) {
                    return Err(self.unsupported(pos, format!("a `{word}`-prefixed string")));
                }
                Token::Name(word.to_string())
            }
            _ => {
                let ch = self.text[start..].chars().next().unwrap_or('?');
                return Err(self.unsupported(pos, format!("the character {ch:?}")));
            }
        };
        Ok((token, pos))
    }

    /// An int or float literal (decimal with `_` separators; `0x`/`0o`/`0b` ints).
    fn number(&mut self, pos: Pos) -> Result<Token> {
        let start = self.offset;
        let radix = match self.bytes.get(start..start + 2) {
            Some([b'0', b'x' | b'X']) => 16,
            Some([b'0', b'o' | b'O']) => 8,
            Some([b'0', b'b' | b'B']) => 2,
            _ => 10,
        };
        let word_char = |c: &u8| *c == b'_' || c.is_ascii_alphanumeric();
        if radix != 10 {
            self.offset += 2;
            while self.bytes.get(self.offset).is_some_and(word_char) {
                self.offset += 1;
            }
            let raw = &self.text[start..self.offset];
            let digits = raw[2..].replace('_', "");
            return i64::from_str_radix(&digits, radix)
                .map(Token::Int)
                .map_err(|_| self.invalid(pos, format!("bad integer `{raw}`")));
        }
        let mut is_float = false;
        while let Some(&c) = self.bytes.get(self.offset) {
            match c {
                b'0'..=b'9' | b'_' => self.offset += 1,
                b'.' => {
                    is_float = true;
                    self.offset += 1;
                }
                b'e' | b'E' => {
                    is_float = true;
                    self.offset += 1;
                    if matches!(self.bytes.get(self.offset), Some(b'+' | b'-')) {
                        self.offset += 1;
                    }
                }
                _ => break,
            }
        }
        if self.bytes.get(self.offset).is_some_and(word_char) {
            let end = self.offset + 1;
            return Err(self.unsupported(
                pos,
                format!("the number suffix in `{}`", &self.text[start..end]),
            ));
        }
        let raw = &self.text[start..self.offset];
        let bad = || self.invalid(pos, format!("bad number `{raw}`"));
        if raw.ends_with('_') || raw.contains("__") || raw.contains("_.") || raw.contains("._") {
            return Err(bad());
        }
        let clean = raw.replace('_', "");
        if is_float {
            return clean.parse::<f64>().map(Token::Float).map_err(|_| bad());
        }
        if clean.len() > 1 && clean.starts_with('0') && clean.bytes().any(|c| c != b'0') {
            return Err(self.invalid(
                pos,
                format!("`{raw}`: leading zeros in an integer are not Python"),
            ));
        }
        clean
            .parse::<i64>()
            .map(Token::Int)
            .map_err(|_| self.invalid(pos, format!("integer `{raw}` is out of the 64-bit range")))
    }

    /// A single- or double-quoted string with the common escapes.
    fn string(&mut self, pos: Pos) -> Result<Token> {
        let quote = char::from(self.bytes[self.offset]);
        let never_closed = |parser: &Self| parser.invalid(pos, "the string is never closed");
        if self.text[self.offset..].starts_with(&quote.to_string().repeat(3)) {
            return Err(self.unsupported(pos, "a triple-quoted string"));
        }
        self.offset += 1;
        let mut out = String::new();
        loop {
            let Some(ch) = self.text[self.offset..].chars().next() else {
                return Err(never_closed(self));
            };
            self.offset += ch.len_utf8();
            match ch {
                '\n' => return Err(never_closed(self)),
                c if c == quote => return Ok(Token::Str(out)),
                '\\' => {
                    let Some(escaped) = self.text[self.offset..].chars().next() else {
                        return Err(never_closed(self));
                    };
                    self.offset += escaped.len_utf8();
                    match escaped {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '0' => out.push('\0'),
                        '\\' | '\'' | '"' => out.push(escaped),
                        '\n' => self.line += 1,
                        other => {
                            return Err(
                                self.unsupported(pos, format!("the string escape `\\{other}`"))
                            );
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// A token for error messages.
fn describe_token(token: &Token) -> String {
    match token {
        Token::Name(n) => format!("`{n}`"),
        Token::Int(v) => format!("the integer {v}"),
        Token::Float(v) => format!("the number {v}"),
        Token::Str(s) => format!("the string {s:?}"),
        Token::Punct(p) => format!("`{p}`"),
        Token::End => "the end of the line".into(),
        Token::Eof => "the end of the file".into(),
    }
}
