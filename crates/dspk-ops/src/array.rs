//! Typed device arrays: a buffer with its shape and element type, checked once where it is
//! made, so the operations that take it need not check it again.
//!
//! - [`DeviceArray`]: `channels x samples` values of one [`Element`] type, channel-major;
//! - [`ChannelVector`]: one value per channel (thresholds, means, gains);
//! - [`StoredArray`]: a window of stored integers (any [`SampleFormat`] with an unpack kernel);
//! - [`DeviceWindow`]: a processed `f32` array with the [`HaloWindow`] it was read for.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use cubecl::CubeElement;
use cubecl::bytes::Bytes;
use cubecl::client::Client;
use cubecl::server::Handle;
use dspk_core::{HaloWindow, SampleFormat};

use crate::{DeviceLimits, Error, Result};

/// The element types a [`DeviceArray`] can hold: `f32`, `u32` and `i32` (the 32-bit types
/// every runtime, WGSL included, reads and writes). Sealed.
pub trait Element: CubeElement + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
}

impl Element for f32 {}
impl Element for u32 {}
impl Element for i32 {}

/// The shape of a channel-major array: `channels` rows of `samples` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Rows.
    pub channels: usize,
    /// Values per row.
    pub samples: usize,
}

impl Shape {
    /// `channels x samples`.
    #[must_use]
    pub fn new(channels: usize, samples: usize) -> Self {
        Self { channels, samples }
    }

    /// `channels * samples` when a kernel can index it with 32-bit integers.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] naming `what` when the product exceeds `u32::MAX`.
    pub(crate) fn values(self, what: &'static str) -> Result<usize> {
        self.channels
            .checked_mul(self.samples)
            .filter(|&v| v <= u32::MAX as usize)
            .ok_or(Error::OverLimit {
                what,
                requested: self.channels as u64 * self.samples as u64,
                limit: u64::from(u32::MAX),
                unit: "values",
                reason: "kernels index one buffer with 32-bit integers",
            })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x {}", self.channels, self.samples)
    }
}

/// [`Error::ArrayShape`]: `element`s of `shape` need `expected` `unit`s, `given` were given.
fn shape_error(
    element: impl ToString,
    shape: Shape,
    expected: u64,
    given: u64,
    unit: &'static str,
) -> Error {
    Error::ArrayShape {
        element: element.to_string(),
        shape,
        expected,
        given,
        unit,
    }
}

/// The bytes `handle` was created with (its requested size, not the padded allocation).
fn size_of_handle(handle: &Handle) -> u64 {
    handle.size_in_used()
}

/// `channels x samples` values of `E` on the device, channel-major and compact (value
/// `(c, s)` at index `c * samples + s` of the buffer).
///
/// Made only by [`empty`](Self::empty), [`from_host`](Self::from_host),
/// [`from_handle`](Self::from_handle) or [`front`](Self::front), each of which checks that the
/// buffer holds the shape and that `channels * samples` fits 32-bit kernel indices; the
/// operations of this crate then trust the shape. Cloning is cheap (the buffer is shared, not
/// copied).
pub struct DeviceArray<E: Element = f32> {
    handle: Handle,
    shape: Shape,
    element: PhantomData<E>,
}

impl<E: Element> Clone for DeviceArray<E> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
            shape: self.shape,
            element: PhantomData,
        }
    }
}

impl<E: Element> fmt::Debug for DeviceArray<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceArray")
            .field("element", &E::type_name())
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl<E: Element> DeviceArray<E> {
    /// A new uninitialised array of `channels x samples` on `client`'s device.
    ///
    /// # Errors
    ///
    /// [`Error::OverLimit`] when the array exceeds `u32::MAX` values or the device's largest
    /// buffer.
    pub fn empty(client: &Client, channels: usize, samples: usize) -> Result<Self> {
        let shape = Shape::new(channels, samples);
        let values = shape.values("device array")?;
        DeviceLimits::of(client).check("device array", values as u64, size_of::<E>() as u64)?;
        Ok(Self::trusted(alloc::<E>(client, values), shape))
    }

    /// A new array holding `values` (`channels * samples` of them, channel-major).
    ///
    /// # Errors
    ///
    /// [`Error::ArrayShape`] when `values` does not hold `channels * samples` values, with
    /// both counts; as [`empty`](Self::empty) over the limits.
    pub fn from_host(
        client: &Client,
        values: &[E],
        channels: usize,
        samples: usize,
    ) -> Result<Self> {
        let shape = Shape::new(channels, samples);
        let expected = shape.values("device array")?;
        if values.len() != expected {
            return Err(shape_error(
                E::type_name(),
                shape,
                expected as u64,
                values.len() as u64,
                "values",
            ));
        }
        DeviceLimits::of(client).check("device array", expected as u64, size_of::<E>() as u64)?;
        Ok(Self::trusted(upload(client, values), shape))
    }

    /// Wraps an existing buffer (one written by a crate's own kernel, say) as `channels x
    /// samples` values of `E` at its start.
    ///
    /// # Errors
    ///
    /// [`Error::ArrayShape`] when the buffer holds fewer than `channels * samples *
    /// size_of::<E>()` bytes, with the shape, the bytes needed and the bytes given;
    /// [`Error::OverLimit`] over 32-bit indexing.
    pub fn from_handle(handle: Handle, channels: usize, samples: usize) -> Result<Self> {
        let shape = Shape::new(channels, samples);
        check_handle::<E>(&handle, shape)?;
        Ok(Self::trusted(handle, shape))
    }

    /// An array over a buffer this crate allocated for at least `shape` (no check).
    pub(crate) fn trusted(handle: Handle, shape: Shape) -> Self {
        Self {
            handle,
            shape,
            element: PhantomData,
        }
    }

    /// The array of `channels x samples` over the front of the same buffer: the first
    /// `channels * samples` values, read as that compact shape (not a slice of this array's
    /// rows). How a short window lives in a buffer sized for the longest; nothing is copied.
    ///
    /// # Errors
    ///
    /// [`Error::ArrayShape`] when the front holds more values than this array (with both
    /// shapes' sizes).
    pub fn front(&self, channels: usize, samples: usize) -> Result<Self> {
        let shape = Shape::new(channels, samples);
        let needed = channels.saturating_mul(samples);
        if needed > self.len() {
            return Err(shape_error(
                E::type_name(),
                shape,
                needed as u64,
                self.len() as u64,
                "values",
            ));
        }
        Ok(Self::trusted(self.handle.clone(), shape))
    }

    /// Rows.
    #[must_use]
    pub fn channels(&self) -> usize {
        self.shape.channels
    }

    /// Values per row.
    #[must_use]
    pub fn samples(&self) -> usize {
        self.shape.samples
    }

    /// `channels x samples`.
    #[must_use]
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// `channels * samples` (at most `u32::MAX`).
    #[must_use]
    pub fn len(&self) -> usize {
        self.shape.channels * self.shape.samples
    }

    /// Whether the array holds no value.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A kernel argument over the first `len` values (never more than the array holds), for
    /// crates that launch their own kernels without `unsafe`: CubeCL's checked launches bound
    /// every access by the declared length, and clamping it to the typed array's makes the
    /// argument sound (what `BufferArg::from_raw_parts` asks its caller to promise).
    #[must_use]
    pub fn arg(&self, len: usize) -> cubecl::prelude::BufferArg {
        // SAFETY: the declared length is at most the values the typed array holds.
        unsafe {
            cubecl::prelude::BufferArg::from_raw_parts(self.handle.clone(), len.min(self.len()))
        }
    }

    /// The device buffer, for crates that launch their own kernels: at least
    /// [`len`](Self::len) values of `E` at its start, channel-major. The only way to the bare
    /// buffer; the shape stays with the array.
    #[must_use]
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Reads the array back to the host (waits for the device).
    ///
    /// # Errors
    ///
    /// [`Error::Device`] when the device reports an error (including one from earlier queued
    /// work).
    pub fn to_host(&self, client: &Client) -> Result<Vec<E>> {
        download(client, &self.handle, self.len())
    }

    /// Checks that `other` has this array's shape.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`] naming `what`, with both shapes.
    pub(crate) fn expect_shape(&self, what: &'static str, expected: Shape) -> Result<()> {
        if self.shape != expected {
            return Err(Error::ShapeMismatch {
                what,
                expected,
                given: self.shape,
            });
        }
        Ok(())
    }
}

/// One value of `E` per channel on the device: per-channel thresholds, means, gains. A
/// `channels x 1` [`DeviceArray`] under a name that says what it holds.
#[derive(Debug, Clone)]
pub struct ChannelVector<E: Element = f32>(DeviceArray<E>);

impl<E: Element> ChannelVector<E> {
    /// A new uninitialised vector of `channels` values.
    ///
    /// # Errors
    ///
    /// As [`DeviceArray::empty`].
    pub fn empty(client: &Client, channels: usize) -> Result<Self> {
        DeviceArray::empty(client, channels, 1).map(Self)
    }

    /// A new vector holding `values`, one per channel.
    ///
    /// # Errors
    ///
    /// As [`DeviceArray::from_host`].
    pub fn from_host(client: &Client, values: &[E]) -> Result<Self> {
        DeviceArray::from_host(client, values, values.len(), 1).map(Self)
    }

    /// Wraps an existing buffer as `channels` values of `E`.
    ///
    /// # Errors
    ///
    /// As [`DeviceArray::from_handle`].
    pub fn from_handle(handle: Handle, channels: usize) -> Result<Self> {
        DeviceArray::from_handle(handle, channels, 1).map(Self)
    }

    /// Values (one per channel).
    #[must_use]
    pub fn channels(&self) -> usize {
        self.0.channels()
    }

    /// The values as a `channels x 1` array.
    #[must_use]
    pub fn as_array(&self) -> &DeviceArray<E> {
        &self.0
    }

    /// The device buffer (see [`DeviceArray::handle`]).
    #[must_use]
    pub fn handle(&self) -> &Handle {
        self.0.handle()
    }

    /// Reads the values back to the host (waits for the device).
    ///
    /// # Errors
    ///
    /// As [`DeviceArray::to_host`].
    pub fn to_host(&self, client: &Client) -> Result<Vec<E>> {
        self.0.to_host(client)
    }

    /// Checks that the vector has `channels` values.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`] naming `what`.
    pub(crate) fn expect_channels(&self, what: &'static str, channels: usize) -> Result<()> {
        self.0.expect_shape(what, Shape::new(channels, 1))
    }
}

/// A window of stored values on the device: `channels x samples` little-endian values of a
/// [`SampleFormat`] with an unpack kernel, channel-major, 16-bit formats two per 32-bit word
/// (the buffer padded to whole words).
#[derive(Debug, Clone)]
pub struct StoredArray {
    handle: Handle,
    format: SampleFormat,
    shape: Shape,
}

impl StoredArray {
    /// Wraps a buffer of stored values.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] for a format without an unpack kernel,
    /// [`Error::ArrayShape`] when the buffer holds fewer bytes than the window (padded to whole
    /// words), [`Error::OverLimit`] over 32-bit indexing.
    pub fn from_handle(
        handle: Handle,
        format: SampleFormat,
        channels: usize,
        samples: usize,
    ) -> Result<Self> {
        let shape = Shape::new(channels, samples);
        let needed = Self::bytes(format, shape)?;
        let given = size_of_handle(&handle);
        if given < needed {
            return Err(shape_error(format, shape, needed, given, "bytes"));
        }
        Ok(Self {
            handle,
            format,
            shape,
        })
    }

    /// The bytes a window of `shape` in `format` takes on the device (whole 32-bit words).
    ///
    /// # Errors
    ///
    /// As [`from_handle`](Self::from_handle), without the size check.
    pub(crate) fn bytes(format: SampleFormat, shape: Shape) -> Result<u64> {
        let values = shape.values("stored window")? as u64;
        match format {
            SampleFormat::I16 | SampleFormat::U16 => Ok(values.div_ceil(2) * 4),
            SampleFormat::I32 | SampleFormat::F32 => Ok(values * 4),
            other => Err(Error::UnsupportedFormat(other)),
        }
    }

    /// The stored format.
    #[must_use]
    pub fn format(&self) -> SampleFormat {
        self.format
    }

    /// `channels x samples`.
    #[must_use]
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The device buffer (see [`DeviceArray::handle`]).
    #[must_use]
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// A processed window on the device: the `f32` array of its read range (all channels, the
/// halos included) and the [`HaloWindow`] it was read for, so results can be placed in the
/// recording (peaks in recording samples, covariance over the owned samples only).
#[derive(Debug, Clone)]
pub struct DeviceWindow {
    array: DeviceArray<f32>,
    window: HaloWindow,
}

impl DeviceWindow {
    /// The array of `window`'s read range.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`] when the array's samples are not `window.read_len()`.
    pub fn new(array: DeviceArray<f32>, window: HaloWindow) -> Result<Self> {
        array.expect_shape(
            "device window",
            Shape::new(array.channels(), window.read_len()),
        )?;
        Ok(Self { array, window })
    }

    /// The window's values, `channels x read_len`.
    #[must_use]
    pub fn array(&self) -> &DeviceArray<f32> {
        &self.array
    }

    /// Where the window lies in the recording (read and owned ranges, recording samples).
    #[must_use]
    pub fn window(&self) -> &HaloWindow {
        &self.window
    }

    /// The samples this window owns, as indices into [`array`](Self::array)'s rows.
    #[must_use]
    pub fn owned_local(&self) -> Range<usize> {
        self.window.valid_local()
    }

    /// The recording sample of the array's first column.
    #[must_use]
    pub fn start(&self) -> u64 {
        self.window.read().start
    }
}

/// Checks that `handle` holds `shape` values of `E`.
fn check_handle<E: Element>(handle: &Handle, shape: Shape) -> Result<()> {
    let values = shape.values("device array")?;
    let needed = values as u64 * size_of::<E>() as u64;
    let given = size_of_handle(handle);
    if given < needed {
        return Err(shape_error(E::type_name(), shape, needed, given, "bytes"));
    }
    Ok(())
}

/// A new uninitialised buffer of `values` `E` (at least one 4-byte word: zero-sized buffers
/// are not valid on every runtime).
pub(crate) fn alloc<E: Element>(client: &Client, values: usize) -> Handle {
    client.empty((values * size_of::<E>()).max(4))
}

/// A new buffer holding `values` (at least one word, as [`alloc`]).
pub(crate) fn upload<E: Element>(client: &Client, values: &[E]) -> Handle {
    if values.is_empty() {
        return client.empty(4);
    }
    client.create(Bytes::from_elems(values.to_vec()))
}

/// Reads the first `len` values of `handle` (which holds at least that many) back to the host.
pub(crate) fn download<E: Element>(client: &Client, handle: &Handle, len: usize) -> Result<Vec<E>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let bytes = client.read_one(handle.clone())?;
    Ok(E::from_bytes(&bytes)[..len].to_vec())
}
