//! The one command-line reader of the `dspk` command, the workspace's examples and its
//! benchmarks: flags in the order given, each value read by the flag that takes it, and the
//! positional arguments counted at the end. Read by hand (no argument-parsing crate); every
//! message names the program and the flag, as a usage error prints it.
//!
//! ```
//! use dspk_cli::flags::Reader;
//!
//! let args = ["--seconds", "3", "rec.bin"].map(std::ffi::OsString::from);
//! let mut reader = Reader::new("detect", args);
//! let mut seconds = 10;
//! let run = reader.read_flags(|reader, flag| {
//!     match flag {
//!         "--seconds" => seconds = reader.whole(flag, 1..=3600)?,
//!         _ => return Err(reader.unknown(flag)),
//!     }
//!     Ok(())
//! })?;
//! let paths = reader.positional(&["REC"])?;
//! assert!(run);
//! assert_eq!((seconds, paths[0].to_str()), (3, Some("rec.bin")));
//! # Ok::<(), String>(())
//! ```

use std::ffi::OsString;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::str::FromStr;

/// The arguments of one program (or one `dspk` command), read one at a time.
#[derive(Debug)]
pub struct Reader {
    command: &'static str,
    args: std::vec::IntoIter<OsString>,
    positional: Vec<PathBuf>,
}

/// One argument read by a [`Reader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `-h` or `--help`.
    Help,
    /// A flag (`--probe`): the caller reads its value, if it takes one.
    Flag(String),
    /// Anything not starting with `-` (or a lone `-`): kept for
    /// [`positional`](Reader::positional).
    Positional,
}

impl Reader {
    /// The arguments `args` (the program name left out) of `command`, the name messages give.
    pub fn new(command: &'static str, args: impl IntoIterator<Item = OsString>) -> Self {
        Self {
            command,
            args: args.into_iter().collect::<Vec<_>>().into_iter(),
            positional: Vec::new(),
        }
    }

    /// The command's name, as messages give it.
    #[must_use]
    pub fn command(&self) -> &'static str {
        self.command
    }

    /// The next argument, `None` at the end.
    ///
    /// # Errors
    ///
    /// A flag that is not UTF-8.
    #[allow(clippy::should_implement_trait)] // fallible, so not an `Iterator`
    pub fn next(&mut self) -> Result<Option<Arg>, String> {
        let Some(arg) = self.args.next() else {
            return Ok(None);
        };
        let text = arg.to_string_lossy();
        if text == "-h" || text == "--help" {
            return Ok(Some(Arg::Help));
        }
        if text.starts_with('-') && text.len() > 1 {
            return match arg.to_str() {
                Some(flag) => Ok(Some(Arg::Flag(flag.to_string()))),
                None => Err(format!("{}: unknown flag {arg:?}", self.command)),
            };
        }
        self.positional.push(PathBuf::from(arg));
        Ok(Some(Arg::Positional))
    }

    /// Reads the arguments to the end, handing each flag to `flag` (with this reader, to read
    /// its value: `"--seconds" => seconds = reader.whole(name, 1..=3600)?`, and
    /// [`unknown`](Self::unknown) for the others) and keeping the positional ones; stops at
    /// `-h` or `--help`. Returns whether to run: `false` when help was asked for.
    ///
    /// # Errors
    ///
    /// The first error of `flag`, or a flag that is not UTF-8.
    pub fn read_flags(
        &mut self,
        mut flag: impl FnMut(&mut Self, &str) -> Result<(), String>,
    ) -> Result<bool, String> {
        while let Some(arg) = self.next()? {
            match arg {
                Arg::Help => return Ok(false),
                Arg::Flag(name) => flag(self, &name)?,
                Arg::Positional => {}
            }
        }
        Ok(true)
    }

    /// The value after `flag`, as it was given.
    fn value(&mut self, flag: &str) -> Result<OsString, String> {
        self.args
            .next()
            .ok_or_else(|| format!("{} {flag} needs a value", self.command))
    }

    /// The value after `flag`, as a path.
    ///
    /// # Errors
    ///
    /// No value follows.
    pub fn path(&mut self, flag: &str) -> Result<PathBuf, String> {
        self.value(flag).map(PathBuf::from)
    }

    /// The value after `flag`, as text.
    ///
    /// # Errors
    ///
    /// No value follows, or it is not UTF-8.
    pub fn text(&mut self, flag: &str) -> Result<String, String> {
        self.value(flag)?
            .into_string()
            .map_err(|v| format!("{} {flag}: the value {v:?} is not UTF-8", self.command))
    }

    /// The value after `flag` parsed as a `T`; `expected` says what it must be, for the
    /// message (`"IP:PORT (e.g. 127.0.0.1:4433)"`).
    ///
    /// # Errors
    ///
    /// No value follows, or it does not parse: `<command> <flag> needs <expected>`.
    pub fn parsed<T: FromStr>(&mut self, flag: &str, expected: &str) -> Result<T, String> {
        let command = self.command;
        let needs = || format!("{command} {flag} needs {expected}");
        let value = self.value(flag).map_err(|_| needs())?;
        value
            .to_str()
            .and_then(|v| v.parse().ok())
            .ok_or_else(needs)
    }

    /// The value after `flag` as a whole number in `range` (`--seconds 10`).
    ///
    /// # Errors
    ///
    /// No value follows, or it is not a whole number in `range`: `<command> <flag> needs a
    /// whole number from <least> to <most>`.
    pub fn whole(&mut self, flag: &str, range: RangeInclusive<u64>) -> Result<u64, String> {
        let expected = format!("a whole number from {} to {}", range.start(), range.end());
        let value: u64 = self.parsed(flag, &expected)?;
        if range.contains(&value) {
            Ok(value)
        } else {
            Err(format!("{} {flag} needs {expected}", self.command))
        }
    }

    /// The value after `flag` as a number from 0 to 1 (`--min-recall 0.9`).
    ///
    /// # Errors
    ///
    /// No value follows, or it is not a number from 0 to 1 (NaN is not).
    pub fn fraction(&mut self, flag: &str) -> Result<f64, String> {
        let expected = "a number from 0 to 1";
        let value: f64 = self.parsed(flag, expected)?;
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(format!("{} {flag} needs {expected}", self.command))
        }
    }

    /// The message for a flag the program does not take.
    #[must_use]
    pub fn unknown(&self, flag: &str) -> String {
        format!("{}: unknown flag `{flag}`", self.command)
    }

    /// Refuses a second value of one flag: puts `value` in `slot` unless it holds one.
    ///
    /// # Errors
    ///
    /// `slot` already holds a value: `<command>: <flag> given twice`.
    pub fn once<T>(&self, slot: &mut Option<T>, value: T, flag: &str) -> Result<(), String> {
        if slot.is_some() {
            return Err(format!("{}: {flag} given twice", self.command));
        }
        *slot = Some(value);
        Ok(())
    }

    /// The positional arguments, which must be exactly `names` (named in the message; none
    /// for a program that takes only flags).
    ///
    /// # Errors
    ///
    /// One missing, or one too many.
    pub fn positional(self, names: &[&str]) -> Result<Vec<PathBuf>, String> {
        let given = self.positional.len();
        if given < names.len() {
            return Err(format!(
                "{} needs {} (missing {})",
                self.command,
                names.join(" and "),
                names[given]
            ));
        }
        if given > names.len() {
            let takes = if names.is_empty() {
                "only flags".to_string()
            } else {
                names.join(" and ")
            };
            return Err(format!(
                "{}: unexpected argument `{}` (it takes {takes})",
                self.command,
                self.positional[names.len()].display(),
            ));
        }
        Ok(self.positional)
    }

    /// The one positional argument `name`, if given.
    ///
    /// # Errors
    ///
    /// More than one.
    pub fn optional(self, name: &str) -> Result<Option<PathBuf>, String> {
        if self.positional.len() > 1 {
            return Err(format!(
                "{}: unexpected argument `{}` (it takes at most one {name})",
                self.command,
                self.positional[1].display()
            ));
        }
        Ok(self.positional.into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(line: &str) -> Reader {
        Reader::new("detect", line.split_whitespace().map(OsString::from))
    }

    /// Reads `line` as `detect`'s flags: `--seconds` (1 to 100 000), `--min-recall`.
    fn detect(line: &str) -> Result<Option<(u64, f64)>, String> {
        let mut reader = reader(line);
        let (mut seconds, mut recall) = (10, 0.0);
        let run = reader.read_flags(|reader, flag| {
            match flag {
                "--seconds" => seconds = reader.whole(flag, 1..=100_000)?,
                "--min-recall" => recall = reader.fraction(flag)?,
                _ => return Err(reader.unknown(flag)),
            }
            Ok(())
        })?;
        if !run {
            return Ok(None);
        }
        reader.positional(&[])?;
        Ok(Some((seconds, recall)))
    }

    // Moved from the examples' `parse_flags`, `parse_flags_and_fractions` and
    // `whole_number`: whole numbers in their range, fractions from 0 to 1 (a bound no score
    // can meet, above 1 or NaN, refused rather than always failing), help whatever follows it.
    #[test]
    fn whole_numbers_and_fractions_in_range_or_a_message_naming_the_flag() {
        assert_eq!(detect("--seconds 3 --min-recall 0.9"), Ok(Some((3, 0.9))));
        assert_eq!(detect("--min-recall 0 --min-recall 1"), Ok(Some((10, 1.0))));
        assert_eq!(detect(""), Ok(Some((10, 0.0))));
        assert_eq!(detect("--seconds 4 --help --nonsense"), Ok(None));
        for (line, error) in [
            (
                "--seconds 0",
                "detect --seconds needs a whole number from 1 to 100000",
            ),
            (
                "--seconds -1",
                "detect --seconds needs a whole number from 1 to 100000",
            ),
            (
                "--seconds 1.5",
                "detect --seconds needs a whole number from 1 to 100000",
            ),
            (
                "--seconds 100001",
                "detect --seconds needs a whole number from 1 to 100000",
            ),
            (
                "--seconds",
                "detect --seconds needs a whole number from 1 to 100000",
            ),
            (
                "--min-recall 1.5",
                "detect --min-recall needs a number from 0 to 1",
            ),
            (
                "--min-recall -0.1",
                "detect --min-recall needs a number from 0 to 1",
            ),
            (
                "--min-recall NaN",
                "detect --min-recall needs a number from 0 to 1",
            ),
            (
                "--min-recall",
                "detect --min-recall needs a number from 0 to 1",
            ),
            ("--units 3", "detect: unknown flag `--units`"),
            (
                "data.bin",
                "detect: unexpected argument `data.bin` (it takes only flags)",
            ),
        ] {
            assert_eq!(detect(line), Err(error.to_string()), "{line}");
        }
    }

    #[test]
    fn values_paths_and_positional_arguments() {
        let mut r = reader("--addr 127.0.0.1:4433 --out o --addr x a");
        let mut addr = None;
        assert_eq!(r.next(), Ok(Some(Arg::Flag("--addr".into()))));
        let first: std::net::SocketAddr = r.parsed("--addr", "IP:PORT").unwrap();
        r.once(&mut addr, first, "--addr").unwrap();
        assert_eq!(r.next(), Ok(Some(Arg::Flag("--out".into()))));
        assert_eq!(r.path("--out"), Ok(PathBuf::from("o")));
        assert_eq!(r.next(), Ok(Some(Arg::Flag("--addr".into()))));
        assert_eq!(
            r.parsed::<std::net::SocketAddr>("--addr", "IP:PORT"),
            Err("detect --addr needs IP:PORT".to_string())
        );
        assert_eq!(
            r.once(&mut addr, first, "--addr"),
            Err("detect: --addr given twice".to_string())
        );
        assert_eq!(r.next(), Ok(Some(Arg::Positional)));
        assert_eq!(r.next(), Ok(None));
        assert_eq!(r.positional(&["PATH"]), Ok(vec![PathBuf::from("a")]));
        assert_eq!(
            reader("").positional(&["REC", "OUT"]),
            Err("detect needs REC and OUT (missing REC)".to_string())
        );
        let mut two = reader("a b");
        while two.next().unwrap().is_some() {}
        assert_eq!(
            two.optional("PATH"),
            Err("detect: unexpected argument `b` (it takes at most one PATH)".to_string())
        );
        let mut one = reader("- --set");
        assert_eq!(one.next(), Ok(Some(Arg::Positional)));
        assert_eq!(one.next(), Ok(Some(Arg::Flag("--set".into()))));
        assert_eq!(
            one.text("--set"),
            Err("detect --set needs a value".to_string())
        );
        assert_eq!(one.optional("PATH"), Ok(Some(PathBuf::from("-"))));
    }
}
