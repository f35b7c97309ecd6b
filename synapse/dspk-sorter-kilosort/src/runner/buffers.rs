//! The device buffers of the sorter's kernels: allocation and upload, the two counters a
//! detection or matching kernel keeps, and handles on parts of arrays for read-backs and writes.

use cubecl::CubeElement;
use cubecl::bytes::Bytes;
use cubecl::client::Client;
use cubecl::server::Handle;
use dspk_ops::{DeviceArray, Element};

use crate::Result;

/// Slot of a kernel's `counters` counting what it found (spikes, peaks).
pub(crate) const FOUND: usize = 0;
/// Slot of a kernel's `counters` holding the smallest index of a non-finite sample
/// (`u32::MAX`: none).
pub(crate) const FIRST_BAD: usize = 1;

/// A new array holding `values` (at least one word).
pub(crate) fn upload<E: Element>(client: &Client, values: &[E]) -> Result<DeviceArray<E>> {
    Ok(DeviceArray::from_host(client, values, 1, values.len())?)
}

/// A new uninitialised array of `values` `E` (at least one word).
pub(crate) fn alloc<E: Element>(client: &Client, values: usize) -> Result<DeviceArray<E>> {
    Ok(DeviceArray::empty(client, 1, values)?)
}

/// Zeroes `counters[FOUND]` and sets `counters[FIRST_BAD]` to `u32::MAX` (none).
pub(crate) fn reset_counters(client: &Client, counters: &DeviceArray<u32>) {
    client.write(counters.handle(), Bytes::from_elems(vec![0u32, u32::MAX]));
}

/// Reads `[FOUND, FIRST_BAD]` (waits for the device).
pub(crate) fn read_counters(client: &Client, counters: &DeviceArray<u32>) -> Result<[u32; 2]> {
    let bytes = client.read_one(counters.handle().clone())?;
    let words = u32::from_bytes(&bytes);
    Ok([words[FOUND], words[FIRST_BAD]])
}

/// The first `values` values of `array`, for a read-back.
pub(crate) fn prefix<E: Element>(array: &DeviceArray<E>, values: usize) -> Handle {
    range(array, 0, values)
}

/// The values `first..first + values` of `array`, for a read-back or a write.
pub(crate) fn range<E: Element>(array: &DeviceArray<E>, first: usize, values: usize) -> Handle {
    let handle = array.handle().clone();
    let size = size_of::<E>() as u64;
    // `size_in_used`: the buffer may be padded past the array (an `offset_end` already set).
    let unused = handle.size_in_used() - (first + values) as u64 * size;
    handle.offset_start(first as u64 * size).offset_end(unused)
}
