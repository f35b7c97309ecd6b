//! Host memory read from `/proc/self/status`, for the benches that print it (`benches/view.rs`,
//! `benches/long.rs`), tested in `tests/bench_arithmetic.rs`.

/// The resident set size in bytes from the text of `/proc/self/status` (its `VmRSS:` line, in
/// kB of 1024 bytes); `None` when the line is missing or malformed.
#[must_use]
pub(crate) fn resident_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next()? == "kB").then_some(kib * 1024)
}
