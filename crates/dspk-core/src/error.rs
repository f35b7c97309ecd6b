//! The one error type of `dspk-core`.

use std::ops::Range;

/// Everything that can go wrong in `dspk-core`: bad arguments to a recording read, a runtime
/// that is not compiled in or has no device, a window schedule that makes no sense, a loader
/// whose reader thread failed.
///
/// Messages are lower-case and carry the values involved (requested and limit, channel and
/// count), so a log line says what was wrong and where.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A channel index in a read request is not a channel of the recording.
    #[error("channel {channel} is out of range: the recording has {num_channels} channels")]
    ChannelOutOfRange {
        /// The index asked for.
        channel: usize,
        /// How many channels the recording has.
        num_channels: usize,
    },

    /// A sample range ends before it starts.
    #[error("sample range {}..{} ends before it starts", range.start, range.end)]
    ReversedSampleRange {
        /// The range asked for.
        range: Range<u64>,
    },

    /// A sample range reaches past the end of the recording.
    #[error(
        "sample range {}..{} reaches past the end of the recording ({num_samples} samples)",
        range.start, range.end
    )]
    SamplesPastEnd {
        /// The range asked for.
        range: Range<u64>,
        /// How many samples the recording has.
        num_samples: u64,
    },

    /// An output buffer does not have the length a request needs.
    #[error("output buffer holds {actual} {unit}, the request needs {expected}")]
    OutputLength {
        /// The length the request needs.
        expected: usize,
        /// The length given.
        actual: usize,
        /// What the lengths count (`"values"` or `"bytes"`).
        unit: &'static str,
    },

    /// A request or a recording is larger than this machine can address.
    #[error("{what} is too large: {detail}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The sizes involved.
        detail: String,
    },

    /// The source cannot return stored values (only scaled ones).
    #[error("{source_name} cannot return stored values; use `read` for scaled values")]
    Unsupported {
        /// A short name of the source type.
        source_name: &'static str,
    },

    /// A recording source failed to read (I/O, decoding, a corrupt file); the cause is kept.
    #[error("{source_name}: {cause}")]
    Source {
        /// What was being read (a type name, or a path).
        source_name: String,
        /// The error the source reported.
        #[source]
        cause: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },

    /// A recording has no samples, and the caller needs some (a sorter, a statistic, a
    /// window schedule over the recording). Opening an empty recording is not an error; a
    /// consumer that needs samples returns this.
    #[error("{name} has no samples (an empty recording): {needed}")]
    EmptyRecording {
        /// The recording (its path, or a name).
        name: String,
        /// What needed samples (`"a sort needs at least one window"`).
        needed: String,
    },

    /// A recording was built from values that disagree with each other or make no sense.
    #[error("invalid recording: {0}")]
    InvalidRecording(String),

    /// A sample rate or time that is not a positive finite rational.
    #[error("invalid sample rate or time: {0}")]
    InvalidRate(String),

    /// A window schedule with a window length of zero.
    #[error("a window schedule needs a window of at least one sample, got {window}")]
    InvalidSchedule {
        /// The window length given.
        window: u64,
    },

    /// `DSPK_RUNTIME` or a parsed name is not a runtime dspk knows.
    #[error(
        "unknown runtime `{name}`: expected one of wgpu, cuda, hip, cpu (compiled in: {compiled})"
    )]
    UnknownRuntime {
        /// The name given.
        name: String,
        /// The runtimes compiled into this binary, comma-separated.
        compiled: String,
    },

    /// A runtime was asked for that this binary was built without.
    #[error(
        "the {target} runtime is not compiled into this binary (compiled in: {compiled}); \
         rebuild with the `{target}` cargo feature"
    )]
    NotCompiled {
        /// The runtime asked for.
        target: &'static str,
        /// The runtimes compiled into this binary, comma-separated.
        compiled: String,
    },

    /// A runtime is compiled in but no device of it could be opened.
    #[error(
        "the {target} runtime is compiled in but has no usable device: {reason} (compiled in: {compiled})"
    )]
    NoDevice {
        /// The runtime asked for.
        target: &'static str,
        /// What the runtime said.
        reason: String,
        /// The runtimes compiled into this binary, comma-separated.
        compiled: String,
    },

    /// A device index (`DSPK_DEVICE`, `--device`) past the devices the runtime has.
    #[error(
        "device {index} of the {target} runtime was asked for, but it has {count} device{plural} \
         (indices 0 to {last})",
        plural = if *count == 1 { "" } else { "s" },
        last = count.saturating_sub(1)
    )]
    NoSuchDevice {
        /// The runtime asked.
        target: &'static str,
        /// The index asked for.
        index: usize,
        /// How many devices the runtime has on this machine.
        count: usize,
    },

    /// `DSPK_DEVICE` (or a device index given as text) is not a whole number.
    #[error("{source_name} is `{value}`: expected a device index, a whole number from 0")]
    InvalidDeviceIndex {
        /// Where the value came from (`DSPK_DEVICE`).
        source_name: String,
        /// The value given.
        value: String,
    },

    /// None of the compiled-in runtimes has a usable device.
    #[error("no compiled-in runtime has a usable device (compiled in: {compiled})")]
    NoRuntimeAvailable {
        /// The runtimes compiled into this binary, comma-separated.
        compiled: String,
    },

    /// The caller asked a window loader for another window while holding both of its buffers.
    #[error(
        "asked for window {window} while holding {held} windows of the loader: drop a window \
         (or take its data and drop it) before asking for the next; only two buffers circulate"
    )]
    WindowsHeld {
        /// Windows the caller holds.
        held: usize,
        /// The window asked for.
        window: usize,
    },

    /// The window loader's reader thread stopped without sending a result (it panicked).
    #[error("the window loader's reader thread stopped unexpectedly while reading window {window}")]
    LoaderStopped {
        /// The index of the window it was expected to deliver.
        window: usize,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
