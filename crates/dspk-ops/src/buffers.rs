//! Scratch space that grows with the windows it serves.

use cubecl::client::Client;
use cubecl::server::Handle;

use crate::Result;
use crate::array::{DeviceArray, Element, Shape, alloc};

/// A device buffer of `E` that is reallocated only when a larger size is asked for, and counts
/// its allocations: the scratch space of stages and detectors whose windows vary in length.
#[derive(Debug)]
pub(crate) struct GrowingBuffer<E: Element = f32> {
    held: Option<(usize, Handle)>,
    allocations: usize,
    element: std::marker::PhantomData<E>,
}

impl<E: Element> Default for GrowingBuffer<E> {
    fn default() -> Self {
        Self {
            held: None,
            allocations: 0,
            element: std::marker::PhantomData,
        }
    }
}

impl<E: Element> GrowingBuffer<E> {
    /// An array of `channels x samples` at the front of the buffer held, or of a new one when
    /// it is smaller.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`](crate::Error::OverLimit) naming `what` over 32-bit indexing.
    pub(crate) fn array(
        &mut self,
        client: &Client,
        what: &'static str,
        channels: usize,
        samples: usize,
    ) -> Result<DeviceArray<E>> {
        let shape = Shape::new(channels, samples);
        let values = shape.values(what)?;
        Ok(DeviceArray::trusted(self.get(client, values), shape))
    }

    /// A buffer of at least `values` `E`: the one held, or a new one when it is smaller.
    pub(crate) fn get(&mut self, client: &Client, values: usize) -> Handle {
        match &self.held {
            Some((capacity, handle)) if *capacity >= values => handle.clone(),
            _ => {
                self.allocations += 1;
                let handle = alloc::<E>(client, values);
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
