//! The window buffers that circulate between the loader's reader thread and its caller, and
//! the upload wrapper that sends one back when the device runtime is done with it.

use std::mem::MaybeUninit;

use crossbeam_channel::Sender;
use cubecl::bytes::{AccessError, AccessPolicy, AllocationController, AllocationProperty, Bytes};

use crate::loader::{Counters, Returned, WindowElement};
use crate::pinned;

/// A window buffer: a vector allocated once with its full capacity, zeroed by the allocator
/// (fresh pages that the system maps in when the reader threads first write them, so no
/// thread spends time zeroing a window it is about to overwrite), of which the first `len`
/// elements are the window; it never grows, so it never moves. When the loader pins, it is
/// page-locked after its first fill ([`pin_if_pending`](Self::pin_if_pending)) for the rest of
/// its life.
pub(crate) struct WindowBuffer<T> {
    data: Vec<T>,
    len: usize,
    pinning: Pinning,
}

/// Where a buffer stands with page-locking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pinning {
    /// Pageable: not asked for, refused by the driver (tried once), or undone.
    No,
    /// Asked for, not tried yet.
    Pending,
    /// Page-locked.
    Pinned,
}

impl<T: Copy + Default> WindowBuffer<T> {
    /// An empty buffer with room for `capacity` elements, to be page-locked by
    /// [`pin_if_pending`](Self::pin_if_pending) if `pin`.
    pub(crate) fn new(capacity: usize, pin: bool) -> Self {
        // `vec!` of zeros asks the allocator for zeroed memory (`calloc`), which for a window's
        // size is untouched fresh pages: they are faulted in by the threads that fill the first
        // window, in parallel, not zeroed here first.
        Self {
            data: vec![T::default(); capacity],
            len: 0,
            pinning: if pin { Pinning::Pending } else { Pinning::No },
        }
    }

    /// Sets the length to `len` (elements past the old length zero), which must be within the
    /// capacity.
    pub(crate) fn resize(&mut self, len: usize) {
        let old = self.len;
        self.set_len_to_overwrite(len);
        if len > old {
            self.data[old..len].fill(T::default());
        }
    }
}

impl<T> WindowBuffer<T> {
    /// Whether the buffer is page-locked.
    pub(crate) fn is_pinned(&self) -> bool {
        self.pinning == Pinning::Pinned
    }

    /// Whether page-locking was asked for and not tried yet.
    pub(crate) fn pin_pending(&self) -> bool {
        self.pinning == Pinning::Pending
    }

    /// Page-locks the whole buffer if that was asked for and not tried yet; whether this call
    /// locked it. Meant for after the first fill: the reader threads have mapped the pages in
    /// (in parallel) by then, so the registration only locks them, where on fresh memory it
    /// would fault every page in on this one thread first.
    pub(crate) fn pin_if_pending(&mut self) -> bool {
        if self.pinning != Pinning::Pending {
            return false;
        }
        let bytes = size_of_val(self.data.as_slice());
        // SAFETY: the allocation of `bytes` bytes stays put until `unpin` runs in `Drop` or
        // `into_vec`: the vector is never resized.
        let pinned = bytes > 0 && unsafe { pinned::pin(self.data.as_mut_ptr().cast(), bytes) };
        self.pinning = if pinned { Pinning::Pinned } else { Pinning::No };
        pinned
    }

    /// The contents.
    pub(crate) fn data(&self) -> &[T] {
        &self.data[..self.len]
    }

    /// The contents, writable.
    pub(crate) fn data_mut(&mut self) -> &mut [T] {
        &mut self.data[..self.len]
    }

    /// Sets the length to `len`, which must be within the capacity, for a caller that writes
    /// every element: elements past the old length keep what they held (zero, or values of an
    /// earlier window).
    pub(crate) fn set_len_to_overwrite(&mut self, len: usize) {
        assert!(len <= self.data.len(), "window longer than its buffer");
        self.len = len;
    }

    /// The vector, no longer page-locked, for the caller to keep.
    pub(crate) fn into_vec(mut self) -> Vec<T> {
        self.unpin();
        self.data.truncate(self.len);
        std::mem::take(&mut self.data)
    }

    fn unpin(&mut self) {
        if self.pinning == Pinning::Pinned {
            self.pinning = Pinning::No;
            // SAFETY: registered in `pin_if_pending` at this address, which has not changed.
            unsafe { pinned::unpin(self.data.as_mut_ptr().cast()) };
        }
    }
}

impl<T> Drop for WindowBuffer<T> {
    fn drop(&mut self) {
        self.unpin();
    }
}

/// A window handed to a device upload as [`Bytes`] without a copy. CubeCL drops it once the
/// copy to the device is done; the buffer then goes back to the reader thread to be refilled.
/// Page-locked buffers say so ([`AllocationProperty::Pinned`]), and the CUDA runtime then
/// copies from them directly instead of through its own staging.
pub(crate) struct UploadBuffer<T: WindowElement> {
    buffer: Option<WindowBuffer<T>>,
    returned: Sender<Returned<T>>,
    counters: std::sync::Arc<Counters>,
}

impl<T: WindowElement> UploadBuffer<T> {
    /// `buffer` as upload bytes (its current length), returned through `returned` when
    /// dropped.
    pub(crate) fn into_bytes(
        buffer: WindowBuffer<T>,
        returned: Sender<Returned<T>>,
        counters: std::sync::Arc<Counters>,
    ) -> Bytes {
        let len = size_of_val(buffer.data());
        let controller = Self {
            buffer: Some(buffer),
            returned,
            counters,
        };
        // SAFETY: the controller's memory is the buffer's `len` initialised bytes.
        unsafe { Bytes::from_controller(Box::new(controller), len) }
    }

    fn buffer(&self) -> &WindowBuffer<T> {
        self.buffer.as_ref().expect("present until drop")
    }
}

impl<T: WindowElement> AllocationController for UploadBuffer<T> {
    fn alloc_align(&self) -> usize {
        // The alignment the allocation happens to have (large ones are page-aligned).
        let address = self.buffer().data().as_ptr() as usize;
        1 << address.trailing_zeros().min(12)
    }

    fn property(&self) -> AllocationProperty {
        if self.buffer().is_pinned() {
            AllocationProperty::Pinned
        } else {
            AllocationProperty::Native
        }
    }

    unsafe fn memory_mut(
        &mut self,
        _policy: AccessPolicy,
    ) -> Result<&mut [MaybeUninit<u8>], AccessError> {
        let data = self.buffer.as_mut().expect("present until drop").data_mut();
        let len = size_of_val(data);
        // SAFETY: the elements (`u8` or `f32`: plain data, no padding, every bit pattern
        // valid) viewed as their bytes, possibly-uninitialised; the trait's contract forbids
        // writing uninitialised values through the view, and any bytes written form valid
        // elements.
        Ok(unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast(), len) })
    }

    fn memory(&self, _policy: AccessPolicy) -> Result<&[MaybeUninit<u8>], AccessError> {
        let data = self.buffer().data();
        // SAFETY: as in `memory_mut`, read-only.
        Ok(unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), size_of_val(data)) })
    }
}

impl<T: WindowElement> Drop for UploadBuffer<T> {
    fn drop(&mut self) {
        self.counters.release();
        if let Some(buffer) = self.buffer.take() {
            // The loader may be gone; then the buffer is simply freed (and unpinned).
            let _ = self.returned.send(Returned::Buffer(buffer));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WindowBuffer;

    #[test]
    fn a_fresh_buffer_is_zero_and_only_resize_zeroes_what_it_adds() {
        let mut buffer = WindowBuffer::<f32>::new(8, false);
        assert!(buffer.data().is_empty());
        buffer.set_len_to_overwrite(8);
        assert_eq!(buffer.data(), [0.0; 8]);
        buffer.data_mut().fill(7.0);
        // A shorter window, then a longer one to overwrite: the earlier values stay.
        buffer.set_len_to_overwrite(3);
        buffer.set_len_to_overwrite(6);
        assert_eq!(buffer.data(), [7.0; 6]);
        // Padding for an upload: what it adds is zero.
        buffer.set_len_to_overwrite(3);
        buffer.resize(5);
        assert_eq!(buffer.data(), [7.0, 7.0, 7.0, 0.0, 0.0]);
        assert_eq!(buffer.into_vec(), [7.0, 7.0, 7.0, 0.0, 0.0]);
    }

    #[test]
    fn pinning_is_tried_once_and_only_when_asked_for() {
        let mut unasked = WindowBuffer::<u8>::new(4096, false);
        assert!(!unasked.pin_if_pending());
        assert!(!unasked.is_pinned());
        let mut asked = WindowBuffer::<u8>::new(4096, true);
        assert!(!asked.is_pinned(), "not before the first fill");
        assert!(asked.pin_pending());
        asked.set_len_to_overwrite(4096);
        asked.data_mut().fill(3);
        let pinned = asked.pin_if_pending();
        // Page-locked where this build has CUDA and a driver; either way it is tried once and
        // the contents stay.
        assert_eq!(asked.is_pinned(), pinned);
        assert!(!asked.pin_pending());
        assert!(!asked.pin_if_pending());
        assert_eq!(asked.is_pinned(), pinned);
        assert_eq!(asked.into_vec(), vec![3; 4096]);
    }

    #[test]
    #[should_panic(expected = "window longer than its buffer")]
    fn a_length_past_the_capacity_is_refused() {
        WindowBuffer::<u8>::new(4, false).set_len_to_overwrite(5);
    }
}
