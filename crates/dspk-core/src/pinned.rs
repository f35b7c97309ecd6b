//! Page-locking window buffers so uploads run at bus speed (CUDA only for now).
//!
//! The window loader's two buffers are allocated once and recycled; page-locking them once
//! (`cuMemHostRegister`) makes every later upload from them a direct DMA instead of a copy
//! through a driver bounce buffer (figures: `docs/decisions/0003-page-locked-window-buffers.md`).

/// Page-locks `len` bytes at `ptr` for the CUDA runtime; `false` if this build has no CUDA or
/// the driver refused (the buffer then stays pageable, which is slower but correct).
///
/// # Safety
///
/// `ptr..ptr + len` must be one live allocation that stays at this address until
/// [`unpin`] is called on it.
#[cfg(feature = "cuda")]
pub(crate) unsafe fn pin(ptr: *mut u8, len: usize) -> bool {
    if len == 0 {
        return false;
    }
    // The driver library is loaded on first use, and a machine without one makes that panic:
    // then the buffer is simply not pinned.
    let address = ptr as usize;
    // SAFETY: forwarded from the caller.
    std::panic::catch_unwind(|| unsafe { register(address as *mut u8, len) }).unwrap_or(false)
}

/// The registration itself (see [`pin`]).
///
/// # Safety
///
/// As [`pin`].
#[cfg(feature = "cuda")]
unsafe fn register(ptr: *mut u8, len: usize) -> bool {
    use cudarc::driver::{result, sys};
    // The registration needs a current context: the primary context of device 0, which is
    // the one CubeCL's CUDA runtime uses. PORTABLE makes it page-locked for every context.
    let Ok(()) = result::init() else { return false };
    let Ok(device) = result::device::get(0) else {
        return false;
    };
    // SAFETY: `device` is a valid device ordinal returned by the driver.
    let Ok(context) = (unsafe { result::primary_ctx::retain(device) }) else {
        return false;
    };
    // SAFETY: `context` is a live primary context; it is popped right after.
    let pushed = unsafe { sys::cuCtxPushCurrent_v2(context) } == sys::CUresult::CUDA_SUCCESS;
    // SAFETY: the caller guarantees `ptr..ptr + len` is one live allocation.
    let registered = pushed
        && unsafe { sys::cuMemHostRegister_v2(ptr.cast(), len, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            == sys::CUresult::CUDA_SUCCESS;
    if pushed {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context pushed above on this thread.
        unsafe { sys::cuCtxPopCurrent_v2(&raw mut popped) };
    }
    // The primary context stays retained while the registration lives (released in `unpin`).
    if !registered {
        // SAFETY: balances the retain above.
        let _ = unsafe { result::primary_ctx::release(device) };
    }
    registered
}

/// Undoes [`pin`].
///
/// # Safety
///
/// `ptr` must have been registered by [`pin`] and not unpinned since.
#[cfg(feature = "cuda")]
pub(crate) unsafe fn unpin(ptr: *mut u8) {
    use cudarc::driver::{result, sys};
    // SAFETY: the caller guarantees `ptr` is registered. Failure leaves nothing to undo.
    unsafe { sys::cuMemHostUnregister(ptr.cast()) };
    if let Ok(device) = result::device::get(0) {
        // SAFETY: balances the retain in `pin`.
        let _ = unsafe { result::primary_ctx::release(device) };
    }
}

/// Without CUDA nothing is pinned.
///
/// # Safety
///
/// None needed; `unsafe` only to match the CUDA version.
#[cfg(not(feature = "cuda"))]
pub(crate) unsafe fn pin(_ptr: *mut u8, _len: usize) -> bool {
    false
}

/// Without CUDA nothing was pinned.
///
/// # Safety
///
/// None needed; `unsafe` only to match the CUDA version.
#[cfg(not(feature = "cuda"))]
pub(crate) unsafe fn unpin(_ptr: *mut u8) {}
