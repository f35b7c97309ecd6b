//! A live acquisition's samples, pushed as they arrive and broadcast to every subscribed
//! client within a fixed number of held frames.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use dspk_core::RecordingInfo;
use tokio::sync::broadcast;

use crate::{Error, Result};

/// One frame of a live feed, as broadcast to the subscriptions.
#[derive(Debug)]
pub(crate) struct LiveFrame {
    pub(crate) sequence: u64,
    pub(crate) first_sample: u64,
    pub(crate) num_samples: u32,
    pub(crate) samples: Bytes,
}

struct Inner {
    info: RecordingInfo,
    frame_samples: u32,
    sender: broadcast::Sender<Arc<LiveFrame>>,
    /// The next sample's index and the next frame's sequence number.
    next: Mutex<(u64, u64)>,
}

/// The producer side of a live source: the acquisition [`push`](Self::push)es blocks of
/// stored samples; a [`Server`](crate::Server) made with
/// [`bind_live`](crate::Server::bind_live) sends them to its clients. At most `held_frames`
/// frames are held for the slowest client; one that falls further behind skips frames.
#[derive(Clone)]
pub struct LiveFeed {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LiveFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveFeed")
            .field("channels", &self.inner.info.num_channels())
            .field("frame_samples", &self.inner.frame_samples)
            .finish_non_exhaustive()
    }
}

impl LiveFeed {
    /// A feed of recordings described by `info` (its length is set to 0: live), cut into
    /// frames of at most `frame_samples` samples, holding at most `held_frames` frames.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for zero frame samples or held frames.
    pub fn new(mut info: RecordingInfo, frame_samples: u32, held_frames: usize) -> Result<Self> {
        if frame_samples == 0 || held_frames == 0 {
            return Err(Error::invalid(
                "live feed",
                format!(
                    "frames of {frame_samples} samples, {held_frames} held: both must be positive"
                ),
            ));
        }
        info.num_samples = 0;
        let (sender, _) = broadcast::channel(held_frames);
        Ok(Self {
            inner: Arc::new(Inner {
                info,
                frame_samples,
                sender,
                next: Mutex::new((0, 0)),
            }),
        })
    }

    /// What the feed holds (length 0: live).
    #[must_use]
    pub fn info(&self) -> &RecordingInfo {
        &self.inner.info
    }

    /// Samples per channel in a full frame.
    #[must_use]
    pub fn frame_samples(&self) -> u32 {
        self.inner.frame_samples
    }

    /// The index of the next sample to be pushed.
    #[must_use]
    pub fn next_sample(&self) -> u64 {
        self.inner.next.lock().map_or(0, |next| next.0)
    }

    /// Pushes the next block of samples of every channel: `stored` holds `n` samples per
    /// channel, channel-major, in the stored format (`channels * n * size` bytes). Returns the
    /// block's first sample index. Clients that are subscribed get it, cut into frames.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a length that is not a whole number of samples of every channel.
    pub fn push(&self, stored: &[u8]) -> Result<u64> {
        let info = &self.inner.info;
        let size = info.stored_format.size();
        let per_sample = info.num_channels() * size;
        if stored.is_empty() || !stored.len().is_multiple_of(per_sample) {
            return Err(Error::invalid(
                "live feed: push",
                format!(
                    "{} bytes are not a whole number of samples of {} channels of {}",
                    stored.len(),
                    info.num_channels(),
                    info.stored_format
                ),
            ));
        }
        let n = stored.len() / per_sample;
        let mut next = self
            .inner
            .next
            .lock()
            .map_err(|_| Error::invalid("live feed: push", "a pusher panicked"))?;
        let first = next.0;
        let step = self.inner.frame_samples as usize;
        for start in (0..n).step_by(step) {
            let len = step.min(n - start);
            let mut samples = Vec::with_capacity(len * per_sample);
            for channel in stored.chunks_exact(n * size) {
                samples.extend_from_slice(&channel[start * size..(start + len) * size]);
            }
            let frame = LiveFrame {
                sequence: next.1,
                first_sample: next.0,
                num_samples: len as u32,
                samples: Bytes::from(samples),
            };
            // No subscriber is not an error: a live source runs whether watched or not.
            let _ = self.inner.sender.send(Arc::new(frame));
            next.0 += len as u64;
            next.1 += 1;
        }
        Ok(first)
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<LiveFrame>> {
        self.inner.sender.subscribe()
    }
}
