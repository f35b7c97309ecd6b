//! A byte-budgeted least-recently-used cache of decoded chunks, shared by the readers of
//! compressed formats.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Which chunk of which array: an array id from [`ChunkCache::new_array_id`] and the chunk's
/// grid indices (time chunk, channel chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkKey {
    /// The array, as numbered by [`ChunkCache::new_array_id`].
    pub array: u64,
    /// The chunk's index along each of the two dimensions.
    pub chunk: [u64; 2],
}

/// What a cache has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that decoded the chunk.
    pub decodes: u64,
    /// Chunks dropped to stay within the budget.
    pub evictions: u64,
    /// Bytes held now.
    pub bytes: usize,
    /// Chunks held now.
    pub chunks: usize,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<ChunkKey, (Arc<[u8]>, u64)>,
    bytes: usize,
    clock: u64,
    stats: CacheStats,
}

/// Decoded chunks kept within a byte budget, least recently used dropped first, so a window
/// that straddles two chunks and the window after it decode each chunk once.
///
/// One cache may serve several arrays and threads (it is `Sync`; share it with an [`Arc`]).
/// Two threads missing on the same chunk at once may both decode it; the result is the same.
/// A chunk larger than the whole budget is decoded and handed out but not kept.
///
/// > default budget ([`ChunkCache::DEFAULT_BUDGET`]): 256 MiB.
#[derive(Debug)]
pub struct ChunkCache {
    budget: usize,
    inner: Mutex<Inner>,
}

/// The source of array ids, unique within the process.
static NEXT_ARRAY: AtomicU64 = AtomicU64::new(0);

impl ChunkCache {
    /// The default budget: 256 MiB.
    pub const DEFAULT_BUDGET: usize = 256 << 20;

    /// An empty cache holding at most `budget` bytes of decoded chunks.
    #[must_use]
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// A process-unique id for a new array's keys.
    #[must_use]
    pub fn new_array_id() -> u64 {
        NEXT_ARRAY.fetch_add(1, Ordering::Relaxed)
    }

    /// The byte budget.
    #[must_use]
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Counts of hits, decodes and evictions, and what is held now.
    #[must_use]
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            bytes: inner.bytes,
            chunks: inner.entries.len(),
            ..inner.stats
        }
    }

    /// Drops every chunk (the counters stay).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.bytes = 0;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The cache holds no invariant a panicking decoder could break (entries are inserted
        // whole), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The chunk `key`, from the cache or from `decode` (called without the lock held, so
    /// other threads keep reading).
    ///
    /// # Errors
    ///
    /// What `decode` returns; nothing is cached then.
    pub fn get_or_decode<E>(
        &self,
        key: ChunkKey,
        decode: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Arc<[u8]>, E> {
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let clock = inner.clock;
            if let Some((data, used)) = inner.entries.get_mut(&key) {
                *used = clock;
                let data = Arc::clone(data);
                inner.stats.hits += 1;
                return Ok(data);
            }
        }
        let data: Arc<[u8]> = decode()?.into();
        let mut inner = self.lock();
        inner.stats.decodes += 1;
        if data.len() > self.budget || inner.entries.contains_key(&key) {
            return Ok(data);
        }
        while inner.bytes + data.len() > self.budget {
            let Some((&oldest, _)) = inner.entries.iter().min_by_key(|(_, (_, used))| *used) else {
                break;
            };
            if let Some((dropped, _)) = inner.entries.remove(&oldest) {
                inner.bytes -= dropped.len();
                inner.stats.evictions += 1;
            }
        }
        inner.clock += 1;
        let clock = inner.clock;
        inner.bytes += data.len();
        inner.entries.insert(key, (Arc::clone(&data), clock));
        Ok(data)
    }
}

impl Default for ChunkCache {
    fn default() -> Self {
        Self::new(Self::DEFAULT_BUDGET)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(chunk: u64) -> ChunkKey {
        ChunkKey {
            array: 7,
            chunk: [chunk, 0],
        }
    }

    #[test]
    fn keeps_within_budget_dropping_the_least_recent() {
        let cache = ChunkCache::new(300);
        let decode = |n: u8| move || Ok::<_, ()>(vec![n; 100]);
        for n in 0..3 {
            cache.get_or_decode(key(n), decode(n as u8)).unwrap();
        }
        // Touch 0 so 1 is the least recent, then insert 3.
        cache.get_or_decode(key(0), decode(99)).unwrap();
        cache.get_or_decode(key(3), decode(3)).unwrap();
        let stats = cache.stats();
        assert_eq!(
            (
                stats.decodes,
                stats.hits,
                stats.evictions,
                stats.bytes,
                stats.chunks
            ),
            (4, 1, 1, 300, 3)
        );
        assert_eq!(
            &cache.get_or_decode(key(0), decode(99)).unwrap()[..],
            &[0u8; 100][..]
        );
        assert_eq!(cache.get_or_decode(key(1), decode(11)).unwrap()[0], 11);
        // Too large for the budget: handed out, not kept.
        let big = cache
            .get_or_decode(key(9), || Ok::<_, ()>(vec![1; 301]))
            .unwrap();
        assert_eq!(big.len(), 301);
        assert!(cache.stats().bytes <= 300);
        // Errors are passed on and nothing is cached.
        assert_eq!(
            cache.get_or_decode(key(10), || Err::<Vec<u8>, _>("bad")),
            Err("bad")
        );
    }
}
