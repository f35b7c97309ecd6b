//! Stored sample formats and their conversion to scaled values.

use std::fmt;

/// How one stored sample is laid out: the integer or float type recordings keep on disk.
///
/// All formats are little-endian. A scaled value is `stored * gain + offset` (see
/// [`ChannelInfo`](crate::ChannelInfo)); for [`SampleFormat::U16`] `stored` is the unsigned value
/// (0..=65535), so offset-binary data is described by its gain and an offset of
/// `-32768 * gain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SampleFormat {
    /// Signed 16-bit integer (`<i2`): Neuropixels, SpikeGLX, Open Ephys, most probes.
    I16,
    /// Unsigned 16-bit integer (`<u2`): Intan amplifier data (offset-binary).
    U16,
    /// Signed 32-bit integer (`<i4`).
    I32,
    /// IEEE 754 32-bit float (`<f4`).
    F32,
}

impl SampleFormat {
    /// Every format, in declaration order.
    pub const ALL: [SampleFormat; 4] = [Self::I16, Self::U16, Self::I32, Self::F32];

    /// Bytes per stored sample.
    #[must_use]
    pub const fn size(self) -> usize {
        match self {
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::F32 => 4,
        }
    }

    /// The numpy dtype string (`"<i2"`, `"<u2"`, `"<i4"`, `"<f4"`).
    #[must_use]
    pub const fn numpy_dtype(self) -> &'static str {
        match self {
            Self::I16 => "<i2",
            Self::U16 => "<u2",
            Self::I32 => "<i4",
            Self::F32 => "<f4",
        }
    }

    /// The short name (`"int16"`, `"uint16"`, `"int32"`, `"float32"`), as numpy spells it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::I16 => "int16",
            Self::U16 => "uint16",
            Self::I32 => "int32",
            Self::F32 => "float32",
        }
    }

    /// Decodes one stored little-endian sample (exactly [`size`](Self::size) bytes) to `f64`.
    ///
    /// # Panics
    ///
    /// If `bytes` is not [`size`](Self::size) long.
    #[must_use]
    pub fn decode(self, bytes: &[u8]) -> f64 {
        match self {
            Self::I16 => f64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
            Self::U16 => f64::from(u16::from_le_bytes([bytes[0], bytes[1]])),
            Self::I32 => f64::from(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
            Self::F32 => f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        }
    }

    /// Scales stored little-endian samples into `out`: `out[i] = (stored[i] * gain + offset) as
    /// f32`, computed in `f64` and rounded once.
    ///
    /// This is the one definition of "scaled value" in dspk: every reader's `read` goes through
    /// it, so `read` equals `read_stored * gain + offset` bit for bit.
    ///
    /// # Panics
    ///
    /// If `stored.len() != out.len() * self.size()`.
    pub fn scale_into(self, stored: &[u8], gain: f64, offset: f64, out: &mut [f32]) {
        assert_eq!(
            stored.len(),
            out.len() * self.size(),
            "stored bytes and output values disagree"
        );
        for (value, bytes) in out.iter_mut().zip(stored.chunks_exact(self.size())) {
            *value = scale(self.decode(bytes), gain, offset);
        }
    }
}

/// The scaled value of one stored value: `(stored * gain + offset) as f32`, computed in `f64`
/// and rounded once. The one definition of "scaled value" in dspk (see
/// [`SampleFormat::scale_into`]).
#[must_use]
pub fn scale(stored: f64, gain: f64, offset: f64) -> f32 {
    (stored * gain + offset) as f32
}

impl fmt::Display for SampleFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that is one of the [`SampleFormat`]s, for building recordings from typed samples.
pub trait StoredSample: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The format of this type.
    const FORMAT: SampleFormat;
    /// Appends this sample's little-endian bytes.
    fn extend_le(self, out: &mut Vec<u8>);
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! stored_sample {
    ($($ty:ty => $format:ident),*) => {$(
        impl sealed::Sealed for $ty {}
        impl StoredSample for $ty {
            const FORMAT: SampleFormat = SampleFormat::$format;
            fn extend_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
stored_sample!(i16 => I16, u16 => U16, i32 => I32, f32 => F32);
