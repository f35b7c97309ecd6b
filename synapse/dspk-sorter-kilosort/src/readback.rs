//! Handles on parts of device arrays, for read-backs and writes of what a kernel produced.

use cubecl::server::Handle;
use dspk_ops::{DeviceArray, Element};

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
