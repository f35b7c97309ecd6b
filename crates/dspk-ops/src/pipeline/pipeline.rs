//! `Pipeline`: stages applied in turn on the device with two ping-pong buffers.

use cubecl::client::Client;

use super::Stage;
use crate::buffers::GrowingBuffer;
use crate::{DeviceArray, Error, Result};

/// An ordered list of [`Stage`]s applied to a `[channels, samples]` `f32` window on the
/// device. Stage 1 reads the input buffer and writes buffer A, stage 2 reads A and writes B,
/// stage 3 writes A again, and so on: two device buffers whatever the number of stages,
/// allocated once for the largest window, and nothing read back between stages.
///
/// ```no_run
/// # fn demo(client: &cubecl::client::Client, window: &dspk_ops::DeviceArray) -> dspk_ops::Result<()> {
/// use dspk_ops::{CommonReference, Pipeline, Reference, SosFilter, design};
/// let highpass = design::butter(3, design::Band::Highpass(300.0), 30_000.0)?;
/// let mut pipeline = Pipeline::new()
///     .with(CommonReference::new(Reference::Mean))
///     .with(SosFilter::zero_phase(&highpass)?);
/// let halo = pipeline.settling(); // halo each window needs on each side
/// let result = pipeline.run(client, window)?; // same shape as `window`
/// # let _ = (halo, result); Ok(()) }
/// ```
#[derive(Default)]
pub struct Pipeline {
    stages: Vec<Box<dyn Stage>>,
    /// The two ping-pong buffers.
    buffers: [GrowingBuffer; 2],
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("stages", &self.stage_names())
            .field("allocations", &self.device_allocations())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// A pipeline with no stages (its result is its input).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The pipeline with `stage` appended.
    #[must_use]
    pub fn with(mut self, stage: impl Stage + 'static) -> Self {
        self.stages.push(Box::new(stage));
        self
    }

    /// Appends `stage`.
    pub fn push(&mut self, stage: Box<dyn Stage>) {
        self.stages.push(stage);
    }

    /// The stages' names, in order.
    #[must_use]
    pub fn stage_names(&self) -> Vec<&str> {
        self.stages.iter().map(|s| s.name()).collect()
    }

    /// Number of stages.
    #[must_use]
    pub fn len(&self) -> usize {
        self.stages.len()
    }

    /// Whether the pipeline has no stages.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// The halo, in samples on each side, a window needs so that its samples outside the halo
    /// equal those of the whole recording processed at once: the sum of the stages' settling
    /// lengths (each stage's dependence reaches through the ones after it).
    #[must_use]
    pub fn settling(&self) -> usize {
        self.stages.iter().map(|s| s.settling()).sum()
    }

    /// Allocates the two ping-pong buffers and every stage's scratch for windows of up to
    /// `channels x max_samples` now, rather than on the first [`run`](Self::run) (so the device memory a
    /// workspace needs is claimed up front).
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] over 32-bit indexing.
    pub fn reserve(&mut self, client: &Client, channels: usize, max_samples: usize) -> Result<()> {
        self.ping_pong(client, channels, max_samples)?;
        for stage in &mut self.stages {
            stage.reserve(client, channels, max_samples)?;
        }
        Ok(())
    }

    /// The two ping-pong buffers as `channels x samples` arrays, (re)allocated when they hold
    /// fewer values.
    fn ping_pong(
        &mut self,
        client: &Client,
        channels: usize,
        samples: usize,
    ) -> Result<[DeviceArray; 2]> {
        let [a, b] = &mut self.buffers;
        Ok([
            a.array(client, "pipeline buffers", channels, samples)?,
            b.array(client, "pipeline buffers", channels, samples)?,
        ])
    }

    /// Device buffers the pipeline and its stages have allocated so far.
    #[must_use]
    pub fn device_allocations(&self) -> usize {
        self.buffers
            .iter()
            .map(GrowingBuffer::allocations)
            .sum::<usize>()
            + self
                .stages
                .iter()
                .map(|s| s.device_allocations())
                .sum::<usize>()
    }

    /// Runs every stage on `input` (not modified) and returns the array holding the result,
    /// of `input`'s shape: `input` itself when there are no stages, else one of the two
    /// ping-pong buffers (valid until the next run). Work is queued, not waited for.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] when the ping-pong buffers cannot grow to `input`'s shape; a
    /// stage's error, with its name, in [`Error::Stage`].
    pub fn run(&mut self, client: &Client, input: &DeviceArray) -> Result<DeviceArray> {
        if self.stages.is_empty() {
            return Ok(input.clone());
        }
        let [a, b] = self.ping_pong(client, input.channels(), input.samples())?;
        let mut source = input.clone();
        for (index, stage) in self.stages.iter_mut().enumerate() {
            let target = if index % 2 == 0 { &a } else { &b };
            stage
                .apply(client, &source, target)
                .map_err(|e| Error::Stage {
                    stage: format!("{} (stage {index})", stage.name()),
                    source: Box::new(e),
                })?;
            source = target.clone();
        }
        Ok(source)
    }
}
