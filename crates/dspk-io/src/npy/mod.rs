//! `.npy` and `.npz` containers: a careful header parser, arrays with run-time dtypes, and
//! two-dimensional arrays read as recordings.

mod array;
mod header;
mod npz;
mod recording;

pub use array::NpyArray;
pub use header::{NPY_MAGIC, NpyHeader};
pub use npz::NpzArchive;
pub use recording::open_npy_recording;
