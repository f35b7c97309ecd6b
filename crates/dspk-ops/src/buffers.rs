//! Moving `f32` and `u32` arrays to and from the device, for callers that hold host arrays
//! (filter coefficients, mixing matrices, test inputs). Windows travel through
//! [`PipelineWorkspace`](crate::PipelineWorkspace) instead.

use cubecl::bytes::Bytes;
use cubecl::client::Client;
use cubecl::prelude::*;
use cubecl::server::Handle;

use crate::{Error, Result};

/// A new device buffer holding `values` (at least one 4-byte word: zero-sized buffers are not
/// valid on every runtime).
#[must_use]
pub fn upload_f32(client: &Client, values: &[f32]) -> Handle {
    if values.is_empty() {
        return client.empty(4);
    }
    client.create(Bytes::from_elems(values.to_vec()))
}

/// A new device buffer holding `values` (at least one word, as [`upload_f32`]).
#[must_use]
pub fn upload_u32(client: &Client, values: &[u32]) -> Handle {
    if values.is_empty() {
        return client.empty(4);
    }
    client.create(Bytes::from_elems(values.to_vec()))
}

/// A new uninitialised device buffer for `len` `f32` values (at least one word).
#[must_use]
pub fn empty_f32(client: &Client, len: usize) -> Handle {
    client.empty(len.max(1) * 4)
}

/// Reads the first `len` `f32` values of `handle` back to the host (waits for the device).
///
/// # Errors
///
/// [`Error::Shape`] when the buffer holds fewer than `len` values, [`Error::Device`] when the
/// device reports an error (including one from earlier queued work).
pub fn download_f32(client: &Client, handle: &Handle, len: usize) -> Result<Vec<f32>> {
    let bytes = read(client, handle, len)?;
    Ok(f32::from_bytes(&bytes)[..len].to_vec())
}

/// Reads the first `len` `u32` values of `handle` back to the host (waits for the device).
///
/// # Errors
///
/// As [`download_f32`].
pub fn download_u32(client: &Client, handle: &Handle, len: usize) -> Result<Vec<u32>> {
    let bytes = read(client, handle, len)?;
    Ok(u32::from_bytes(&bytes)[..len].to_vec())
}

fn read(client: &Client, handle: &Handle, len: usize) -> Result<Bytes> {
    crate::launch::check_buffer("buffer to read", handle, len * 4)?;
    client
        .read_one(handle.clone())
        .map_err(|e| Error::Device(format!("{e:?}")))
}

/// A device buffer of `f32` that is reallocated only when a larger size is asked for, and
/// counts its allocations: the scratch space of stages whose windows vary in length.
#[derive(Debug, Default)]
pub(crate) struct GrowingBuffer {
    held: Option<(usize, Handle)>,
    allocations: usize,
}

impl GrowingBuffer {
    /// A buffer of at least `values` `f32`: the one held, or a new one when it is smaller.
    pub(crate) fn get(&mut self, client: &Client, values: usize) -> Handle {
        match &self.held {
            Some((capacity, handle)) if *capacity >= values => handle.clone(),
            _ => {
                self.allocations += 1;
                let handle = empty_f32(client, values);
                self.held = Some((values, handle.clone()));
                handle
            }
        }
    }

    /// Device buffers allocated so far.
    pub(crate) fn allocations(&self) -> usize {
        self.allocations
    }
}
