//! How a pyramid cuts a recording into levels of buckets and into pages.

use std::ops::Range;

use dspk_core::RecordingInfo;

use crate::{Error, MAX_COLUMNS, Result};

/// The most values (`channels x page samples`) one page may hold: what each building thread
/// reads at once, 1 GiB of `f32`.
pub const MAX_PAGE_VALUES: u64 = 1 << 28;

/// The most bytes a pyramid may hold in memory whatever its pages: the coarse levels and 48
/// bytes of state per page. 1 GiB: the coarse levels of 24 hours of 1024 channels at 30 kHz
/// in the default layout take about 430 MiB.
pub const MAX_RESIDENT_BYTES: u64 = 1 << 30;

/// Bytes a pyramid keeps per page besides its values (its state and slot).
const PAGE_OVERHEAD: u64 = 48;

/// Levels with fewer buckets than this in a page are kept in memory (see [`COARSE_BUDGET`]).
const MIN_PAGE_BUCKETS: u64 = 8;

/// The memory levels may take this many bytes when they include the levels with fewer than
/// [`MIN_PAGE_BUCKETS`] per page (256 MiB: 384 channels for about 9 hours at 30 kHz in the
/// default layout); past it those levels stay in the pages.
const COARSE_BUDGET: u64 = 256 << 20;

/// The shape of a pyramid: the recording's channels and samples, and how they are cut into
/// levels of buckets and into pages.
///
/// Level `l` holds, for each channel, the minimum and maximum of each bucket of
/// `base_bucket * factor^l` samples (the buckets `[j * bucket, (j + 1) * bucket)` of a grid
/// anchored at sample 0, the last one clipped at the recording's end). Levels go up to the first
/// whose bucket covers the whole recording.
///
/// The recording is cut into pages of `page_samples` samples (the last one shorter). A page
/// holds the levels whose bucket divides the page with at least 8 buckets in it (the *in-page*
/// levels; also those with fewer when keeping them in memory would take over 256 MiB), so
/// pages can be built independently, in any order; the coarser levels are folded from the
/// coarsest in-page level and kept in memory, where an overview reads them as contiguous rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyramidLayout {
    channels: usize,
    samples: u64,
    base: u64,
    factor: u64,
    page: u64,
    levels: usize,
    page_levels: usize,
}

impl PyramidLayout {
    /// The default finest bucket: 64 samples (about 2 ms at 30 kHz).
    pub const DEFAULT_BASE_BUCKET: u64 = 64;
    /// The default factor between levels' buckets.
    pub const DEFAULT_FACTOR: u64 = 4;
    /// The default page: 32 768 samples (about a second at 30 kHz).
    pub const DEFAULT_PAGE_SAMPLES: u64 = 1 << 15;

    /// The default layout ([`DEFAULT_BASE_BUCKET`](Self::DEFAULT_BASE_BUCKET),
    /// [`DEFAULT_FACTOR`](Self::DEFAULT_FACTOR), [`DEFAULT_PAGE_SAMPLES`](Self::DEFAULT_PAGE_SAMPLES))
    /// for `channels` channels of `samples` samples.
    ///
    /// # Errors
    ///
    /// As [`with_buckets`](Self::with_buckets).
    pub fn new(channels: usize, samples: u64) -> Result<Self> {
        Self::with_buckets(
            channels,
            samples,
            Self::DEFAULT_BASE_BUCKET,
            Self::DEFAULT_FACTOR,
            Self::DEFAULT_PAGE_SAMPLES,
        )
    }

    /// The default layout for a recording's channels and samples.
    ///
    /// # Errors
    ///
    /// As [`with_buckets`](Self::with_buckets).
    pub fn for_recording(info: &RecordingInfo) -> Result<Self> {
        Self::new(info.num_channels(), info.num_samples)
    }

    /// A layout with finest bucket `base_bucket`, each level's bucket `factor` times the one
    /// below, and pages of `page_samples` samples.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for zero channels or samples, a zero base bucket, a factor
    /// below 2, or a page that is not a whole number of base buckets; [`Error::OverLimit`]
    /// for a page of more than [`MAX_COLUMNS`] base buckets or more than [`MAX_PAGE_VALUES`]
    /// values, or coarse levels and page bookkeeping over [`MAX_RESIDENT_BYTES`].
    pub fn with_buckets(
        channels: usize,
        samples: u64,
        base_bucket: u64,
        factor: u64,
        page_samples: u64,
    ) -> Result<Self> {
        if channels == 0 {
            return Err(Error::invalid("pyramid: channels", "zero channels"));
        }
        if samples == 0 {
            return Err(Error::invalid("pyramid: samples", "an empty recording"));
        }
        if base_bucket == 0 {
            return Err(Error::invalid(
                "pyramid: base bucket",
                "a bucket of 0 samples",
            ));
        }
        if factor < 2 {
            return Err(Error::invalid(
                "pyramid: factor",
                format!("a factor of {factor} between levels (at least 2)"),
            ));
        }
        if page_samples == 0 || !page_samples.is_multiple_of(base_bucket) {
            return Err(Error::invalid(
                "pyramid: page",
                format!(
                    "a page of {page_samples} samples is not a whole number of {base_bucket}-sample buckets"
                ),
            ));
        }
        let buckets = page_samples / base_bucket;
        if buckets > MAX_COLUMNS as u64 {
            return Err(Error::OverLimit {
                what: "pyramid: base buckets per page",
                requested: buckets,
                limit: MAX_COLUMNS as u64,
            });
        }
        let values = (channels as u64).saturating_mul(page_samples);
        if values > MAX_PAGE_VALUES {
            return Err(Error::OverLimit {
                what: "pyramid: values per page (channels x page samples)",
                requested: values,
                limit: MAX_PAGE_VALUES,
            });
        }
        let bucket = |level: usize| bucket_of(base_bucket, factor, level);
        let mut levels = 1;
        while bucket(levels - 1) < samples {
            levels += 1;
        }
        // Levels whose bucket divides the page can be stored in it; of those, the ones with
        // fewer than MIN_PAGE_BUCKETS buckets per page are kept in memory instead when the
        // memory levels stay within COARSE_BUDGET (an overview then reads contiguous rows,
        // not a few values from every page).
        let dividing = (0..levels)
            .take_while(|&l| page_samples.is_multiple_of(bucket(l)))
            .count();
        let compact = (0..dividing)
            .take_while(|&l| page_samples / bucket(l) >= MIN_PAGE_BUCKETS)
            .count()
            .max(1);
        let memory_bytes = |first: usize| {
            (first..levels)
                .map(|l| (8 * channels as u64).saturating_mul(samples.div_ceil(bucket(l))))
                .fold(0, u64::saturating_add)
        };
        let page_levels = if memory_bytes(compact) <= COARSE_BUDGET {
            compact
        } else {
            dividing
        };
        let layout = Self {
            channels,
            samples,
            base: base_bucket,
            factor,
            page: page_samples,
            levels,
            page_levels,
        };
        let resident = layout
            .coarse_bytes()
            .saturating_add(layout.pages().saturating_mul(PAGE_OVERHEAD));
        if resident > MAX_RESIDENT_BYTES {
            return Err(Error::OverLimit {
                what: "pyramid: bytes held in memory (coarse levels and pages' state)",
                requested: resident,
                limit: MAX_RESIDENT_BYTES,
            });
        }
        Ok(layout)
    }

    /// Channels.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Samples per channel.
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The finest level's bucket, in samples.
    #[must_use]
    pub fn base_bucket(&self) -> u64 {
        self.base
    }

    /// The factor between consecutive levels' buckets.
    #[must_use]
    pub fn factor(&self) -> u64 {
        self.factor
    }

    /// Samples per page (the last page may be shorter).
    #[must_use]
    pub fn page_samples(&self) -> u64 {
        self.page
    }

    /// Number of levels: up to the first whose bucket covers the whole recording.
    #[must_use]
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Number of in-page levels (levels `0..page_levels()` are stored in the pages, the others
    /// folded from them in memory).
    #[must_use]
    pub fn page_levels(&self) -> usize {
        self.page_levels
    }

    /// The bucket of `level`, in samples: `base_bucket * factor^level` (saturating at
    /// `u64::MAX`; levels past the coarsest give what they would have).
    #[must_use]
    pub fn bucket(&self, level: usize) -> u64 {
        bucket_of(self.base, self.factor, level)
    }

    /// Number of pages.
    #[must_use]
    pub fn pages(&self) -> u64 {
        self.samples.div_ceil(self.page)
    }

    /// The samples of page `page` (clipped at the recording's end; empty past it).
    #[must_use]
    pub fn page_range(&self, page: u64) -> Range<u64> {
        let start = page.saturating_mul(self.page).min(self.samples);
        start..start.saturating_add(self.page).min(self.samples)
    }

    /// Buckets of `level` in the whole recording.
    #[must_use]
    pub fn buckets(&self, level: usize) -> u64 {
        self.samples.div_ceil(self.bucket(level))
    }

    /// Bytes of one page's values: the minima and maxima (`f32`) of every in-page level for
    /// every channel, and the NaN samples per channel (`u32`).
    #[must_use]
    pub fn page_bytes(&self) -> u64 {
        4 * (self.page_values() as u64 + self.channels as u64)
    }

    /// Bytes of the levels kept in memory beside the pages (minima and maxima of the levels
    /// coarser than the pages).
    #[must_use]
    pub fn coarse_bytes(&self) -> u64 {
        (self.page_levels..self.levels)
            .map(|l| (8 * self.channels as u64).saturating_mul(self.buckets(l)))
            .fold(0, u64::saturating_add)
    }

    /// Bytes of the whole pyramid's values: every page and the coarse levels.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.pages()
            .saturating_mul(self.page_bytes())
            .saturating_add(self.coarse_bytes())
    }

    /// Buckets of in-page level `level` in a full page.
    pub(crate) fn page_buckets(&self, level: usize) -> usize {
        // At most MAX_COLUMNS: the page holds at most that many base buckets.
        (self.page / self.bucket(level)) as usize
    }

    /// Where in-page level `level` starts among a page's values: its minima
    /// (`[channels, page_buckets]`), then its maxima.
    pub(crate) fn level_offset(&self, level: usize) -> usize {
        (0..level)
            .map(|l| 2 * self.channels * self.page_buckets(l))
            .sum()
    }

    /// Values (`f32`) of a page: minima and maxima of every in-page level.
    pub(crate) fn page_values(&self) -> usize {
        self.level_offset(self.page_levels)
    }

    /// The pages that hold samples of `samples` (a range inside the recording).
    pub(crate) fn pages_of(&self, samples: &Range<u64>) -> Range<u64> {
        if samples.start >= samples.end {
            return 0..0;
        }
        samples.start / self.page..(samples.end - 1) / self.page + 1
    }
}

fn bucket_of(base: u64, factor: u64, level: usize) -> u64 {
    let power = u32::try_from(level).map_or(u64::MAX, |l| factor.saturating_pow(l));
    base.saturating_mul(power)
}
