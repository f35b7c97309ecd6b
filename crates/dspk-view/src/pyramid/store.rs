//! The pyramid: its pages (in memory or in a cache file), the coarse levels folded from them,
//! and the queries a viewer makes.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use dspk_core::{RecordingInfo, RecordingSource};

use crate::pyramid::build::PageFolder;
use crate::pyramid::cache::{CacheFile, CacheState, RecordingSignature};
use crate::pyramid::layout::PyramidLayout;
use crate::pyramid::page::{PageData, checksum, merge};
use crate::{Columns, Envelope, Error, Result};

/// A page's state: not built, being built by one thread, built.
const EMPTY: u8 = 0;
const CLAIMED: u8 = 1;
const FILLED: u8 = 2;

/// The file name ending of pyramid cache files.
const CACHE_SUFFIX: &str = ".dspk-pyramid";

/// Min/max levels of a recording over fixed buckets, each level [`factor`](PyramidLayout::factor)
/// times coarser than the one below, for drawing any range at any zoom from little data.
///
/// Values are the recording's scaled samples (`f32`, what
/// [`RecordingSource::read`] gives), NaN skipped. The pyramid is built page by page, in any
/// order, by any number of threads (a [`PyramidBuild`](crate::PyramidBuild), or
/// [`fill_page`](Self::fill_page)), each page once; queries may run while it is built and say
/// whether what they cover was complete.
///
/// Its pages live in memory ([`in_memory`](Self::in_memory)) or in a cache file
/// ([`open_cache`](Self::open_cache)) that is reused while the recording is unchanged; a
/// half-built cache resumes where it stopped. Pages in a file stay there (queries read them
/// back), so building from a file keeps memory flat; only the levels coarser than a page
/// ([`PyramidLayout::coarse_bytes`]) are held in memory.
#[derive(Debug)]
pub struct Pyramid {
    layout: PyramidLayout,
    pages: Pages,
    state: Box<[AtomicU8]>,
    filled: AtomicU64,
    nan: Box<[AtomicU64]>,
    /// The levels coarser than a page, `[channels, buckets]` each; page states change to
    /// [`FILLED`] only under its write lock, with the coarse levels brought up to date.
    coarse: RwLock<Vec<Coarse>>,
}

#[derive(Debug)]
enum Pages {
    Memory(Box<[OnceLock<PageData>]>),
    File(CacheFile),
}

/// One coarse level's minima and maxima, `[channels, buckets]`.
#[derive(Debug)]
struct Coarse {
    min: Vec<f32>,
    max: Vec<f32>,
}

impl Pyramid {
    /// Pyramids of at most this many bytes ([`PyramidLayout::bytes`]) are kept in memory by
    /// [`open`](Self::open): 256 MiB, the pyramid of about 4 GiB of int16 recording.
    pub const IN_MEMORY_LIMIT: u64 = 256 << 20;

    /// An empty pyramid held in memory (pages are allocated as they are built).
    #[must_use]
    pub fn in_memory(layout: PyramidLayout) -> Self {
        let pages = (0..layout.pages()).map(|_| OnceLock::new()).collect();
        Self::with_pages(layout, Pages::Memory(pages))
    }

    /// The pyramid in the cache file at `path`, for the recording `signature` names: the file
    /// is reused when it was built for this recording (same size, modification time, shape
    /// and rate) and layout, its damaged pages unmarked to be built again; otherwise it is
    /// emptied (or made) and every page is to be built. The state says which.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] when `layout` is not of the signature's shape;
    /// [`Error::Cache`] when a file is there that is not a pyramid cache (it is not
    /// overwritten); [`Error::Io`] when the file cannot be made, read or written.
    pub fn open_cache(
        path: &Path,
        signature: &RecordingSignature,
        layout: PyramidLayout,
    ) -> Result<(Self, CacheState)> {
        let mut coarse = empty_coarse(&layout);
        let mut nan = vec![0u64; layout.channels()];
        let mut filled = Vec::new();
        let (file, state) = CacheFile::open(path, signature, &layout, |page, data| {
            for (total, &n) in nan.iter_mut().zip(&data.nan) {
                *total += u64::from(n);
            }
            fold_top_in_order(&layout, &mut coarse, page, data);
            filled.push(page);
        })?;
        for level in layout.page_levels() + 1..layout.levels() {
            for bucket in 0..layout.buckets(level) {
                refold_coarse(&layout, &mut coarse, level, bucket);
            }
        }
        let pyramid = Self::with_pages(layout, Pages::File(file));
        pyramid.filled.store(filled.len() as u64, Ordering::Relaxed);
        for page in filled {
            pyramid.state[page as usize].store(FILLED, Ordering::Relaxed);
        }
        for (total, n) in pyramid.nan.iter().zip(nan) {
            total.store(n, Ordering::Relaxed);
        }
        *pyramid
            .coarse
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = coarse;
        Ok((pyramid, state))
    }

    /// The pyramid of the recording file at `recording` (described by `info`) in `layout`:
    /// in memory when it is at most [`IN_MEMORY_LIMIT`](Self::IN_MEMORY_LIMIT) bytes, else in
    /// a cache file in `cache_folder` ([`cache_path_in`](Self::cache_path_in), the folder made
    /// if missing) or beside the recording ([`cache_path_beside`](Self::cache_path_beside)).
    ///
    /// # Errors
    ///
    /// As [`open_cache`](Self::open_cache) and [`RecordingSignature::of_file`];
    /// [`Error::Io`] when the folder cannot be made or the recording's path resolved.
    pub fn open(
        recording: &Path,
        info: &RecordingInfo,
        layout: PyramidLayout,
        cache_folder: Option<&Path>,
    ) -> Result<(Self, CacheState)> {
        if layout.bytes() <= Self::IN_MEMORY_LIMIT {
            return Ok((Self::in_memory(layout), CacheState::InMemory));
        }
        let path = match cache_folder {
            Some(folder) => {
                std::fs::create_dir_all(folder).map_err(|source| Error::Io {
                    path: folder.to_path_buf(),
                    source,
                })?;
                Self::cache_path_in(folder, recording)?
            }
            None => Self::cache_path_beside(recording),
        };
        let signature = RecordingSignature::of_file(recording, info)?;
        Self::open_cache(&path, &signature, layout)
    }

    /// The cache file beside a recording: its path with `.dspk-pyramid` appended
    /// (`rec.bin` -> `rec.bin.dspk-pyramid`).
    #[must_use]
    pub fn cache_path_beside(recording: &Path) -> PathBuf {
        // Collecting the components drops a trailing separator.
        let mut path = recording.components().collect::<PathBuf>().into_os_string();
        path.push(CACHE_SUFFIX);
        PathBuf::from(path)
    }

    /// The cache file of a recording in a cache folder: the recording's file name and a hash
    /// of its canonical path (`rec.bin-0123456789abcdef.dspk-pyramid`), so recordings of the
    /// same name in different folders do not share a cache.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the recording's canonical path cannot be found (it does not exist).
    pub fn cache_path_in(folder: &Path, recording: &Path) -> Result<PathBuf> {
        let canonical = recording.canonicalize().map_err(|source| Error::Io {
            path: recording.to_path_buf(),
            source,
        })?;
        let hash = checksum(0, canonical.as_os_str().as_encoded_bytes());
        let name = canonical
            .file_name()
            .map_or_else(|| "recording".into(), |n| n.to_string_lossy());
        Ok(folder.join(format!("{name}-{hash:016x}{CACHE_SUFFIX}")))
    }

    fn with_pages(layout: PyramidLayout, pages: Pages) -> Self {
        let state = (0..layout.pages()).map(|_| AtomicU8::new(EMPTY)).collect();
        let nan = (0..layout.channels()).map(|_| AtomicU64::new(0)).collect();
        let coarse = RwLock::new(empty_coarse(&layout));
        Self {
            layout,
            pages,
            state,
            filled: AtomicU64::new(0),
            nan,
            coarse,
        }
    }

    /// The layout.
    #[must_use]
    pub fn layout(&self) -> &PyramidLayout {
        &self.layout
    }

    /// Number of levels.
    #[must_use]
    pub fn levels(&self) -> usize {
        self.layout.levels()
    }

    /// The bucket of `level` in samples (see [`PyramidLayout::bucket`]).
    #[must_use]
    pub fn bucket(&self, level: usize) -> u64 {
        self.layout.bucket(level)
    }

    /// The cache file, when the pyramid lives in one.
    #[must_use]
    pub fn cache_path(&self) -> Option<&Path> {
        match &self.pages {
            Pages::File(file) => Some(file.path()),
            Pages::Memory(_) => None,
        }
    }

    /// Pages built so far.
    #[must_use]
    pub fn pages_filled(&self) -> u64 {
        self.filled.load(Ordering::Acquire)
    }

    /// Whether every page is built.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.pages_filled() == self.layout.pages()
    }

    /// Whether page `page` is built (`false` past the last page).
    #[must_use]
    pub fn page_filled(&self, page: u64) -> bool {
        usize::try_from(page)
            .ok()
            .and_then(|p| self.state.get(p))
            .is_some_and(|s| s.load(Ordering::Acquire) == FILLED)
    }

    /// The NaN samples of channel `channel` in the pages built so far.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a channel out of range.
    pub fn nan_samples(&self, channel: usize) -> Result<u64> {
        self.nan
            .get(channel)
            .map(|n| n.load(Ordering::Acquire))
            .ok_or_else(|| {
                Error::invalid(
                    "pyramid: channel",
                    format!("channel {channel} of {}", self.layout.channels()),
                )
            })
    }

    /// The envelope of `channels` (indices into the recording, in the order wanted, repeats
    /// allowed) over `columns` at level `level`, and whether every page under the columns was
    /// built. Columns over pages not built yet hold what the built pages under them gave
    /// (empty where none did). The envelope does not count NaN samples (`nan_counts()` is
    /// `None`; see [`nan_samples`](Self::nan_samples)).
    ///
    /// `columns` must be a [grid](Columns::grid) whose step is a multiple of the level's bucket,
    /// starting on a bucket edge and ending on one or at the recording's end: each column is
    /// then whole buckets, and its minimum and maximum equal those of its samples bit for bit
    /// (what [`Envelope::from_samples`] gives, less the NaN counts).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a level or a channel out of range, no channel, columns
    /// that are not such a grid or that pass the recording's end; [`Error::Io`] when a cache
    /// file cannot be read.
    pub fn envelope(
        &self,
        level: usize,
        channels: &[usize],
        columns: &Columns,
    ) -> Result<(Envelope, bool)> {
        self.check_query(level, channels, columns)?;
        let bucket = self.layout.bucket(level);
        let range = columns.samples();
        let width = columns.len();
        let step = columns.grid_step().unwrap_or(bucket);
        let mut min = vec![f32::INFINITY; channels.len() * width];
        let mut max = vec![f32::NEG_INFINITY; channels.len() * width];
        // Buckets per column; column k of the answer holds buckets `per_column * (k + first)`
        // onwards (a step is a whole number of buckets).
        let per_column = step / bucket;
        let first = range.start / step * per_column;
        // Merges buckets `from..` of a row (`lo`, `hi`, the row's bucket `from` first) into the
        // columns they fall in, column by column, in sample order.
        let mut fold = |out: usize, from: u64, lo: &[f32], hi: &[f32]| {
            // One division per row: the column of the first bucket and where it ends; then
            // each column's run in turn.
            let mut column = ((from - first) / per_column) as usize;
            let mut run = ((column as u64 + 1) * per_column + first - from) as usize;
            let mut at = 0;
            while at < lo.len() {
                let end = (at + run).min(lo.len());
                let at_out = out * width + column;
                let (mut m, mut x) = (min[at_out], max[at_out]);
                for (&l, &h) in lo[at..end].iter().zip(&hi[at..end]) {
                    merge(&mut m, &mut x, l, h);
                }
                (min[at_out], max[at_out]) = (m, x);
                at = end;
                column += 1;
                run = per_column as usize;
            }
        };
        let buckets = range.start / bucket..range.end.div_ceil(bucket);
        let pages = self.layout.pages_of(&range);
        let complete;
        if level < self.layout.page_levels() {
            complete = pages.clone().all(|p| self.page_filled(p));
            let per_page = self.layout.page_buckets(level) as u64;
            // File pages: the query's channels' rows are read into `row_min`/`row_max`.
            let rows = Rows::new(channels);
            let row_of: Vec<usize> = channels.iter().map(|&c| rows.index(c)).collect();
            let (mut row_min, mut row_max, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
            for page in pages {
                if !self.page_filled(page) {
                    continue;
                }
                let start = page * per_page;
                let inside = buckets.start.max(start)..buckets.end.min(start + per_page);
                let (a, b) = (
                    (inside.start - start) as usize,
                    (inside.end - start) as usize,
                );
                let n = per_page as usize;
                let (min_rows, max_rows, row_index): (&[f32], &[f32], &[usize]) = match &self.pages
                {
                    Pages::Memory(data) => {
                        let Some(data) = data[page as usize].get() else {
                            continue;
                        };
                        (
                            data.level_min(&self.layout, level),
                            data.level_max(&self.layout, level),
                            channels,
                        )
                    }
                    Pages::File(file) => {
                        self.read_rows(
                            file,
                            page,
                            level,
                            &rows,
                            (&mut row_min, &mut row_max),
                            &mut scratch,
                        )?;
                        (&row_min, &row_max, &row_of)
                    }
                };
                for (out, &row) in row_index.iter().enumerate() {
                    let at = row * n;
                    fold(
                        out,
                        inside.start,
                        &min_rows[at + a..at + b],
                        &max_rows[at + a..at + b],
                    );
                }
            }
        } else {
            let coarse = self
                .coarse
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            complete = pages.clone().all(|p| self.page_filled(p));
            let values = &coarse[level - self.layout.page_levels()];
            let count = self.layout.buckets(level) as usize;
            let (a, b) = (buckets.start as usize, buckets.end as usize);
            for (out, &c) in channels.iter().enumerate() {
                let row = c * count;
                fold(
                    out,
                    buckets.start,
                    &values.min[row + a..row + b],
                    &values.max[row + a..row + b],
                );
            }
        }
        let envelope = Envelope::from_parts(channels.len(), columns.clone(), min, max, None)?;
        Ok((envelope, complete))
    }

    fn check_query(&self, level: usize, channels: &[usize], columns: &Columns) -> Result<()> {
        if level >= self.levels() {
            return Err(Error::invalid(
                "pyramid: level",
                format!(
                    "level {level} of {} (0 to {})",
                    self.levels(),
                    self.levels() - 1
                ),
            ));
        }
        if channels.is_empty() {
            return Err(Error::invalid("pyramid: channels", "no channel"));
        }
        if let Some(&c) = channels.iter().find(|&&c| c >= self.layout.channels()) {
            return Err(Error::invalid(
                "pyramid: channels",
                format!("channel {c} of {}", self.layout.channels()),
            ));
        }
        let bucket = self.layout.bucket(level);
        let Some(step) = columns.grid_step() else {
            return Err(Error::invalid(
                "pyramid: columns",
                format!(
                    "even columns; a pyramid answers grid columns (a multiple of level {level}'s {bucket}-sample bucket)"
                ),
            ));
        };
        if !step.is_multiple_of(bucket) {
            return Err(Error::invalid(
                "pyramid: columns",
                format!(
                    "a grid step of {step} samples is not a multiple of level {level}'s {bucket}-sample bucket"
                ),
            ));
        }
        let Range { start, end } = columns.samples();
        let samples = self.layout.samples();
        if end > samples {
            return Err(Error::invalid(
                "pyramid: columns",
                format!("samples {start}..{end} pass the recording's end ({samples})"),
            ));
        }
        if !start.is_multiple_of(bucket) || !(end.is_multiple_of(bucket) || end == samples) {
            return Err(Error::invalid(
                "pyramid: columns",
                format!(
                    "samples {start}..{end} do not start and end on level {level}'s \
                     {bucket}-sample bucket edges (or the recording's end, {samples})"
                ),
            ));
        }
        Ok(())
    }

    /// Reads the rows of in-page level `level` of page `page` from the cache file for the
    /// channels of `rows` into
    /// `out` (minima, maxima; `[rows, page_buckets]`).
    fn read_rows(
        &self,
        file: &CacheFile,
        page: u64,
        level: usize,
        rows: &Rows,
        out: (&mut Vec<f32>, &mut Vec<f32>),
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let (out_min, out_max) = out;
        let per_page = self.layout.page_buckets(level);
        out_min.resize(rows.len() * per_page, 0.0);
        out_max.resize(rows.len() * per_page, 0.0);
        let level_at = self.layout.level_offset(level);
        let max_at = level_at + self.layout.channels() * per_page;
        for span in rows.spans() {
            let (r, c) = (span.start, rows.channels[span.start]);
            let len = span.len() * per_page;
            let values = r * per_page..r * per_page + len;
            file.read_values(
                page,
                level_at + c * per_page,
                &mut out_min[values.clone()],
                scratch,
            )?;
            file.read_values(page, max_at + c * per_page, &mut out_max[values], scratch)?;
        }
        Ok(())
    }

    /// Builds page `page` from `source` now, on this thread, with the host fold: `true` when
    /// this call built it, `false` when it was built or being built already.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a page out of range or a source of another shape; what the
    /// source reports; [`Error::Io`] when a cache file cannot be written. The page stays
    /// unbuilt on error.
    pub fn fill_page(&self, page: u64, source: &dyn RecordingSource) -> Result<bool> {
        self.check_source(source)?;
        if page >= self.layout.pages() {
            return Err(Error::invalid(
                "pyramid: page",
                format!("page {page} of {}", self.layout.pages()),
            ));
        }
        if !self.claim(page) {
            return Ok(false);
        }
        let mut work = PageWork::default();
        let built = self.build_page(page, source, &mut PageFolder::Host, &mut work);
        if built.is_err() {
            self.unclaim(page);
        }
        built.map(|()| true)
    }

    /// Refuses a source of another shape than the layout's.
    pub(crate) fn check_source(&self, source: &dyn RecordingSource) -> Result<()> {
        let info = source.info();
        if info.num_channels() != self.layout.channels()
            || info.num_samples != self.layout.samples()
        {
            return Err(Error::invalid(
                "pyramid: source",
                format!(
                    "the pyramid is for {} channels x {} samples, the source has {} x {}",
                    self.layout.channels(),
                    self.layout.samples(),
                    info.num_channels(),
                    info.num_samples
                ),
            ));
        }
        Ok(())
    }

    /// Takes page `page` for building: `false` when it is built or taken.
    pub(crate) fn claim(&self, page: u64) -> bool {
        self.state[page as usize]
            .compare_exchange(EMPTY, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Gives back a page taken with [`claim`](Self::claim) and not built.
    pub(crate) fn unclaim(&self, page: u64) {
        let _ = self.state[page as usize].compare_exchange(
            CLAIMED,
            EMPTY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Reads page `page` (claimed by the caller) from `source`, folds it with `folder` and
    /// stores it.
    pub(crate) fn build_page(
        &self,
        page: u64,
        source: &dyn RecordingSource,
        folder: &mut PageFolder,
        work: &mut PageWork,
    ) -> Result<()> {
        let range = self.layout.page_range(page);
        let channels = self.layout.channels();
        let values = channels * (range.end - range.start) as usize;
        work.samples.resize(values, 0.0);
        if work.all_channels.len() != channels {
            work.all_channels = (0..channels).collect();
        }
        source.read(&work.all_channels, range.clone(), &mut work.samples)?;
        let columns = Columns::grid(range, self.layout.base_bucket())?;
        let level0 = folder.fold(&work.samples, channels, &columns)?;
        let data = PageData::from_level0(&self.layout, &level0)?;
        self.store(page, data, &mut work.bytes)
    }

    /// Stores a built page, then marks it filled and brings the coarse levels up to date.
    fn store(&self, page: u64, data: PageData, scratch: &mut Vec<u8>) -> Result<()> {
        let mut kept = None;
        match &self.pages {
            Pages::Memory(pages) => {
                // The page was claimed, so nobody else sets it.
                let _ = pages[page as usize].set(data);
            }
            Pages::File(file) => {
                file.write_page(page, &data, scratch)?;
                kept = Some(data);
            }
        }
        let mut coarse = self
            .coarse
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let data = match (&self.pages, &kept) {
            (Pages::Memory(pages), _) => pages[page as usize].get(),
            (Pages::File(_), kept) => kept.as_ref(),
        };
        if let Some(data) = data {
            for (total, &n) in self.nan.iter().zip(&data.nan) {
                total.fetch_add(u64::from(n), Ordering::AcqRel);
            }
        }
        self.state[page as usize].store(FILLED, Ordering::Release);
        self.filled.fetch_add(1, Ordering::AcqRel);
        self.update_coarse(&mut coarse, page, data)
    }

    /// Refolds the coarse buckets over page `page` (just filled, its values `data`) from
    /// the buckets below them.
    fn update_coarse(
        &self,
        coarse: &mut [Coarse],
        page: u64,
        data: Option<&PageData>,
    ) -> Result<()> {
        let layout = &self.layout;
        let first = layout.page_levels();
        if first == layout.levels() {
            return Ok(());
        }
        let range = layout.page_range(page);
        let top = first - 1;
        let per_page = layout.page_buckets(top) as u64;
        let factor = layout.factor();
        let channels = layout.channels();
        let bucket = layout.bucket(first);
        let count = layout.buckets(first) as usize;
        let top_count = layout.buckets(top);
        // The coarsest in-page level's values in a page: minima, then maxima.
        let top_at = layout.level_offset(top);
        let n = channels * per_page as usize;
        // Those of the other pages read from a cache file for this update.
        let mut tops: Vec<(u64, Vec<f32>)> = Vec::new();
        let mut scratch = Vec::new();
        for j in range.start / bucket..range.end.div_ceil(bucket) {
            let children = j * factor..((j + 1) * factor).min(top_count);
            let (mut lo, mut hi) = (
                vec![f32::INFINITY; channels],
                vec![f32::NEG_INFINITY; channels],
            );
            for g in children {
                let child_page = g / per_page;
                let values: &[f32] = if child_page == page {
                    match data {
                        Some(data) => &data.values[top_at..],
                        None => continue,
                    }
                } else if !self.page_filled(child_page) {
                    continue;
                } else {
                    match &self.pages {
                        Pages::Memory(pages) => match pages[child_page as usize].get() {
                            Some(data) => &data.values[top_at..],
                            None => continue,
                        },
                        Pages::File(file) => {
                            let read = match tops.iter().position(|(p, _)| *p == child_page) {
                                Some(read) => read,
                                None => {
                                    let mut values = vec![0f32; 2 * n];
                                    file.read_values(
                                        child_page,
                                        top_at,
                                        &mut values,
                                        &mut scratch,
                                    )?;
                                    tops.push((child_page, values));
                                    tops.len() - 1
                                }
                            };
                            &tops[read].1
                        }
                    }
                };
                let local = (g - child_page * per_page) as usize;
                for c in 0..channels {
                    let at = c * per_page as usize + local;
                    merge(&mut lo[c], &mut hi[c], values[at], values[n + at]);
                }
            }
            let level = &mut coarse[0];
            for c in 0..channels {
                level.min[c * count + j as usize] = lo[c];
                level.max[c * count + j as usize] = hi[c];
            }
        }
        for level in first + 1..layout.levels() {
            let bucket = layout.bucket(level);
            for j in range.start / bucket..range.end.div_ceil(bucket) {
                refold_coarse(layout, coarse, level, j);
            }
        }
        Ok(())
    }
}

/// Buffers a page build reuses: the page's samples, the channel list, the encoded slot.
#[derive(Default)]
pub(crate) struct PageWork {
    samples: Vec<f32>,
    all_channels: Vec<usize>,
    bytes: Vec<u8>,
}

/// The distinct channels of a query, sorted, and where each one's row is.
struct Rows {
    channels: Vec<usize>,
}

impl Rows {
    fn new(channels: &[usize]) -> Self {
        let mut channels = channels.to_vec();
        channels.sort_unstable();
        channels.dedup();
        Self { channels }
    }

    fn len(&self) -> usize {
        self.channels.len()
    }

    /// The row of channel `c` (one of the query's).
    fn index(&self, c: usize) -> usize {
        self.channels.binary_search(&c).unwrap_or(0)
    }

    /// Runs of rows whose channels are consecutive (each read from a cache file at once).
    fn spans(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        let mut start = 0;
        (1..=self.channels.len()).filter_map(move |r| {
            let ends = r == self.channels.len() || self.channels[r] != self.channels[r - 1] + 1;
            ends.then(|| {
                let span = start..r;
                start = r;
                span
            })
        })
    }
}

/// Coarse levels with every bucket empty.
fn empty_coarse(layout: &PyramidLayout) -> Vec<Coarse> {
    (layout.page_levels()..layout.levels())
        .map(|level| {
            let n = layout.channels() * layout.buckets(level) as usize;
            Coarse {
                min: vec![f32::INFINITY; n],
                max: vec![f32::NEG_INFINITY; n],
            }
        })
        .collect()
}

/// Folds the coarsest in-page level of page `page` into the first coarse level (pages given
/// in increasing order, so each coarse bucket folds its children in sample order).
fn fold_top_in_order(layout: &PyramidLayout, coarse: &mut [Coarse], page: u64, data: &PageData) {
    let first = layout.page_levels();
    if first == layout.levels() {
        return;
    }
    let top = first - 1;
    let per_page = layout.page_buckets(top) as u64;
    let range = layout.page_range(page);
    let present = (range.end - range.start).div_ceil(layout.bucket(top));
    let count = layout.buckets(first) as usize;
    let (min, max) = (data.level_min(layout, top), data.level_max(layout, top));
    let level = &mut coarse[0];
    for c in 0..layout.channels() {
        for local in 0..present {
            let j = ((page * per_page + local) / layout.factor()) as usize;
            let at = c * per_page as usize + local as usize;
            merge(
                &mut level.min[c * count + j],
                &mut level.max[c * count + j],
                min[at],
                max[at],
            );
        }
    }
}

/// Refolds bucket `bucket` of coarse level `level` (above the first coarse level) from the
/// level below.
fn refold_coarse(layout: &PyramidLayout, coarse: &mut [Coarse], level: usize, bucket: u64) {
    let index = level - layout.page_levels();
    let (below, above) = coarse.split_at_mut(index);
    let (from, to) = (&below[index - 1], &mut above[0]);
    let (fine, wide) = (layout.buckets(level - 1), layout.buckets(level) as usize);
    let children = bucket * layout.factor()..((bucket + 1) * layout.factor()).min(fine);
    for c in 0..layout.channels() {
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for g in children.clone() {
            let at = c * fine as usize + g as usize;
            merge(&mut lo, &mut hi, from.min[at], from.max[at]);
        }
        to.min[c * wide + bucket as usize] = lo;
        to.max[c * wide + bucket as usize] = hi;
    }
}
