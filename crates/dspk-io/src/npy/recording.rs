//! Two-dimensional `.npy` arrays `[samples, channels]` read as recordings, straight from the file.

use std::path::Path;

use dspk_core::{ChannelInfo, SampleRate};

use super::array::read_header;
use crate::file::DataFile;
use crate::raw::{RawRecording, RawSpec, SampleOrder};
use crate::{Error, Result};

/// Opens a two-dimensional `.npy` array of shape `[samples, channels]` as a recording at
/// `sample_rate` (a `.npy` file has no rate), reading samples from the file on demand.
///
/// C order is read as interleaved, Fortran order as channel-major; either byte order. Channels
/// are named `"0"`, `"1"`, ... with gain 1, offset 0 and no unit.
///
/// # Errors
///
/// [`Error::Io`]; the header's errors ([`NpyHeader::parse`](super::NpyHeader::parse));
/// [`Error::Invalid`] if the array is not two-dimensional, has no channels, or its dtype is not
/// one of the recording sample types (int16, uint16, int32, float32);
/// [`Error::Truncated`] if the file is shorter than the header says.
pub fn open_npy_recording(path: impl AsRef<Path>, sample_rate: SampleRate) -> Result<RawRecording> {
    let path = path.as_ref();
    let file = DataFile::open(path)?;
    let header = read_header(&file)?;
    let [num_samples, num_channels] = header.shape[..] else {
        return Err(Error::invalid(
            path,
            format!(
                "a recording needs a two-dimensional array [samples, channels], got shape {:?}",
                header.shape
            ),
        ));
    };
    let format = header.dtype.sample_format().ok_or_else(|| {
        Error::invalid(
            path,
            format!(
                "dtype `{}` is not a recording sample type (int16, uint16, int32, float32)",
                header.dtype
            ),
        )
    })?;
    // The file's length bounds the channel count once `RawRecording::new` has checked it; the
    // header alone must not size an allocation.
    let num_channels = usize::try_from(num_channels)
        .ok()
        .filter(|&c| c > 0 && (c as u64) <= file.len())
        .ok_or_else(|| {
            Error::invalid(
                path,
                format!("a recording of {num_channels} channels does not fit this file"),
            )
        })?;
    let channels = (0..num_channels)
        .map(|c| ChannelInfo::new(c.to_string(), 1.0, 0.0, ""))
        .collect();
    RawRecording::new(
        path,
        RawSpec {
            channels,
            sample_rate,
            format,
            byte_order: header.dtype.order,
            order: if header.fortran_order {
                SampleOrder::ChannelMajor
            } else {
                SampleOrder::Interleaved
            },
            header_bytes: header.data_offset,
            num_samples: Some(num_samples),
        },
    )
}
