//! Device limits every buffer is checked against before it is allocated.

use cubecl::client::Client;

use crate::{Error, Result};

/// The limits a buffer must respect on a device.
///
/// Kernels index with 32-bit integers (WGSL has no 64-bit integers), so one buffer holds at most
/// `u32::MAX` values; and a runtime caps the size of one allocation (128 MiB on lavapipe, 2 GiB
/// on wgpu/Vulkan on NVIDIA, ~37 GB on CUDA on an H200). Requests over either are refused with
/// [`Error::OverLimit`], never truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// The most values one buffer may hold (at most `u32::MAX`).
    pub max_values: u64,
    /// The most bytes one buffer may hold.
    pub max_buffer_bytes: u64,
}

impl DeviceLimits {
    /// The limits of `client`'s device.
    #[must_use]
    pub fn of(client: &Client) -> Self {
        Self {
            max_values: u64::from(u32::MAX),
            max_buffer_bytes: client.properties().memory.max_page_size,
        }
    }

    /// Checks a buffer of `values` elements of `value_bytes` bytes each.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] naming `what`, the request and the limit.
    pub fn check(&self, what: &'static str, values: u64, value_bytes: u64) -> Result<()> {
        if values > self.max_values {
            return Err(Error::OverLimit {
                what,
                requested: values,
                limit: self.max_values,
                unit: "values",
                reason: "kernels index one buffer with 32-bit integers",
            });
        }
        let bytes = values.saturating_mul(value_bytes);
        if bytes > self.max_buffer_bytes {
            return Err(Error::OverLimit {
                what,
                requested: bytes,
                limit: self.max_buffer_bytes,
                unit: "bytes",
                reason: "the device's largest single buffer",
            });
        }
        Ok(())
    }
}
