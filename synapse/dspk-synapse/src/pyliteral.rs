//! A bounded parser of the Python literal subset that `.prb` probe files and Phy's `params.py`
//! are written in. Nothing is executed.
//!
//! - A file is `name = value` statements, separated by newlines outside brackets or by `;`,
//!   with `#` comments and line continuations (inside brackets, or after `\`).
//! - Values: ints (decimal with `_` separators, `0x`/`0o`/`0b`), floats (`30000.`, `.5`,
//!   `1e3`), a leading `-`/`+` on numbers, strings as Python reads them (`'..'`, `".."`, `r`
//!   and `u` prefixes, adjacent strings concatenated, the escapes `\n \t \xhh \uXXXX \ooo` and
//!   the others, unknown escapes kept as written), `True`, `False`, `None`, lists, tuples and
//!   dicts (a repeated key replaces the earlier value in place, as in Python), trailing commas
//!   allowed. Where [`Limits::range_budget`] allows it, `range(..)`, `list(range(..))` and
//!   `tuple(range(..))` with integer arguments are expanded.
//! - [`Limits`] bound the text's length, the nesting depth, the number of values and the
//!   integers `range` calls produce, so hostile text costs bounded time, memory and stack.
//!
//! [`parse`] returns the statements in order; a [`LiteralError`] says whether the text is
//! malformed ([`Problem::Invalid`]) or Python beyond the subset ([`Problem::Unsupported`]:
//! names, calls, operators, comprehensions, sets, triple-quoted, byte and f-strings), and
//! where (line and column). [`LiteralError::into_error`] makes it the crate's [`Error`] for a
//! file.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crate::Error;

/// The bounds on what one [`parse`] reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The longest text, in bytes.
    pub max_bytes: usize,
    /// The deepest nesting of brackets and calls.
    pub max_depth: usize,
    /// The most values (every number, string, constant and container counts, and every
    /// integer a `range` call produces).
    pub max_values: usize,
    /// The most integers all `range(..)` calls may produce together; `None` refuses calls.
    pub range_budget: Option<u64>,
}

/// Where a token or value starts: its line (1-based) and byte offset in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub line: usize,
    pub offset: usize,
}

/// A parsed value and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Value {
    pub pos: Pos,
    pub kind: PyValue,
}

/// The literal kinds of the subset.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PyValue {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    None,
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Entries in insertion order, keys unique as Python compares them.
    Dict(Vec<(Value, Value)>),
}

/// One `name = value` statement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assignment {
    pub name: String,
    pub pos: Pos,
    pub value: Value,
}

/// What is wrong with the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Not Python, or over a limit.
    Invalid,
    /// Python, but not a plain literal.
    Unsupported,
}

/// A parse error: the problem, its line and column (1-based, the column in characters; none
/// for an error about the whole text) and a lower-case message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiteralError {
    pub problem: Problem,
    pub location: Option<(usize, usize)>,
    pub message: String,
}

impl LiteralError {
    /// An error at `pos` of `text`.
    pub(crate) fn new(problem: Problem, text: &str, pos: Pos, message: impl Into<String>) -> Self {
        Self {
            problem,
            location: Some((pos.line, column(text, pos))),
            message: message.into(),
        }
    }

    /// The line the error is on, if any.
    pub(crate) fn line(&self) -> Option<usize> {
        self.location.map(|(line, _)| line)
    }

    /// The crate's error for the file `path`: [`dspk_io::Error::Invalid`] or
    /// [`dspk_io::Error::Unsupported`], its message `problem`.
    pub(crate) fn into_error(self, path: &Path, problem: String) -> Error {
        match self.problem {
            Problem::Invalid => Error::invalid(path, problem),
            Problem::Unsupported => Error::unsupported(path, problem),
        }
    }
}

impl fmt::Display for LiteralError {
    /// `line L, column C: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((line, column)) = self.location {
            write!(f, "line {line}, column {column}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The column of `pos` in `text` (1-based, in characters; computed only for messages).
fn column(text: &str, pos: Pos) -> usize {
    let offset = pos.offset.min(text.len());
    let line_start = text.as_bytes()[..offset]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    text.get(line_start..offset)
        .map_or(1, |s| s.chars().count() + 1)
}

/// The text of `bytes`: refused if longer than `limits.max_bytes` or not UTF-8 (naming the
/// line and column of the first bad byte).
pub(crate) fn decode<'a>(bytes: &'a [u8], limits: &Limits) -> Result<&'a str, LiteralError> {
    check_length(bytes.len(), limits)?;
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        // The prefix is valid UTF-8 by construction.
        let text = std::str::from_utf8(valid).unwrap_or_default();
        let pos = Pos {
            line: valid.iter().filter(|&&b| b == b'\n').count() + 1,
            offset: valid.len(),
        };
        LiteralError::new(Problem::Invalid, text, pos, "the file is not valid UTF-8")
    })
}

/// Refuses a text of `len` bytes over the limit.
fn check_length(len: usize, limits: &Limits) -> Result<(), LiteralError> {
    if len > limits.max_bytes {
        return Err(LiteralError {
            problem: Problem::Invalid,
            location: None,
            message: format!(
                "the file has {len} bytes, more than the {} accepted",
                limits.max_bytes
            ),
        });
    }
    Ok(())
}

/// All `name = value` statements of `text`, in order (a name set twice appears twice).
pub(crate) fn parse(text: &str, limits: &Limits) -> Result<Vec<Assignment>, LiteralError> {
    check_length(text.len(), limits)?;
    Parser {
        text,
        bytes: text.as_bytes(),
        offset: 0,
        line: 1,
        open_brackets: 0,
        values: 0,
        range_budget: limits.range_budget,
        limits,
        peeked: None,
    }
    .file()
}

impl PyValue {
    /// The integer value (Python's `True`/`False` are 1/0, as Python compares them).
    pub(crate) fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(v) => Some(*v),
            Self::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The numeric value of an int or a float.
    pub(crate) fn as_number(&self) -> Option<f64> {
        match self {
            Self::Int(v) => Some(*v as f64),
            Self::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// A short description for error messages (`an int`, `a dict`).
    pub(crate) fn describe(&self) -> &'static str {
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
    pub(crate) fn repr(&self) -> String {
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
    pub(crate) fn hash_key(&self) -> Option<HashKey> {
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
pub(crate) enum HashKey {
    Int(i64),
    Float(u64),
    Str(String),
    None,
    Tuple(Vec<HashKey>),
}

/// Tokens of the subset.
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

/// Python statements that are not assignments, named in errors.
const STATEMENT_KEYWORDS: [&str; 13] = [
    "import", "from", "def", "class", "for", "if", "while", "with", "del", "print", "assert",
    "exec", "lambda",
];

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
    /// Values made so far.
    values: usize,
    /// Integers `range` calls may still produce (`None`: calls refused).
    range_budget: Option<u64>,
    limits: &'a Limits,
    peeked: Option<(Token, Pos)>,
}

type Parsed<T> = Result<T, LiteralError>;

impl Parser<'_> {
    fn invalid(&self, pos: Pos, problem: impl Into<String>) -> LiteralError {
        LiteralError::new(Problem::Invalid, self.text, pos, problem)
    }

    fn unsupported(&self, pos: Pos, what: impl Into<String>) -> LiteralError {
        LiteralError::new(Problem::Unsupported, self.text, pos, what)
    }

    /// "expected `what`, found `token`" at `pos`.
    fn expected(&self, what: &str, token: &Token, pos: Pos) -> LiteralError {
        self.invalid(
            pos,
            format!("expected {what}, found {}", describe_token(token)),
        )
    }

    /// `line L, column C` of `pos`.
    fn at(&self, pos: Pos) -> String {
        format!("line {}, column {}", pos.line, column(self.text, pos))
    }

    /// Where the tokenizer stands.
    fn here(&self) -> Pos {
        Pos {
            line: self.line,
            offset: self.offset,
        }
    }

    /// All statements, in order.
    fn file(mut self) -> Parsed<Vec<Assignment>> {
        let mut out = Vec::new();
        loop {
            // A statement starting with a digit would lex as a number with a suffix; say what
            // is expected instead.
            if self.peeked.is_none()
                && let Some(end) = self.skip_blanks()
            {
                if end.0 == Token::Eof {
                    return Ok(out);
                }
                continue;
            }
            if self.peeked.is_none() && self.bytes.get(self.offset).is_some_and(u8::is_ascii_digit)
            {
                return Err(self.invalid(
                    self.here(),
                    "expected `name = literal` starting with a Python name, found a number",
                ));
            }
            let (token, pos) = self.next()?;
            let name = match token {
                Token::Eof => return Ok(out),
                Token::End => continue,
                Token::Name(name) => name,
                other => return Err(self.expected("`name = literal`", &other, pos)),
            };
            let (eq, eq_pos) = self.next()?;
            if eq != Token::Punct('=') {
                return Err(if STATEMENT_KEYWORDS.contains(&name.as_str()) {
                    self.unsupported(
                        pos,
                        format!("expected `name = literal`, found a Python `{name}` statement"),
                    )
                } else {
                    self.unsupported(
                        eq_pos,
                        format!(
                            "expected `name = literal`, found `{name}` followed by {}",
                            describe_token(&eq)
                        ),
                    )
                });
            }
            if matches!(name.as_str(), "True" | "False" | "None") {
                return Err(self.invalid(pos, format!("cannot assign to `{name}`")));
            }
            let value = self.value(0)?;
            let (end, end_pos) = self.next()?;
            if !matches!(end, Token::End | Token::Eof) {
                let what = format!("the end of the statement after the value of `{name}`");
                return Err(self.expected(&what, &end, end_pos));
            }
            out.push(Assignment { name, pos, value });
            if end == Token::Eof {
                return Ok(out);
            }
        }
    }

    /// Counts one more value against the limit.
    fn count_values(&mut self, pos: Pos, count: usize) -> Parsed<()> {
        self.values = self.values.saturating_add(count);
        if self.values > self.limits.max_values {
            return Err(self.invalid(pos, format!("more than {} values", self.limits.max_values)));
        }
        Ok(())
    }

    /// Refuses an opening bracket or call at `depth` enclosing ones if that is too deep.
    fn check_depth(&self, depth: usize, pos: Pos) -> Parsed<()> {
        if depth >= self.limits.max_depth {
            return Err(self.invalid(
                pos,
                format!("brackets nest deeper than {}", self.limits.max_depth),
            ));
        }
        Ok(())
    }

    /// One value; `depth` counts the enclosing brackets.
    fn value(&mut self, depth: usize) -> Parsed<Value> {
        let (token, pos) = self.next()?;
        self.count_values(pos, 1)?;
        let kind = match token {
            Token::Int(v) => PyValue::Int(v),
            Token::Float(v) => PyValue::Float(v),
            Token::Str(mut s) => {
                while let Token::Str(_) = self.peek()?.0 {
                    if let (Token::Str(more), _) = self.next()? {
                        s.push_str(&more);
                    }
                }
                PyValue::Str(s)
            }
            Token::Punct(sign @ ('-' | '+')) => self.signed(sign)?,
            Token::Punct(open @ ('[' | '(' | '{')) => {
                self.check_depth(depth, pos)?;
                self.container(open, depth + 1, pos)?
            }
            Token::Name(name) => self.name_value(name, depth, pos)?,
            other => return Err(self.expected("a value", &other, pos)),
        };
        Ok(Value { pos, kind })
    }

    /// The number after a `sign`.
    fn signed(&mut self, sign: char) -> Parsed<PyValue> {
        Ok(match self.next()? {
            (Token::Int(v), _) if sign == '+' => PyValue::Int(v),
            (Token::Int(v), at) => PyValue::Int(
                v.checked_neg()
                    .ok_or_else(|| self.invalid(at, "integer out of the 64-bit range"))?,
            ),
            (Token::Float(v), _) => PyValue::Float(if sign == '-' { -v } else { v }),
            (other @ (Token::Name(_) | Token::Punct(_)), at) => {
                return Err(self.unsupported(
                    at,
                    format!("`{sign}` applied to {}", describe_token(&other)),
                ));
            }
            (other, at) => {
                return Err(self.expected(&format!("a number after `{sign}`"), &other, at));
            }
        })
    }

    /// `True`/`False`/`None`, or (where allowed) `range(..)`, `list(range(..))`,
    /// `tuple(range(..))`; any other name or call is refused.
    fn name_value(&mut self, name: String, depth: usize, pos: Pos) -> Parsed<PyValue> {
        match name.as_str() {
            "True" => return Ok(PyValue::Bool(true)),
            "False" => return Ok(PyValue::Bool(false)),
            "None" => return Ok(PyValue::None),
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
                (other, at) => return Err(self.expected("a name after `.`", &other, at)),
            }
        }
        if self.peek()?.0 != Token::Punct('(') {
            return Err(self.unsupported(
                pos,
                format!("the name `{full}` (variables are not evaluated)"),
            ));
        }
        self.check_depth(depth, pos)?;
        let not_literal = |parser: &Self| {
            parser.unsupported(
                pos,
                format!("the call `{full}(...)` is Python code, not a literal"),
            )
        };
        if self.range_budget.is_none() {
            return Err(not_literal(self));
        }
        match full.as_str() {
            "range" => {
                self.next()?;
                Ok(PyValue::List(self.range_call(depth + 1, pos)?))
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
                        let what = format!("`)` closing `{full}(range(...))`");
                        return Err(self.expected(&what, &other, at));
                    }
                }
                Ok(if full == "list" {
                    PyValue::List(items)
                } else {
                    PyValue::Tuple(items)
                })
            }
            _ => Err(not_literal(self)),
        }
    }

    /// The arguments of `range(` up to its `)`, expanded.
    fn range_call(&mut self, depth: usize, pos: Pos) -> Parsed<Vec<Value>> {
        let mut args = Vec::new();
        loop {
            if self.peek()?.0 == Token::Punct(')') {
                self.next()?;
                break;
            }
            let arg = self.value(depth)?;
            let PyValue::Int(v) = arg.kind else {
                return Err(self.invalid(
                    arg.pos,
                    format!("range() takes integers, found {}", arg.kind.describe()),
                ));
            };
            args.push(v);
            match self.next()? {
                (Token::Punct(','), _) => {}
                (Token::Punct(')'), _) => break,
                (other, at) => return Err(self.expected("`,` or `)` in range()", &other, at)),
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
        let budget = self.range_budget.unwrap_or(0);
        if count > i128::from(budget) {
            return Err(self.invalid(
                pos,
                format!(
                    "range() calls produce more than {} integers in all (this one {count})",
                    self.limits.range_budget.unwrap_or(0)
                ),
            ));
        }
        // count <= budget, and every value lies between start and stop, so the conversions
        // below hold.
        let count = u64::try_from(count).unwrap_or(u64::MAX);
        self.range_budget = Some(budget - count);
        self.count_values(pos, usize::try_from(count).unwrap_or(usize::MAX))?;
        Ok((0..i128::from(count))
            .map(|i| Value {
                pos,
                kind: PyValue::Int(i64::try_from(start + i * step).unwrap_or_default()),
            })
            .collect())
    }

    /// A list, tuple, parenthesized value or dict after its opening bracket at `pos`.
    fn container(&mut self, open: char, depth: usize, pos: Pos) -> Parsed<PyValue> {
        let close = match open {
            '[' => ']',
            '(' => ')',
            _ => '}',
        };
        let mut items = Vec::new();
        let mut entries: Vec<(Value, Value)> = Vec::new();
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
                        self.expected("`:` after a dict key", &colon, colon_pos)
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
                    let what = format!("`,` or `{close}` (for the `{open}` at {})", self.at(pos));
                    return Err(self.expected(&what, &other, at));
                }
            }
        }
        Ok(match (open, items.pop()) {
            ('[', last) => {
                items.extend(last);
                PyValue::List(items)
            }
            ('{', _) => PyValue::Dict(entries),
            // `(x)` is x itself; `(x,)` and `()` are tuples.
            (_, Some(only)) if items.is_empty() && !trailing_comma => only.kind,
            (_, last) => {
                items.extend(last);
                PyValue::Tuple(items)
            }
        })
    }

    /// The error for a bracket `open` at `pos` that the text ends (at `end`) without closing.
    fn never_closed(&self, open: char, pos: Pos, end: Pos) -> LiteralError {
        self.invalid(
            pos,
            format!(
                "`{open}` is never closed (the file ends at {})",
                self.at(end)
            ),
        )
    }

    fn peek(&mut self) -> Parsed<(Token, Pos)> {
        if let Some(peeked) = &self.peeked {
            return Ok(peeked.clone());
        }
        let token = self.lex()?;
        self.peeked = Some(token.clone());
        Ok(token)
    }

    fn next(&mut self) -> Parsed<(Token, Pos)> {
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

    /// Skips blanks, comments and continuations; returns the `End` of a line (a newline
    /// outside brackets) or `Eof` if it meets one, `None` before any other token.
    fn skip_blanks(&mut self) -> Option<(Token, Pos)> {
        loop {
            let here = self.here();
            let Some(&b) = self.bytes.get(self.offset) else {
                return Some((Token::Eof, here));
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
                        return Some((Token::End, here));
                    }
                }
                _ => return None,
            }
        }
    }

    /// The next token and where it starts.
    fn lex(&mut self) -> Parsed<(Token, Pos)> {
        if let Some(end) = self.skip_blanks() {
            return Ok(end);
        }
        let pos = self.here();
        let start = self.offset;
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
            b'\'' | b'"' => self.string(pos, false)?,
            _ if b == b'_' || b.is_ascii_alphabetic() => {
                while self
                    .bytes
                    .get(self.offset)
                    .is_some_and(|&c| c == b'_' || c.is_ascii_alphanumeric())
                {
                    self.offset += 1;
                }
                let word = &self.text[start..self.offset];
                if matches!(self.bytes.get(self.offset), Some(b'\'' | b'"')) {
                    // `r'..'` is raw, `u'..'` a plain string; bytes and f-strings are not
                    // literals of the subset.
                    return match word {
                        "r" | "R" => Ok((self.string(pos, true)?, pos)),
                        "u" | "U" => Ok((self.string(pos, false)?, pos)),
                        _ => Err(self.unsupported(pos, format!("a `{word}`-prefixed string"))),
                    };
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
    fn number(&mut self, pos: Pos) -> Parsed<Token> {
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
            let digits = &raw[2..];
            let bad = || self.invalid(pos, format!("bad integer `{raw}`"));
            if digits.ends_with('_') || digits.contains("__") {
                return Err(bad());
            }
            let clean = digits.replace('_', "");
            // `from_str_radix` takes a sign; Python's digits do not.
            if clean.starts_with(['+', '-']) {
                return Err(bad());
            }
            return match u64::from_str_radix(&clean, radix) {
                Ok(v) => i64::try_from(v).map(Token::Int).map_err(|_| {
                    self.invalid(pos, format!("integer `{raw}` is out of the 64-bit range"))
                }),
                Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                    Err(self.invalid(pos, format!("integer `{raw}` is out of the 64-bit range")))
                }
                Err(_) => Err(bad()),
            };
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
        if raw.ends_with('_')
            || raw.contains("__")
            || raw.contains("_.")
            || raw.contains("._")
            || raw.contains("_e")
            || raw.contains("e_")
            || raw.contains("_E")
            || raw.contains("E_")
        {
            return Err(bad());
        }
        let clean = raw.replace('_', "");
        if is_float {
            // Rust also reads `inf`/`nan`, which cannot reach here: the text is digits, `.`,
            // `e` and signs.
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

    /// A single- or double-quoted string at the quote under the tokenizer (`pos`: where the
    /// literal starts, its prefix included), raw or with Python's escapes.
    fn string(&mut self, pos: Pos, raw: bool) -> Parsed<Token> {
        let quote = self.bytes[self.offset];
        if self.bytes[self.offset..].starts_with(&[quote; 3]) {
            return Err(self.unsupported(pos, "a triple-quoted string"));
        }
        self.offset += 1;
        let mut out = String::new();
        loop {
            let Some(ch) = self.text[self.offset..].chars().next() else {
                return Err(self.invalid(pos, "the string is never closed"));
            };
            let backslash = self.here();
            self.offset += ch.len_utf8();
            match ch {
                '\n' | '\r' => {
                    return Err(
                        self.invalid(pos, "the string is never closed (it ends with its line)")
                    );
                }
                c if c == char::from(quote) => return Ok(Token::Str(out)),
                '\\' => {
                    let Some(escaped) = self.text[self.offset..].chars().next() else {
                        return Err(self.invalid(pos, "the string is never closed"));
                    };
                    self.offset += escaped.len_utf8();
                    if escaped == '\r' && self.bytes.get(self.offset) == Some(&b'\n') {
                        self.offset += 1;
                    }
                    if matches!(escaped, '\n' | '\r') {
                        // A continuation: the line ends inside the string.
                        self.line += 1;
                        if raw {
                            out.push('\\');
                            out.push('\n');
                        }
                    } else if raw {
                        // A raw string keeps the backslash; it only stops a quote ending it.
                        out.push('\\');
                        out.push(escaped);
                    } else {
                        self.escape(escaped, backslash, &mut out)?;
                    }
                }
                c => out.push(c),
            }
        }
    }

    /// Appends what the escape `\` + `escaped` (the backslash at `pos`) stands for.
    fn escape(&mut self, escaped: char, pos: Pos, out: &mut String) -> Parsed<()> {
        let simple = match escaped {
            '\\' | '\'' | '"' => Some(escaped),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            return Ok(());
        }
        let code = match escaped {
            '0'..='7' => {
                // One to three octal digits, the first already read.
                let mut code = u32::from(escaped) - u32::from('0');
                for _ in 0..2 {
                    match self.bytes.get(self.offset) {
                        Some(&d @ b'0'..=b'7') => {
                            code = code * 8 + u32::from(d - b'0');
                            self.offset += 1;
                        }
                        _ => break,
                    }
                }
                code
            }
            'x' | 'u' | 'U' => {
                let digits = match escaped {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex = self
                    .bytes
                    .get(self.offset..self.offset + digits)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .ok_or_else(|| {
                        self.invalid(
                            pos,
                            format!("the `\\{escaped}` escape needs {digits} hex digits"),
                        )
                    })?;
                // ASCII hex digits: valid UTF-8 and a valid number.
                let code = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .unwrap_or(u32::MAX);
                self.offset += digits;
                code
            }
            'N' => return Err(self.unsupported(pos, "the string escape `\\N{...}`")),
            other => {
                // Python keeps unknown escapes (`\d`) as written.
                out.push('\\');
                out.push(other);
                return Ok(());
            }
        };
        match char::from_u32(code) {
            Some(c) => out.push(c),
            None if (0xD800..=0xDFFF).contains(&code) => {
                return Err(self.unsupported(
                    pos,
                    format!("the lone surrogate `\\{escaped}{code:x}` in a string"),
                ));
            }
            None => {
                return Err(self.invalid(
                    pos,
                    format!("the escape `\\{escaped}` gives {code:#x}, not a Unicode character"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_bytes: 1 << 16,
        max_depth: 4,
        max_values: 100,
        range_budget: Some(10),
    };

    /// The value of the single statement `x = {literal}`.
    fn value(literal: &str) -> Result<PyValue, LiteralError> {
        let mut statements = parse(&format!("x = {literal}\n"), &LIMITS)?;
        assert_eq!(statements.len(), 1, "{literal}");
        Ok(statements.remove(0).value.kind)
    }

    fn error(text: &str) -> LiteralError {
        match parse(text, &LIMITS) {
            Ok(parsed) => panic!("{text:?} parsed: {parsed:?}"),
            Err(e) => e,
        }
    }

    /// Whether `literal` is a tuple (else a list), and its integers.
    fn sequence(literal: &str) -> (bool, Vec<i64>) {
        let ints = |items: &[Value]| items.iter().filter_map(|v| v.kind.as_int()).collect();
        match value(literal) {
            Ok(PyValue::List(items)) => (false, ints(&items)),
            Ok(PyValue::Tuple(items)) => (true, ints(&items)),
            other => panic!("{literal}: {other:?}"),
        }
    }

    #[test]
    fn numbers() {
        for (literal, expected) in [
            ("1e3", PyValue::Float(1000.0)),
            ("-2", PyValue::Int(-2)),
            ("+2", PyValue::Int(2)),
            ("30000.", PyValue::Float(30000.0)),
            (".5", PyValue::Float(0.5)),
            ("-2.5E-1", PyValue::Float(-0.25)),
            ("30_000", PyValue::Int(30_000)),
            ("0x10", PyValue::Int(16)),
            ("0o17", PyValue::Int(15)),
            ("0b101", PyValue::Int(5)),
            ("0X_ff", PyValue::Int(255)),
            ("000", PyValue::Int(0)),
            ("-9223372036854775807", PyValue::Int(-i64::MAX)),
        ] {
            assert_eq!(value(literal), Ok(expected), "{literal}");
        }
        for (literal, needle) in [
            ("007", "leading zeros"),
            ("1__0", "bad number"),
            ("1_", "bad number"),
            ("1_.5", "bad number"),
            ("1e", "bad number"),
            ("0x", "bad integer"),
            ("0xg", "bad integer"),
            ("0x-1", "bad integer"),
            ("99999999999999999999", "64-bit range"),
            ("0xffffffffffffffff", "64-bit range"),
        ] {
            let e = value(literal).expect_err(literal);
            assert_eq!(e.problem, Problem::Invalid, "{literal}");
            assert!(e.message.contains(needle), "{literal}: {e}");
            assert_eq!(e.location, Some((1, 5)), "{literal}: {e}");
        }
        let e = value("3j").expect_err("complex");
        assert_eq!(e.problem, Problem::Unsupported);
        assert!(e.message.contains("number suffix in `3j`"), "{e}");
    }

    #[test]
    fn strings_escapes_and_raw_strings() {
        for (literal, expected) in [
            (r#"'a\'b'"#, "a'b"),
            (r#""a\"b""#, "a\"b"),
            (r"'\\ \n\t\r\a\b\f\v\0'", "\\ \n\t\r\x07\x08\x0c\x0b\0"),
            (r"'\x41\u00e9\U0001F600\101\7'", "A\u{e9}\u{1F600}A\x07"),
            (r"'\d\q'", "\\d\\q"),
            (r"r'C:\data\run.bin'", r"C:\data\run.bin"),
            (r"R'\n'", r"\n"),
            (r"r'a\'b'", r"a\'b"),
            (r"u'é'", "é"),
            ("'a' \"b\"  r'\\c'", "ab\\c"),
            ("'line\\\ncontinued'", "linecontinued"),
            ("''", ""),
        ] {
            assert_eq!(
                value(literal),
                Ok(PyValue::Str(expected.into())),
                "{literal}"
            );
        }
        for (literal, problem, needle) in [
            ("'open", Problem::Invalid, "never closed"),
            ("'open\\", Problem::Invalid, "never closed"),
            ("r'ends in a backslash\\'", Problem::Invalid, "never closed"),
            (r"'\x4'", Problem::Invalid, "needs 2 hex digits"),
            (r"'\U00110000'", Problem::Invalid, "not a Unicode character"),
            (r"'\ud800'", Problem::Unsupported, "lone surrogate"),
            (r"'\N{DASH}'", Problem::Unsupported, "`\\N{...}`"),
            ("'''doc'''", Problem::Unsupported, "triple-quoted"),
            ("b'x'", Problem::Unsupported, "`b`-prefixed"),
            ("f'{y}'", Problem::Unsupported, "`f`-prefixed"),
        ] {
            let e = value(literal).expect_err(literal);
            assert_eq!(e.problem, problem, "{literal}: {e}");
            assert!(e.message.contains(needle), "{literal}: {e}");
            assert_eq!(e.line(), Some(1), "{literal}");
        }
        // A string unterminated at the end of the file (no newline) names its start.
        let e = error("a = 1\nb = 'é\\'");
        assert_eq!(e.location, Some((2, 5)), "{e}");
        // An escape error points at the backslash, columns counted in characters.
        let e = error("x = 'éé\\x'");
        assert_eq!(e.location, Some((1, 8)), "{e}");
    }

    #[test]
    fn containers_and_trailing_commas() {
        assert_eq!(sequence("[1, 2, 3,]"), (false, vec![1, 2, 3]));
        assert_eq!(sequence("(1,)"), (true, vec![1]));
        assert_eq!(value("(1)"), Ok(PyValue::Int(1)));
        assert_eq!(value("()"), Ok(PyValue::Tuple(Vec::new())));
        assert_eq!(value("[]"), Ok(PyValue::List(Vec::new())));
        // Keys compare as Python's: 1, 1.0 and True are one key, the last value kept in the
        // first key's place.
        let PyValue::Dict(entries) = value("{1: 'a', 'k': 2, 1.0: 'b', True: 'c',}").unwrap()
        else {
            panic!("not a dict");
        };
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].0.kind, PyValue::Int(1));
        assert_eq!(entries[0].1.kind, PyValue::Str("c".into()));
        // Statements span lines inside brackets, after `\`, and split on `;`.
        let statements = parse("a = [1,\n 2]  # c\nb = \\\n 3; c = None\n", &LIMITS).unwrap();
        let names: Vec<_> = statements.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(statements[2].pos.line, 4);
        for (literal, needle) in [
            (
                "[1, 2",
                "`[` is never closed (the file ends at line 1, column 10)",
            ),
            ("{'a': (1, 2)", "`{` is never closed"),
            (
                "[1 2]",
                "expected `,` or `]` (for the `[` at line 1, column 5)",
            ),
            ("[1, 2)", "expected `,` or `]`"),
            ("{[1]: 2}", "a list cannot be a dict key"),
            ("{1: 2, 3}", "expected `:`"),
            ("[,]", "expected a value, found `,`"),
        ] {
            let e = error(&format!("x = {literal}"));
            assert_eq!(e.problem, Problem::Invalid, "{literal}: {e}");
            assert!(e.to_string().contains(needle), "{literal}: {e}");
        }
        assert_eq!(error("x = {1, 2}").problem, Problem::Unsupported);
    }

    #[test]
    fn limits() {
        let nested = |depth: usize| format!("x = {}{}\n", "[".repeat(depth), "]".repeat(depth));
        assert!(parse(&nested(LIMITS.max_depth), &LIMITS).is_ok());
        let e = error(&nested(LIMITS.max_depth + 1));
        assert!(e.message.contains("nest deeper than 4"), "{e}");
        // Far past the limit, the stack is never at risk.
        let e = error(&nested(20_000));
        assert_eq!(e.location, Some((1, 9)), "{e}");
        let e = error("x = [[[[range(1)]]]]");
        assert!(e.message.contains("nest deeper"), "{e}");

        let many = format!("x = [{}]", "0, ".repeat(LIMITS.max_values));
        assert!(error(&many).message.contains("more than 100 values"));
        let long = " ".repeat(LIMITS.max_bytes + 1);
        let e = parse(&long, &LIMITS).unwrap_err();
        assert_eq!(e.location, None);
        assert!(e.message.contains("more than"), "{e}");
        assert!(decode(long.as_bytes(), &LIMITS).is_err());
        let e = decode(b"x = 1\ny = '\xe9\xff'", &LIMITS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 6: the file is not valid UTF-8"
        );
    }

    #[test]
    fn range_calls() {
        assert_eq!(sequence("range(2, 9, 3)"), (false, vec![2, 5, 8]));
        assert_eq!(sequence("tuple(range(3, 0, -1))"), (true, vec![3, 2, 1]));
        // The budget is shared by all calls of the text.
        assert!(parse("a = range(5); b = list(range(5))", &LIMITS).is_ok());
        let e = error("a = range(5); b = list(range(6))");
        assert!(
            e.message
                .contains("range() calls produce more than 10 integers in all (this one 6)"),
            "{e}"
        );
        assert!(error("x = range(1, 2, 0)").message.contains("step is zero"));
        assert!(error("x = range(1.5)").message.contains("takes integers"));
        // Without a budget, calls are Python code.
        let no_calls = Limits {
            range_budget: None,
            ..LIMITS
        };
        let e = parse("x = range(3)", &no_calls).unwrap_err();
        assert_eq!(e.problem, Problem::Unsupported);
        assert!(e.message.contains("the call `range(...)`"), "{e}");
    }

    #[test]
    fn statements_beyond_the_subset() {
        for (text, location, needle) in [
            ("import numpy", (1, 1), "Python `import` statement"),
            ("x = np.int64(0)", (1, 5), "the call `np.int64(...)`"),
            ("x = pitch", (1, 5), "the name `pitch`"),
            ("x = 2 * 3", (1, 7), "the character '*'"),
            ("x = -y", (1, 6), "`-` applied to `y`"),
            ("x += 1", (1, 3), "`x` followed by `+`"),
        ] {
            let e = error(text);
            assert_eq!(e.problem, Problem::Unsupported, "{text}: {e}");
            assert_eq!(e.location, Some(location), "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
        for (text, needle) in [
            ("2x = 1", "starting with a Python name"),
            ("'a' = 1", "expected `name = literal`, found the string"),
            ("x = 1 2", "expected the end of the statement"),
            ("x =", "expected a value, found the end of the file"),
            ("x = -'a'", "expected a number after `-`"),
            ("None = 1", "cannot assign to `None`"),
        ] {
            let e = error(text);
            assert_eq!(e.problem, Problem::Invalid, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
        assert_eq!(parse("\n# only a comment\n\n", &LIMITS), Ok(Vec::new()));
    }
}
