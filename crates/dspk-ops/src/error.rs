//! The one error type of `dspk-ops`.

/// Everything that can go wrong in `dspk-ops`: a request over a device limit, arguments that
/// disagree with a workspace, a device that failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A buffer would exceed what one device buffer or a 32-bit kernel index can hold.
    #[error("{what} needs {requested} {unit}, over the limit of {limit} {unit} ({reason})")]
    OverLimit {
        /// What was being sized.
        what: &'static str,
        /// What the request needs.
        requested: u64,
        /// The limit.
        limit: u64,
        /// What the numbers count (`"values"`, `"bytes"`).
        unit: &'static str,
        /// Where the limit comes from.
        reason: &'static str,
    },

    /// A window longer than the workspace was sized for.
    #[error("a window of {samples} samples does not fit a workspace sized for {max_samples}")]
    WindowTooLong {
        /// Samples per channel in the window.
        samples: usize,
        /// Samples per channel the workspace holds.
        max_samples: usize,
    },

    /// Input whose length disagrees with the workspace's shape.
    #[error("{what}: expected {expected} {unit}, got {actual}")]
    Shape {
        /// What was given.
        what: &'static str,
        /// The length the workspace needs.
        expected: usize,
        /// The length given.
        actual: usize,
        /// What the lengths count.
        unit: &'static str,
    },

    /// A parameter outside the range an operation accepts (a cutoff above Nyquist, an even
    /// median kernel, a zero order, ...).
    #[error("{what}: {reason}")]
    InvalidParameter {
        /// The parameter, with the operation (`"butter: cutoff"`).
        what: &'static str,
        /// What is wrong with it, with its value.
        reason: String,
    },

    /// A device array whose buffer or host values are too small for its shape (refused where
    /// the array is made).
    #[error("{shape} {element} array (channels x samples) needs {expected} {unit}, given {given}")]
    ArrayShape {
        /// The element type (`"f32"`, or the stored format).
        element: String,
        /// The shape asked for.
        shape: crate::Shape,
        /// What the shape needs.
        expected: u64,
        /// What was given.
        given: u64,
        /// What the counts count (`"values"`, `"bytes"`).
        unit: &'static str,
    },

    /// Arrays whose shapes disagree (an output shaped differently from what an operation
    /// writes, a window of the wrong number of channels).
    #[error("{what}: expected an array of {expected} (channels x samples), given {given}")]
    ShapeMismatch {
        /// The array, with the operation (`"medfilt: output"`).
        what: &'static str,
        /// The shape the operation needs.
        expected: crate::Shape,
        /// The array's shape.
        given: crate::Shape,
    },

    /// A pipeline stage failed.
    #[error("pipeline stage {stage} failed")]
    Stage {
        /// The stage's name and position.
        stage: String,
        /// What went wrong.
        source: Box<Error>,
    },

    /// A stored upload before [`set_stored_scaling`](crate::PipelineWorkspace::set_stored_scaling).
    #[error("stored values were uploaded before the per-channel gains and offsets were set")]
    ScalingNotSet,

    /// A gain or offset that is not finite, or not representable in `f32`.
    #[error("channel {channel}: gain {gain} and offset {offset} must be finite in f32")]
    BadScaling {
        /// The channel.
        channel: usize,
        /// Its gain.
        gain: f64,
        /// Its offset.
        offset: f64,
    },

    /// A stored format this version has no unpack kernel for.
    #[error("no unpack kernel for stored format {0}")]
    UnsupportedFormat(dspk_core::SampleFormat),

    /// The device reported an error (out of memory, a lost device, a failed read).
    #[error("the device failed")]
    Device(#[from] cubecl::server::ServerError),

    /// An error from `dspk-core`.
    #[error(transparent)]
    Core(#[from] dspk_core::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
