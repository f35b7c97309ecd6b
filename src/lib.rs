//! What dspk's runnable examples share that is not the front-end (the front-end is the `dspk`
//! command's library, `dspk_cli`): the synthetic recording with known spikes held in memory,
//! refused before anything is allocated when it would not fit ([`synthetic`], [`MemoryLimit`],
//! [`sample_count`]), and a sorting scored against that truth with the bounds a run must
//! reach ([`truth`]). Nothing here prints; the examples do.

#![forbid(unsafe_code)]

pub mod synthetic;
pub mod truth;

/// Why an example refuses what it was asked to do, or fails the bounds it was given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A size computed from the arguments does not fit in 64 bits.
    #[error("{what} does not fit in 64 bits")]
    Overflow {
        /// The size and the arguments it came from, e.g. `"the sample count of --seconds 10"`.
        what: String,
    },
    /// Holding what was asked for needs more memory than the machine has available.
    #[error(
        "{what} needs {} of memory, more than the {} {}; ask for less",
        dspk::format_bytes(*needed),
        dspk::format_bytes(limit.bytes),
        limit.from
    )]
    Memory {
        /// What would be held, with the arguments that size it.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// The limit, bytes.
        limit: MemoryLimit,
    },
    /// A sorting scored below the bounds the run was given.
    #[error("below the bounds asked for: {}", .missed.join("; "))]
    BelowBounds {
        /// Each bound missed, with the figure that missed it.
        missed: Vec<String>,
    },
}

/// How much memory an example may plan to hold, and where that figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Bytes.
    pub bytes: u64,
    /// Where the figure came from, worded to follow the amount (`"available (MemAvailable
    /// in /proc/meminfo)"`).
    pub from: &'static str,
}

/// The limit where the available memory cannot be read (no `/proc/meminfo`, e.g. macOS,
/// Windows): 16 GB.
pub const FALLBACK_MEMORY_LIMIT: u64 = 16_000_000_000;

impl MemoryLimit {
    /// This machine's limit: `MemAvailable` of `/proc/meminfo` on Linux (what the kernel
    /// estimates can be allocated without swapping), else [`FALLBACK_MEMORY_LIMIT`].
    #[must_use]
    pub fn of_this_machine() -> Self {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_available(&text))
            .map_or(
                Self {
                    bytes: FALLBACK_MEMORY_LIMIT,
                    from: "that examples plan for where the available memory is unknown",
                },
                |bytes| Self {
                    bytes,
                    from: "available (MemAvailable in /proc/meminfo)",
                },
            )
    }

    /// Refuses to hold `needed` bytes for `what` when they are more than this limit.
    ///
    /// # Errors
    ///
    /// [`Error::Memory`] naming `what`, the bytes needed and the limit.
    pub fn check(self, what: &str, needed: u64) -> Result<(), Error> {
        if needed > self.bytes {
            Err(Error::Memory {
                what: what.to_string(),
                needed,
                limit: self,
            })
        } else {
            Ok(())
        }
    }
}

/// The `MemAvailable` line of a `/proc/meminfo` text, in bytes (the file counts in kB of
/// 1024 bytes), or `None` when the line is missing or unreadable.
#[must_use]
pub fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let kilobytes: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kilobytes.checked_mul(1024)
}

/// The product of `factors`, or [`Error::Overflow`] naming `what` when it does not fit in a
/// `u64` (sizes computed from command-line arguments: samples, bytes).
///
/// # Errors
///
/// [`Error::Overflow`].
pub fn checked_product(what: &str, factors: &[u64]) -> Result<u64, Error> {
    factors
        .iter()
        .try_fold(1u64, |product, &factor| product.checked_mul(factor))
        .ok_or_else(|| Error::Overflow {
            what: what.to_string(),
        })
}

/// The samples of `--seconds seconds` at `rate_hz`, or [`Error::Overflow`] naming both when
/// they do not fit in a `u64`.
///
/// # Errors
///
/// [`Error::Overflow`].
pub fn sample_count(seconds: u64, rate_hz: u64) -> Result<u64, Error> {
    let what = format!("the sample count of --seconds {seconds} at {rate_hz} Hz");
    checked_product(&what, &[seconds, rate_hz])
}

/// The sum of the products of `terms` (sizes computed from command-line arguments: the bytes
/// of several things held at once), or [`Error::Overflow`] naming `what` when a product or
/// the sum does not fit in a `u64`.
///
/// # Errors
///
/// [`Error::Overflow`].
pub fn checked_sum_of_products(what: &str, terms: &[&[u64]]) -> Result<u64, Error> {
    terms.iter().try_fold(0u64, |sum, factors| {
        sum.checked_add(checked_product(what, factors)?)
            .ok_or_else(|| Error::Overflow {
                what: what.to_string(),
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Guards `detect --seconds 18446744073709551615`, whose sample count wrapped around and
    // was quoted as a duration.
    #[test]
    fn sizes_from_arguments_are_computed_checked() {
        assert_eq!(sample_count(10, 30_000), Ok(300_000));
        let error = sample_count(u64::MAX, 30_000).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the sample count of --seconds 18446744073709551615 at 30000 Hz does not fit in 64 bits"
        );
        assert_eq!(
            checked_product("bytes", &[8192, 30_000_000, 2]),
            Ok(491_520_000_000)
        );
        assert_eq!(checked_product("nothing", &[]), Ok(1));
        assert_eq!(
            checked_sum_of_products("both", &[&[32, 90_000, 2], &[24, 3, 8, 48]]),
            Ok(5_760_000 + 27_648)
        );
        for terms in [&[&[u64::MAX, 2][..]][..], &[&[u64::MAX], &[1]]] {
            let error = checked_sum_of_products("the recording", terms).unwrap_err();
            assert_eq!(error.to_string(), "the recording does not fit in 64 bits");
        }
    }

    // Guards `detect --channels 8192 --seconds 1000`, which aborted the process on a 491 GB
    // allocation: the size is compared with the limit first, and the message is readable.
    #[test]
    fn more_than_the_memory_limit_is_refused() {
        let limit = MemoryLimit {
            bytes: 16_000_000_000,
            from: "available (MemAvailable in /proc/meminfo)",
        };
        let error = limit
            .check("8192 channels x 1000 s of int16", 491_520_000_000)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "8192 channels x 1000 s of int16 needs 491.52 GB of memory, more than the 16.00 GB \
             available (MemAvailable in /proc/meminfo); ask for less"
        );
        assert_eq!(limit.check("a little", 16_000_000_000), Ok(()));
    }

    #[test]
    fn mem_available_is_read_from_meminfo() {
        let meminfo = "MemTotal:       16318456 kB\nMemFree:         1050116 kB\n\
                       MemAvailable:   12345678 kB\nBuffers:          123456 kB\n";
        assert_eq!(mem_available(meminfo), Some(12_345_678 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots\n"), None);
        // This machine's own figure is read, when there is one.
        if std::path::Path::new("/proc/meminfo").exists() {
            assert_eq!(
                MemoryLimit::of_this_machine().from,
                "available (MemAvailable in /proc/meminfo)"
            );
        }
    }
}
