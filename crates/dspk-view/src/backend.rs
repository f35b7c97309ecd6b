//! Where a viewer's signals come from: a local recording, or (in dspk-stream) a remote one.

use std::ops::Range;
use std::sync::Arc;

use dspk_core::{RecordingInfo, RecordingSource};

use crate::view::answer;
use crate::{Pyramid, Result, View, ViewRequest};

/// Values a [`LocalBackend`] reads from the raw samples by default, rather than answer from a
/// pyramid that has not filled every page a view needs (64 MB of `f32`: a few hundred
/// milliseconds of a 384-channel recording from the page cache).
pub const RAW_FALLBACK_VALUES: u64 = 1 << 24;

/// A source of views and samples that a viewer draws from, wherever the recording is.
pub trait SignalBackend: Send + Sync {
    /// What the recording holds (channels, length, rate).
    fn info(&self) -> &RecordingInfo;

    /// The envelope of a view request (see [`View`] for what the answer promises).
    ///
    /// # Errors
    ///
    /// A request that does not fit the recording ([`crate::Error::InvalidRequest`],
    /// [`crate::Error::OverLimit`]), or what the recording or the connection report.
    fn view(&self, request: &ViewRequest) -> Result<View>;

    /// The scaled samples of `channels` over `samples`, channel-major, into `out`
    /// (`channels.len() * samples.len()` values).
    ///
    /// # Errors
    ///
    /// A request outside the recording or an `out` of the wrong length, or what the recording
    /// or the connection report.
    fn read(&self, channels: &[usize], samples: Range<u64>, out: &mut [f32]) -> Result<()>;
}

/// A recording on this machine, with a pyramid when one was built for it (views of long
/// ranges then read the pyramid; without one they fold the raw samples).
#[derive(Clone)]
pub struct LocalBackend {
    source: Arc<dyn RecordingSource>,
    pyramid: Option<Arc<Pyramid>>,
    raw_fallback: u64,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("channels", &self.source.info().num_channels())
            .field("samples", &self.source.info().num_samples)
            .field("pyramid", &self.pyramid.is_some())
            .finish()
    }
}

impl LocalBackend {
    /// A backend that answers every view from the raw samples.
    #[must_use]
    pub fn new(source: Arc<dyn RecordingSource>) -> Self {
        Self {
            source,
            pyramid: None,
            raw_fallback: RAW_FALLBACK_VALUES,
        }
    }

    /// A backend that answers views from `pyramid` where a level is exact (the pyramid may
    /// still be building: views of pages not yet filled read the raw samples when they are
    /// short, and say they are incomplete otherwise).
    ///
    /// # Errors
    ///
    /// [`crate::Error::InvalidRequest`] when the pyramid was built for a recording of another
    /// shape.
    pub fn with_pyramid(source: Arc<dyn RecordingSource>, pyramid: Arc<Pyramid>) -> Result<Self> {
        crate::view::check_pyramid(&pyramid, source.info())?;
        Ok(Self {
            source,
            pyramid: Some(pyramid),
            raw_fallback: RAW_FALLBACK_VALUES,
        })
    }

    /// Sets how many values (channels x samples) a view may read from the raw samples when
    /// the pyramid has not filled every page it needs (default [`RAW_FALLBACK_VALUES`]; 0:
    /// always answer from the pyramid, incomplete where it is).
    #[must_use]
    pub fn raw_fallback(mut self, values: u64) -> Self {
        self.raw_fallback = values;
        self
    }

    /// The recording.
    #[must_use]
    pub fn source(&self) -> &Arc<dyn RecordingSource> {
        &self.source
    }

    /// The pyramid, when there is one.
    #[must_use]
    pub fn pyramid(&self) -> Option<&Arc<Pyramid>> {
        self.pyramid.as_ref()
    }
}

impl SignalBackend for LocalBackend {
    fn info(&self) -> &RecordingInfo {
        self.source.info()
    }

    fn view(&self, request: &ViewRequest) -> Result<View> {
        answer(
            self.source.as_ref(),
            self.pyramid.as_deref(),
            request,
            self.raw_fallback,
        )
    }

    fn read(&self, channels: &[usize], samples: Range<u64>, out: &mut [f32]) -> Result<()> {
        Ok(self.source.read(channels, samples, out)?)
    }
}
