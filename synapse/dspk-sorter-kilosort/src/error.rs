//! The sorter's one error type.

/// What can go wrong in a sort.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is out of its range or disagrees with another one.
    #[error("setting {name}: {reason}")]
    Setting {
        /// The setting's name (Kilosort4's where it has one).
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The recording or the probe cannot be sorted as given (too short, too few channels,
    /// a probe that disagrees with the recording, non-finite samples, ...).
    #[error("{what}: {reason}")]
    Input {
        /// Which input.
        what: &'static str,
        /// What is wrong and where.
        reason: String,
    },
    /// A device operation of dspk-ops failed.
    #[error(transparent)]
    Ops(#[from] dspk_ops::Error),
    /// A recording, window or device error of dspk-core.
    #[error(transparent)]
    Core(#[from] dspk_core::Error),
    /// Reading a container (`.npy`, `.npz`) failed.
    #[error(transparent)]
    Io(#[from] dspk_io::Error),
    /// A probe or neural-format error of dspk-synapse.
    #[error(transparent)]
    Synapse(#[from] dspk_synapse::Error),
    /// A kernel launch or read-back of the sorter's own kernels failed.
    #[error("the device failed")]
    Device(#[from] cubecl::server::ServerError),
}

/// `Result` with the sorter's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
