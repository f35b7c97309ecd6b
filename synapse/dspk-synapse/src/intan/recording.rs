//! The amplifier channels of a traditional-format `.rhd` file as a [`RecordingSource`].

use std::path::Path;

use dspk_core::{
    ChannelInfo, RationalTime, ReadRequest, RecordingInfo, RecordingSource, SampleFormat,
    SampleRate,
};
use dspk_io::{DataFile, METADATA_LIMIT};

use super::header::{RhdHeader, RhdSignalType};
use crate::{Error, Result};

/// Microvolts per step of an RHD2000 amplifier sample.
pub const AMPLIFIER_UV_PER_STEP: f64 = 0.195;

/// The stored value of an amplifier's zero volts (offset binary).
const AMPLIFIER_ZERO: f64 = 32768.0;

/// Bytes read first to find the header's end (headers are a few kilobytes); a longer header
/// is read again whole, up to `METADATA_LIMIT`.
const FIRST_READ: u64 = 1 << 20;

/// Bytes of whole data blocks read at once.
const READ_BYTES: u64 = 4 << 20;

/// The amplifier channels of an Intan `.rhd` file in the traditional format (header, then
/// data blocks), read block by block with positional reads.
///
/// Stored values are the file's `u16` offset-binary samples ([`SampleFormat::U16`]); scaled
/// values are µV with gain 0.195 and offset `-32768 * 0.195`, so `read` gives
/// `(v - 32768) * 0.195` as Intan's `read_Intan_RHD2000_file` and neo's `IntanRawIO` do.
/// The start time is the first block's first timestamp over the sample rate (negative for
/// data saved before a trigger). Other signal types (auxiliary, supply, temperature, board ADC,
/// digital) are described by the header but not exposed as recordings.
#[derive(Debug)]
pub struct IntanRecording {
    info: RecordingInfo,
    header: RhdHeader,
    file: DataFile,
    block_bytes: u64,
    num_blocks: u64,
}

impl IntanRecording {
    /// Opens the `.rhd` file at `path` and checks that the data after the header is a whole
    /// number of data blocks.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file cannot be read; the header's errors
    /// ([`RhdHeader::parse`]); [`dspk_io::Error::Invalid`] for a file without saved amplifier channels;
    /// [`dspk_io::Error::Truncated`] for data that ends inside a block; [`dspk_io::Error::Unsupported`] for the
    /// header-only `info.rhd` of the one-file-per-signal-type layout.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = DataFile::open(path)?;
        let header = read_header(&file)?;
        let Some(block_bytes) = header.block_bytes() else {
            return Err(Error::invalid(
                path,
                "the size of one data block overflows 64 bits",
            ));
        };
        let num_amplifiers = header.saved_of(RhdSignalType::Amplifier).count();
        if num_amplifiers == 0 {
            return Err(Error::invalid(
                path,
                "the file has no saved amplifier channels",
            ));
        }
        let data_len = file.len() - header.header_len;
        if data_len == 0 {
            let folder = path.parent().unwrap_or_else(|| Path::new(""));
            if folder.join("amplifier.dat").is_file() {
                return Err(Error::unsupported(
                    path,
                    "the one-file-per-signal-type layout (the header here, samples in \
                     amplifier.dat)",
                ));
            }
        }
        let num_blocks = data_len / block_bytes;
        if data_len % block_bytes != 0 {
            return Err(Error::Io(dspk_io::Error::Truncated {
                path: path.to_path_buf(),
                what: format!(
                    "{} data blocks of {block_bytes} bytes after a {}-byte header (the data \
                     ends {} bytes into block {num_blocks})",
                    num_blocks + 1,
                    header.header_len,
                    data_len % block_bytes
                ),
                needed: header.header_len + (num_blocks + 1) * block_bytes,
                actual: file.len(),
            }));
        }
        let n = header.samples_per_block() as u64;
        let num_samples = num_blocks * n;
        let rate = sample_rate(path, header.sample_rate)?;
        let channels = header
            .saved_of(RhdSignalType::Amplifier)
            .map(|c| {
                ChannelInfo::new(
                    &c.custom_name,
                    AMPLIFIER_UV_PER_STEP,
                    -AMPLIFIER_ZERO * AMPLIFIER_UV_PER_STEP,
                    "uV",
                )
            })
            .collect();
        let mut info = RecordingInfo::new(channels, num_samples, rate, SampleFormat::U16)
            .map_err(|e| Error::core(path, e))?;
        if num_blocks > 0 {
            let mut first = [0u8; 4];
            file.read_exact_at(header.header_len, &mut first)?;
            // Timestamps are int32 from version 1.2 on, uint32 before.
            let timestamp = if (header.version_major, header.version_minor) >= (1, 2) {
                i64::from(i32::from_le_bytes(first))
            } else {
                i64::from(u32::from_le_bytes(first))
            };
            info.start_time = start_time(path, timestamp, rate)?;
            info.metadata
                .insert("first_timestamp".into(), timestamp.to_string());
        }
        let metadata = [
            ("format", "intan-rhd".to_string()),
            (
                "version",
                format!("{}.{}", header.version_major, header.version_minor),
            ),
            ("note1", header.notes[0].clone()),
            ("note2", header.notes[1].clone()),
            ("note3", header.notes[2].clone()),
            ("reference_channel", header.reference_channel.clone()),
            (
                "notch_filter_hz",
                header
                    .notch_filter_hz
                    .map_or("none".into(), |f| f.to_string()),
            ),
            (
                "lower_bandwidth_hz",
                header.actual_lower_bandwidth_hz.to_string(),
            ),
            (
                "upper_bandwidth_hz",
                header.actual_upper_bandwidth_hz.to_string(),
            ),
            (
                "dsp_cutoff_hz",
                if header.dsp_enabled {
                    header.actual_dsp_cutoff_hz.to_string()
                } else {
                    "off".into()
                },
            ),
        ];
        info.metadata
            .extend(metadata.into_iter().map(|(k, v)| (k.to_string(), v)));
        Ok(Self {
            info,
            header,
            file,
            block_bytes,
            num_blocks,
        })
    }

    /// The parsed header.
    #[must_use]
    pub fn header(&self) -> &RhdHeader {
        &self.header
    }

    /// The number of data blocks in the file.
    #[must_use]
    pub fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    /// The `.rhd` file.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Writes the stored little-endian `u16` values of `channels` over `len` samples from
    /// `start` into `out` (channel-major). Arguments are checked.
    fn stored_into(
        &self,
        channels: &[usize],
        start: u64,
        len: usize,
        out: &mut [u8],
    ) -> Result<()> {
        if len == 0 || channels.is_empty() {
            return Ok(());
        }
        let n = self.header.samples_per_block() as u64;
        let first_block = start / n;
        let last_block = (start + len as u64 - 1) / n;
        let blocks_per_read = (READ_BYTES / self.block_bytes).max(1);
        // One block is at most the file's data length (checked at open), so this is bounded
        // by the file and by READ_BYTES.
        let chunk_blocks = blocks_per_read.min(last_block - first_block + 1);
        let mut scratch = vec![0u8; (chunk_blocks * self.block_bytes) as usize];
        let run = len * 2;
        let mut block = first_block;
        while block <= last_block {
            let blocks = chunk_blocks.min(last_block - block + 1);
            let bytes = &mut scratch[..(blocks * self.block_bytes) as usize];
            let offset = self.header.header_len + block * self.block_bytes;
            self.file.read_exact_at(offset, bytes)?;
            for (b, block_data) in bytes.chunks_exact(self.block_bytes as usize).enumerate() {
                let block_start = (block + b as u64) * n;
                // The part of this block inside the request.
                let from = start.max(block_start);
                let to = (start + len as u64).min(block_start + n);
                let in_block = (from - block_start) as usize..(to - block_start) as usize;
                let in_out = (from - start) as usize * 2..(to - start) as usize * 2;
                for (&channel, out) in channels.iter().zip(out.chunks_exact_mut(run)) {
                    // Timestamps first, then each amplifier channel's n samples.
                    let base = 4 * n as usize + channel * 2 * n as usize;
                    out[in_out.clone()].copy_from_slice(
                        &block_data[base + in_block.start * 2..base + in_block.end * 2],
                    );
                }
            }
            block += blocks;
        }
        Ok(())
    }
}

/// Reads the header of `file`: the first megabyte, or, for a longer header, up to
/// `METADATA_LIMIT` bytes.
fn read_header(file: &DataFile) -> Result<RhdHeader> {
    let path = file.path();
    let mut limit = file.len().min(FIRST_READ);
    loop {
        // Bounded by the file's length and METADATA_LIMIT.
        let mut bytes = vec![0u8; limit as usize];
        file.read_exact_at(0, &mut bytes)?;
        match RhdHeader::parse(&bytes, path) {
            Err(Error::Io(dspk_io::Error::Truncated { .. }))
                if limit < file.len() && limit < METADATA_LIMIT =>
            {
                limit = file.len().min(METADATA_LIMIT);
            }
            Err(Error::Io(dspk_io::Error::Truncated { needed, .. })) if limit < file.len() => {
                return Err(Error::invalid(
                    path,
                    format!(
                        "the .rhd header is longer than {METADATA_LIMIT} bytes (it needs at \
                         least {needed})"
                    ),
                ));
            }
            other => return other,
        }
    }
}

/// The exact rate of a stored `single`: its shortest decimal text (`30000`, `3333.3333`).
fn sample_rate(path: &Path, rate: f32) -> Result<SampleRate> {
    let text = format!("{rate}");
    text.parse().map_err(|_| {
        Error::invalid(
            path,
            format!("sample rate {text} is not a usable rate in Hz"),
        )
    })
}

/// `timestamp / rate` seconds, exactly.
fn start_time(path: &Path, timestamp: i64, rate: SampleRate) -> Result<RationalTime> {
    let time = i64::try_from(rate.denominator())
        .ok()
        .and_then(|den| timestamp.checked_mul(den))
        .map(|num| RationalTime::new(num, rate.numerator()));
    match time {
        Some(Ok(time)) => Ok(time),
        _ => Err(Error::invalid(
            path,
            format!("start time of timestamp {timestamp} at {rate} does not fit a 64-bit fraction"),
        )),
    }
}

impl RecordingSource for IntanRecording {
    fn info(&self) -> &RecordingInfo {
        &self.info
    }

    fn fill_stored(&self, request: &ReadRequest<'_>, out: &mut [u8]) -> dspk_core::Result<()> {
        Ok(self.stored_into(
            request.channels(),
            request.samples().start,
            request.samples_per_channel(),
            out,
        )?)
    }

    fn fill_scaled(&self, request: &ReadRequest<'_>, out: &mut [f32]) -> dspk_core::Result<()> {
        let mut stored = vec![0u8; request.num_values() * 2];
        self.fill_stored(request, &mut stored)?;
        let n = request.samples_per_channel();
        for (k, &channel) in request.channels().iter().enumerate() {
            let info = &self.info.channels[channel];
            SampleFormat::U16.scale_into(
                &stored[k * n * 2..(k + 1) * n * 2],
                info.gain,
                info.offset,
                &mut out[k * n..(k + 1) * n],
            );
        }
        Ok(())
    }

    fn can_read_stored(&self) -> bool {
        true
    }
}

/// Whether the file at `path` starts with the `.rhd` magic number (reads four bytes).
pub(super) fn has_magic(path: &Path) -> bool {
    let Ok(file) = DataFile::open(path) else {
        return false;
    };
    let mut magic = [0u8; 4];
    file.len() >= 4
        && file.read_exact_at(0, &mut magic).is_ok()
        && u32::from_le_bytes(magic) == super::header::RHD_MAGIC
}
