//! The protocol's messages (protobuf, through prost; the structs are written here, so no
//! `protoc` is needed) and their checked conversions to and from dspk's types.
//!
//! Every message on every stream is a [`Message`], one of the [`Body`] kinds, framed by a
//! length prefix ([`crate::framing`]). Which kinds may come on which stream:
//! - control stream (opened by the client): [`Hello`] -> [`Header`] (or [`ErrorMessage`]),
//!   then [`Subscribe`] as often as the client wants to (re)start the signal;
//! - signal stream (opened by the server after each subscribe): [`Start`] at once, then
//!   [`SignalFrame`]s, then [`End`] when a recording without loop ends;
//! - request streams (one per request, opened by the client): [`ReadRequest`] ->
//!   [`ReadAnswer`], or [`ViewRequest`] -> [`ViewAnswer`], or either -> [`ErrorMessage`].
//!
//! Conversions to dspk's types check what a hostile peer could get wrong and say what and
//! where, never panic.

use std::collections::BTreeMap;

use bytes::Bytes;
use dspk_core::{ChannelInfo, RationalTime, RecordingInfo, SampleFormat, SampleRate};
use dspk_view::{Columns, Envelope, View, ViewSource};

use crate::{Error, Result};

/// One message of the protocol: exactly one of the [`Body`] kinds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Message {
    /// The message's kind and content (`None` only in a malformed message).
    #[prost(oneof = "Body", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11")]
    pub body: Option<Body>,
}

/// The kinds of [`Message`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Body {
    /// Client -> server, first on the control stream.
    #[prost(message, tag = "1")]
    Hello(Hello),
    /// Server -> client, the answer to [`Hello`].
    #[prost(message, tag = "2")]
    Header(Header),
    /// Client -> server on the control stream: (re)start the signal stream.
    #[prost(message, tag = "3")]
    Subscribe(Subscribe),
    /// Server -> client on a signal stream.
    #[prost(message, tag = "4")]
    SignalFrame(SignalFrame),
    /// Server -> client: the recording ended (last message of a signal stream).
    #[prost(message, tag = "5")]
    End(End),
    /// Client -> server on a request stream: stored samples of a range.
    #[prost(message, tag = "6")]
    ReadRequest(ReadRequest),
    /// Server -> client: the samples of a [`ReadRequest`].
    #[prost(message, tag = "7")]
    ReadAnswer(ReadAnswer),
    /// Client -> server on a request stream: the envelope of a view.
    #[prost(message, tag = "8")]
    ViewRequest(ViewRequest),
    /// Server -> client: the envelope of a [`ViewRequest`].
    #[prost(message, tag = "9")]
    ViewAnswer(ViewAnswer),
    /// Either way: a refused request or hello, with a code and a message.
    #[prost(message, tag = "10")]
    Error(ErrorMessage),
    /// Server -> client: first on each signal stream, sent at once (a live source may have
    /// no frame yet).
    #[prost(message, tag = "11")]
    Start(Start),
}

impl Body {
    /// The kind's name, for errors that say what came instead of what was expected.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Hello(_) => "hello",
            Self::Header(_) => "header",
            Self::Subscribe(_) => "subscribe",
            Self::SignalFrame(_) => "signal frame",
            Self::End(_) => "end",
            Self::ReadRequest(_) => "read request",
            Self::ReadAnswer(_) => "read answer",
            Self::ViewRequest(_) => "view request",
            Self::ViewAnswer(_) => "view answer",
            Self::Error(_) => "error",
            Self::Start(_) => "start",
        }
    }
}

impl From<Body> for Message {
    fn from(body: Body) -> Self {
        Self { body: Some(body) }
    }
}

/// The client's first message: which version of the protocol it speaks.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hello {
    /// [`crate::PROTOCOL_VERSION`] of the client.
    #[prost(uint32, tag = "1")]
    pub protocol_version: u32,
}

/// One channel of a [`Header`] (a [`ChannelInfo`]).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Channel {
    /// The channel's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Stored value to physical value: multiplier.
    #[prost(double, tag = "2")]
    pub gain: f64,
    /// Stored value to physical value: added after the gain.
    #[prost(double, tag = "3")]
    pub offset: f64,
    /// The physical unit.
    #[prost(string, tag = "4")]
    pub unit: String,
}

/// The server's answer to [`Hello`]: the whole [`RecordingInfo`], exact, and how samples will
/// be sent.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    /// [`crate::PROTOCOL_VERSION`] of the server.
    #[prost(uint32, tag = "1")]
    pub protocol_version: u32,
    /// The channels, in the order reads index them.
    #[prost(message, repeated, tag = "2")]
    pub channels: Vec<Channel>,
    /// Samples per channel; 0 for a live source.
    #[prost(uint64, tag = "3")]
    pub num_samples: u64,
    /// The sample rate's numerator (Hz = numerator / denominator).
    #[prost(uint64, tag = "4")]
    pub rate_numerator: u64,
    /// The sample rate's denominator.
    #[prost(uint64, tag = "5")]
    pub rate_denominator: u64,
    /// The start time's numerator (seconds = numerator / denominator).
    #[prost(sint64, tag = "6")]
    pub start_numerator: i64,
    /// The start time's denominator.
    #[prost(uint64, tag = "7")]
    pub start_denominator: u64,
    /// The stored format ([`format_code`]).
    #[prost(uint32, tag = "8")]
    pub stored_format: u32,
    /// The source's metadata.
    #[prost(btree_map = "string, string", tag = "9")]
    pub metadata: BTreeMap<String, String>,
    /// `true`: frames and read answers carry the stored words; `false`: the source has no
    /// stored access and they carry scaled `f32` words.
    #[prost(bool, tag = "10")]
    pub stored_access: bool,
    /// Samples per channel in a full signal frame.
    #[prost(uint32, tag = "11")]
    pub frame_samples: u32,
}

/// Client -> server: start (or restart) the signal stream at a sample.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Subscribe {
    /// The first sample wanted (a live source starts at its newest frame at or after it).
    #[prost(uint64, tag = "1")]
    pub from_sample: u64,
}

/// The first message of a signal stream: which subscribe it answers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Start {
    /// The subscribe's first sample.
    #[prost(uint64, tag = "1")]
    pub from_sample: u64,
}

/// A block of samples of every channel, as words of the header's format, channel-major.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SignalFrame {
    /// Counts the frames the server produced for this subscription from 0; a gap means frames
    /// were skipped for a slow client.
    #[prost(uint64, tag = "1")]
    pub sequence: u64,
    /// The recording's index of the frame's first sample.
    #[prost(uint64, tag = "2")]
    pub first_sample: u64,
    /// Samples per channel in this frame.
    #[prost(uint32, tag = "3")]
    pub num_samples: u32,
    /// `channels * num_samples` little-endian words, channel-major.
    #[prost(bytes = "bytes", tag = "4")]
    pub samples: Bytes,
}

/// The recording ended: no frame follows on this signal stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct End {
    /// The sample after the last one sent.
    #[prost(uint64, tag = "1")]
    pub next_sample: u64,
}

/// Client -> server: the stored words of some channels over a sample range.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRequest {
    /// The channels, in the order wanted.
    #[prost(uint32, repeated, tag = "1")]
    pub channels: Vec<u32>,
    /// First sample.
    #[prost(uint64, tag = "2")]
    pub start: u64,
    /// The sample after the last one.
    #[prost(uint64, tag = "3")]
    pub end: u64,
}

/// Server -> client: the words of a [`ReadRequest`], channel-major.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadAnswer {
    /// `channels * (end - start)` little-endian words (stored, or `f32` when the header says
    /// the source has no stored access).
    #[prost(bytes = "bytes", tag = "1")]
    pub samples: Bytes,
}

/// Client -> server: a [`dspk_view::ViewRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct ViewRequest {
    /// The channels, in the order wanted.
    #[prost(uint32, repeated, tag = "1")]
    pub channels: Vec<u32>,
    /// First sample.
    #[prost(uint64, tag = "2")]
    pub start: u64,
    /// The sample after the last one.
    #[prost(uint64, tag = "3")]
    pub end: u64,
    /// Pixel columns.
    #[prost(uint32, tag = "4")]
    pub width: u32,
}

/// Server -> client: a [`View`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct ViewAnswer {
    /// Channels of the envelope.
    #[prost(uint32, tag = "1")]
    pub channels: u32,
    /// First sample the columns cover.
    #[prost(uint64, tag = "2")]
    pub start: u64,
    /// The sample after the last one the columns cover.
    #[prost(uint64, tag = "3")]
    pub end: u64,
    /// Even columns: their count ([`Columns::even`]); 0 for grid columns.
    #[prost(uint32, tag = "4")]
    pub even_width: u32,
    /// Grid columns: the grid step ([`Columns::grid`]); 0 for even columns.
    #[prost(uint64, tag = "5")]
    pub grid_step: u64,
    /// Minima, `[channels, columns]`.
    #[prost(float, repeated, tag = "6")]
    pub min: Vec<f32>,
    /// Maxima, `[channels, columns]`.
    #[prost(float, repeated, tag = "7")]
    pub max: Vec<f32>,
    /// Whether NaN counts follow.
    #[prost(bool, tag = "8")]
    pub has_nan_counts: bool,
    /// NaN samples skipped per column, `[channels, columns]`.
    #[prost(uint32, repeated, tag = "9")]
    pub nan_counts: Vec<u32>,
    /// Where the columns came from: 1 pyramid, 2 raw samples, 3 the samples themselves.
    #[prost(uint32, tag = "10")]
    pub source: u32,
    /// Pyramid answers: the level.
    #[prost(uint32, tag = "11")]
    pub level: u32,
    /// Pyramid answers: samples per bucket of the level.
    #[prost(uint64, tag = "12")]
    pub bucket: u64,
    /// `false` where part of a pyramid was not built yet.
    #[prost(bool, tag = "13")]
    pub complete: bool,
}

/// A refused hello or request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorMessage {
    /// What kind of refusal ([`crate::code`]).
    #[prost(uint32, tag = "1")]
    pub code: u32,
    /// What was wrong, in words.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// The wire code of a stored format (1 int16, 2 uint16, 3 int32, 4 float32).
///
/// # Errors
///
/// [`Error::Invalid`] for a format this protocol version does not know.
pub fn format_code(format: SampleFormat) -> Result<u32> {
    match format {
        SampleFormat::I16 => Ok(1),
        SampleFormat::U16 => Ok(2),
        SampleFormat::I32 => Ok(3),
        SampleFormat::F32 => Ok(4),
        other => Err(Error::invalid(
            "header: stored format",
            format!(
                "{other} has no code in protocol version {}",
                crate::PROTOCOL_VERSION
            ),
        )),
    }
}

/// The stored format of a wire code ([`format_code`]'s inverse).
///
/// # Errors
///
/// [`Error::Malformed`] for an unknown code.
pub fn format_of_code(code: u32) -> Result<SampleFormat> {
    match code {
        1 => Ok(SampleFormat::I16),
        2 => Ok(SampleFormat::U16),
        3 => Ok(SampleFormat::I32),
        4 => Ok(SampleFormat::F32),
        other => Err(Error::malformed(
            "header",
            format!("unknown stored format code {other} (1 to 4 known)"),
        )),
    }
}

impl Header {
    /// The header of a recording: its info exactly, whether words are stored or scaled, and
    /// the samples per frame.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a start time whose numerator or denominator does not fit 64
    /// bits, or a stored format without a code.
    pub fn from_info(
        info: &RecordingInfo,
        stored_access: bool,
        frame_samples: u32,
    ) -> Result<Self> {
        let start = info.start_time;
        let too_large = || {
            Error::invalid(
                "header: start time",
                format!("{start} does not fit a 64-bit numerator and denominator"),
            )
        };
        Ok(Self {
            protocol_version: crate::PROTOCOL_VERSION,
            channels: info
                .channels
                .iter()
                .map(|c| Channel {
                    name: c.name.clone(),
                    gain: c.gain,
                    offset: c.offset,
                    unit: c.unit.clone(),
                })
                .collect(),
            num_samples: info.num_samples,
            rate_numerator: info.sample_rate.numerator(),
            rate_denominator: info.sample_rate.denominator(),
            start_numerator: i64::try_from(start.numerator()).map_err(|_| too_large())?,
            start_denominator: u64::try_from(start.denominator()).map_err(|_| too_large())?,
            stored_format: format_code(info.stored_format)?,
            metadata: info.metadata.clone(),
            stored_access,
            frame_samples,
        })
    }

    /// The recording's info, checked: at least one channel, finite gains and offsets, a rate
    /// and a start time with non-zero denominators (and a non-zero rate), a known format, a
    /// frame of at least one sample.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] saying which field is wrong.
    pub fn to_info(&self) -> Result<RecordingInfo> {
        let bad = |e: dspk_core::Error| Error::malformed("header", e.to_string());
        let sample_rate =
            SampleRate::new(self.rate_numerator, self.rate_denominator).map_err(bad)?;
        let channels = self
            .channels
            .iter()
            .map(|c| ChannelInfo::new(c.name.clone(), c.gain, c.offset, c.unit.clone()))
            .collect();
        let format = format_of_code(self.stored_format)?;
        let mut info =
            RecordingInfo::new(channels, self.num_samples, sample_rate, format).map_err(bad)?;
        info.start_time =
            RationalTime::new(self.start_numerator, self.start_denominator).map_err(bad)?;
        info.metadata = self.metadata.clone();
        if self.frame_samples == 0 {
            return Err(Error::malformed("header", "frames of 0 samples"));
        }
        Ok(info)
    }

    /// Bytes per word of frames and read answers: the stored format's size, or 4 (`f32`)
    /// without stored access.
    ///
    /// # Errors
    ///
    /// As [`format_of_code`].
    pub fn word_size(&self) -> Result<usize> {
        if self.stored_access {
            Ok(format_of_code(self.stored_format)?.size())
        } else {
            Ok(4)
        }
    }
}

impl SignalFrame {
    /// Checks the frame against the header: at least one sample, and exactly
    /// `channels * num_samples * word_size` bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] with the lengths.
    pub fn check(&self, channels: usize, word_size: usize) -> Result<()> {
        if self.num_samples == 0 {
            return Err(Error::malformed(
                "signal frame",
                format!("frame {} has no samples", self.sequence),
            ));
        }
        let expected = (self.num_samples as u64)
            .checked_mul(channels as u64)
            .and_then(|n| n.checked_mul(word_size as u64));
        if expected != Some(self.samples.len() as u64) {
            return Err(Error::malformed(
                "signal frame",
                format!(
                    "frame {} holds {} bytes; {channels} channels x {} samples of {word_size} \
                     bytes need {}",
                    self.sequence,
                    self.samples.len(),
                    self.num_samples,
                    expected.map_or_else(|| "more than u64".into(), |n| n.to_string())
                ),
            ));
        }
        self.first_sample
            .checked_add(u64::from(self.num_samples))
            .ok_or_else(|| {
                Error::malformed(
                    "signal frame",
                    format!(
                        "frame {} starts at {}: past u64",
                        self.sequence, self.first_sample
                    ),
                )
            })?;
        Ok(())
    }
}

impl ViewRequest {
    /// The message of a view request.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a channel index or width over 32 bits.
    pub fn from_request(request: &dspk_view::ViewRequest) -> Result<Self> {
        Ok(Self {
            channels: channels_to_wire(&request.channels)?,
            start: request.samples.start,
            end: request.samples.end,
            width: u32::try_from(request.width)
                .map_err(|_| Error::invalid("view: width", format!("{}", request.width)))?,
        })
    }

    /// The view request (to be checked against the recording with
    /// [`dspk_view::ViewRequest::check`]).
    #[must_use]
    pub fn to_request(&self) -> dspk_view::ViewRequest {
        dspk_view::ViewRequest {
            channels: self.channels.iter().map(|&c| c as usize).collect(),
            samples: self.start..self.end,
            width: self.width as usize,
        }
    }
}

/// Channel indices as 32-bit wire values.
///
/// # Errors
///
/// [`Error::Invalid`] for an index over `u32::MAX`.
pub(crate) fn channels_to_wire(channels: &[usize]) -> Result<Vec<u32>> {
    channels
        .iter()
        .map(|&c| u32::try_from(c).map_err(|_| Error::invalid("channels", format!("index {c}"))))
        .collect()
}

impl ViewAnswer {
    /// The message of a view.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a channel count or column count over 32 bits.
    pub fn from_view(view: &View) -> Result<Self> {
        let envelope = &view.envelope;
        let columns = envelope.columns();
        let (even_width, grid_step) = match columns.grid_step() {
            Some(step) => (0, step),
            None => (
                u32::try_from(columns.len())
                    .map_err(|_| Error::invalid("view: columns", columns.len().to_string()))?,
                0,
            ),
        };
        let (source, level, bucket) = match view.source {
            ViewSource::Pyramid { level, bucket } => (
                1,
                u32::try_from(level)
                    .map_err(|_| Error::invalid("view: level", level.to_string()))?,
                bucket,
            ),
            ViewSource::Raw => (2, 0, 0),
            ViewSource::Samples => (3, 0, 0),
        };
        Ok(Self {
            channels: u32::try_from(envelope.channels())
                .map_err(|_| Error::invalid("view: channels", envelope.channels().to_string()))?,
            start: columns.samples().start,
            end: columns.samples().end,
            even_width,
            grid_step,
            min: envelope.min().to_vec(),
            max: envelope.max().to_vec(),
            has_nan_counts: envelope.nan_counts().is_some(),
            nan_counts: envelope
                .nan_counts()
                .map(<[u32]>::to_vec)
                .unwrap_or_default(),
            source,
            level,
            bucket,
            complete: view.complete,
        })
    }

    /// The view, checked: `channels` channels (what was asked), columns that make sense, tables
    /// of `channels * columns` values, a known source.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] saying what disagrees.
    pub fn to_view(self, channels: usize) -> Result<View> {
        let bad = |reason: String| Error::malformed("view answer", reason);
        if self.channels as usize != channels {
            return Err(bad(format!(
                "{} channels for a request of {channels}",
                self.channels
            )));
        }
        let range = self.start..self.end;
        let columns = match (self.even_width, self.grid_step) {
            (0, 0) => return Err(bad("neither an even width nor a grid step".into())),
            (width, 0) => Columns::even(range, width as usize),
            (0, step) => Columns::grid(range, step),
            (width, step) => {
                return Err(bad(format!(
                    "both an even width ({width}) and a grid step ({step})"
                )));
            }
        }
        .map_err(|e| bad(e.to_string()))?;
        let source = match self.source {
            1 => ViewSource::Pyramid {
                level: self.level as usize,
                bucket: self.bucket,
            },
            2 => ViewSource::Raw,
            3 => ViewSource::Samples,
            other => return Err(bad(format!("unknown source code {other} (1 to 3 known)"))),
        };
        if !self.has_nan_counts && !self.nan_counts.is_empty() {
            return Err(bad(
                "NaN counts without the flag that says they follow".into()
            ));
        }
        let nan = self.has_nan_counts.then_some(self.nan_counts);
        let envelope = Envelope::from_parts(channels, columns, self.min, self.max, nan)
            .map_err(|e| bad(e.to_string()))?;
        Ok(View {
            envelope,
            source,
            complete: self.complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dspk_view::Order;

    /// A change to a good message, and what the error must say.
    type Case<T> = (&'static str, Box<dyn Fn(&mut T)>);

    fn info() -> RecordingInfo {
        let channels = (0..3)
            .map(|c| ChannelInfo::new(format!("AP{c}"), 2.34375 + c as f64, -1.5 * c as f64, "uV"))
            .collect();
        let rate = SampleRate::new(750_003, 25).unwrap();
        let mut info = RecordingInfo::new(channels, 123_456, rate, SampleFormat::I16).unwrap();
        info.start_time = RationalTime::new(-7, 3).unwrap();
        info.metadata.insert("probe".into(), "NP1010".into());
        info
    }

    #[test]
    fn headers_round_trip_exactly() {
        let info = info();
        let header = Header::from_info(&info, true, 1024).unwrap();
        assert_eq!(header.to_info().unwrap(), info);
        assert_eq!(header.word_size().unwrap(), 2);
        let scaled = Header::from_info(&info, false, 1024).unwrap();
        assert_eq!(scaled.word_size().unwrap(), 4);
    }

    #[test]
    fn bad_headers_say_what_is_wrong() {
        let good = Header::from_info(&info(), true, 1024).unwrap();
        let cases: Vec<Case<Header>> = vec![
            ("at least one channel", Box::new(|h| h.channels.clear())),
            ("finite", Box::new(|h| h.channels[1].gain = f64::NAN)),
            ("finite", Box::new(|h| h.channels[2].offset = f64::INFINITY)),
            (
                "positive numerator and denominator",
                Box::new(|h| h.rate_denominator = 0),
            ),
            (
                "positive numerator and denominator",
                Box::new(|h| h.rate_numerator = 0),
            ),
            (
                "positive denominator",
                Box::new(|h| h.start_denominator = 0),
            ),
            (
                "unknown stored format code 9",
                Box::new(|h| h.stored_format = 9),
            ),
            ("frames of 0 samples", Box::new(|h| h.frame_samples = 0)),
        ];
        for (expected, change) in cases {
            let mut header = good.clone();
            change(&mut header);
            let err = header.to_info().unwrap_err();
            assert!(matches!(err, Error::Malformed { .. }), "{err}");
            assert!(
                err.to_string().contains(expected),
                "{err} lacks `{expected}`"
            );
        }
    }

    #[test]
    fn frames_are_checked_against_the_header() {
        let frame = SignalFrame {
            sequence: 3,
            first_sample: 10,
            num_samples: 5,
            samples: Bytes::from(vec![0u8; 3 * 5 * 2]),
        };
        frame.check(3, 2).unwrap();
        assert!(
            frame
                .check(4, 2)
                .unwrap_err()
                .to_string()
                .contains("30 bytes")
        );
        let empty = SignalFrame {
            num_samples: 0,
            samples: Bytes::new(),
            ..frame.clone()
        };
        assert!(empty.check(3, 2).is_err());
        let past = SignalFrame {
            first_sample: u64::MAX - 2,
            ..frame
        };
        assert!(
            past.check(3, 2)
                .unwrap_err()
                .to_string()
                .contains("past u64")
        );
    }

    fn view(columns: Columns, nan: bool, source: ViewSource) -> View {
        let channels = 2;
        let samples = columns.samples();
        let n = (samples.end - samples.start) as usize;
        let mut values: Vec<f32> = (0..channels * n)
            .map(|i| ((i * 7919) % 101) as f32)
            .collect();
        values[3] = f32::NAN;
        let mut envelope =
            Envelope::from_samples(&values, Order::ChannelMajor, channels, columns.clone())
                .unwrap();
        if !nan {
            envelope = Envelope::from_parts(
                channels,
                columns,
                envelope.min().to_vec(),
                envelope.max().to_vec(),
                None,
            )
            .unwrap();
        }
        View {
            envelope,
            source,
            complete: nan,
        }
    }

    #[test]
    fn views_round_trip_exactly() {
        for view in [
            view(Columns::even(5..1006, 17).unwrap(), true, ViewSource::Raw),
            view(
                Columns::grid(3..1000, 64).unwrap(),
                false,
                ViewSource::Pyramid {
                    level: 2,
                    bucket: 16,
                },
            ),
            view(Columns::grid(0..9, 1).unwrap(), true, ViewSource::Samples),
        ] {
            let answer = ViewAnswer::from_view(&view).unwrap();
            let back = answer.clone().to_view(2).unwrap();
            assert_eq!(back.envelope.min().len(), view.envelope.min().len());
            // Bit for bit (NaN-free tables here, but compare bits anyway).
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(back.envelope.min()), bits(view.envelope.min()));
            assert_eq!(bits(back.envelope.max()), bits(view.envelope.max()));
            assert_eq!(back.envelope.nan_counts(), view.envelope.nan_counts());
            assert_eq!(back.envelope.columns(), view.envelope.columns());
            assert_eq!((back.source, back.complete), (view.source, view.complete));
        }
    }

    #[test]
    fn bad_view_answers_say_what_is_wrong() {
        let good = ViewAnswer::from_view(&view(
            Columns::even(0..100, 10).unwrap(),
            true,
            ViewSource::Raw,
        ))
        .unwrap();
        let cases: Vec<Case<ViewAnswer>> = vec![
            (
                "3 channels for a request of 2",
                Box::new(|a| a.channels = 3),
            ),
            ("neither", Box::new(|a| a.even_width = 0)),
            ("both", Box::new(|a| a.grid_step = 4)),
            (
                "expected 20 values, got 19",
                Box::new(|a| {
                    a.min.pop();
                }),
            ),
            ("expected 20 values, got 21", Box::new(|a| a.max.push(1.0))),
            (
                "NaN counts",
                Box::new(|a| {
                    a.nan_counts.pop();
                }),
            ),
            ("without the flag", Box::new(|a| a.has_nan_counts = false)),
            ("unknown source code 0", Box::new(|a| a.source = 0)),
            ("columns", Box::new(|a| a.end = a.start)),
            ("columns", Box::new(|a| a.even_width = 1000)),
        ];
        for (expected, change) in cases {
            let mut answer = good.clone();
            change(&mut answer);
            let err = answer.to_view(2).unwrap_err();
            assert!(matches!(err, Error::Malformed { .. }), "{err}");
            assert!(
                err.to_string().contains(expected),
                "{err} lacks `{expected}`"
            );
        }
    }

    #[test]
    fn view_requests_round_trip() {
        let request = dspk_view::ViewRequest {
            channels: vec![2, 0, 1],
            samples: 17..9000,
            width: 640,
        };
        assert_eq!(
            ViewRequest::from_request(&request).unwrap().to_request(),
            request
        );
    }
}
