//! Message framing: each [`Message`] is sent as a 4-byte little-endian length followed by that
//! many bytes of protobuf. The receiver checks the length against its own limit before it
//! allocates anything, and reads the rest of a started message within a time limit.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::messages::Message;
use crate::{Error, Result};

/// Bytes of the length prefix.
pub const PREFIX_BYTES: usize = 4;

/// What a receiver accepts on one stream: the largest message, and how long it waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// The largest message body accepted, in bytes (a larger prefix is refused before any
    /// allocation).
    pub max_message: usize,
    /// How long to wait for the first byte of the next message (`None`: as long as the
    /// connection lives).
    pub idle: Option<Duration>,
    /// How long the rest of a message may take once its first byte arrived.
    pub body: Duration,
}

/// The framed bytes of `message`: its length as a little-endian `u32`, then its protobuf
/// encoding.
///
/// # Errors
///
/// [`Error::OverLimit`] for a message longer than `u32::MAX` bytes.
pub fn encode(message: &Message) -> Result<Bytes> {
    let len = message.encoded_len();
    let prefix = u32::try_from(len).map_err(|_| Error::OverLimit {
        what: "message length (bytes)",
        requested: len as u64,
        limit: u64::from(u32::MAX),
    })?;
    let mut out = BytesMut::with_capacity(PREFIX_BYTES + len);
    out.put_u32_le(prefix);
    message
        .encode(&mut out)
        .map_err(|e| Error::invalid("encode", e.to_string()))?;
    Ok(out.freeze())
}

/// The framed bytes of a message whose kind's last field is a large `bytes` field (a signal
/// frame's samples, a read answer's words), in two parts: everything before the payload, and
/// the payload itself, shared, not copied. Their concatenation equals [`encode`] of the same
/// message.
///
/// `kind_tag` is the kind's tag in [`Message`], `head` the kind's message with the payload
/// field empty, `payload_tag` the payload field's tag.
///
/// # Errors
///
/// [`Error::OverLimit`] for a message longer than `u32::MAX` bytes.
pub(crate) fn encode_with_payload(
    kind_tag: u32,
    head: &impl prost::Message,
    payload_tag: u32,
    payload: Bytes,
) -> Result<[Bytes; 2]> {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
    let payload_len = if payload.is_empty() {
        0
    } else {
        key_len(payload_tag) + encoded_len_varint(payload.len() as u64) + payload.len()
    };
    let inner = head.encoded_len() + payload_len;
    let outer = key_len(kind_tag) + encoded_len_varint(inner as u64) + inner;
    let prefix = u32::try_from(outer).map_err(|_| Error::OverLimit {
        what: "message length (bytes)",
        requested: outer as u64,
        limit: u64::from(u32::MAX),
    })?;
    let mut out = BytesMut::with_capacity(PREFIX_BYTES + outer - payload.len());
    out.put_u32_le(prefix);
    encode_key(kind_tag, WireType::LengthDelimited, &mut out);
    encode_varint(inner as u64, &mut out);
    head.encode_raw(&mut out);
    if !payload.is_empty() {
        encode_key(payload_tag, WireType::LengthDelimited, &mut out);
        encode_varint(payload.len() as u64, &mut out);
    }
    Ok([out.freeze(), payload])
}

/// The body length a prefix announces, checked against `max_message`.
///
/// # Errors
///
/// [`Error::OverLimit`] when the length is over `max_message`.
pub fn body_len(prefix: [u8; PREFIX_BYTES], max_message: usize) -> Result<usize> {
    let len = u32::from_le_bytes(prefix);
    if u64::from(len) > max_message as u64 {
        return Err(Error::OverLimit {
            what: "message length (bytes)",
            requested: u64::from(len),
            limit: max_message as u64,
        });
    }
    Ok(len as usize)
}

/// Decodes one message body (without its prefix); `bytes` fields share `body`'s memory.
///
/// # Errors
///
/// [`Error::Malformed`] for bytes that are not a message, or a message without a kind.
pub fn decode(body: Bytes) -> Result<Message> {
    let message = Message::decode(body).map_err(|e| Error::malformed("message", e.to_string()))?;
    if message.body.is_none() {
        return Err(Error::malformed("message", "no kind (an empty message)"));
    }
    Ok(message)
}

/// Splits `bytes` into framed messages and decodes each, checking every prefix against
/// `max_message`.
///
/// # Errors
///
/// As [`body_len`] and [`decode`]; [`Error::Truncated`] when `bytes` ends inside a prefix
/// or a body.
pub fn decode_all(bytes: &[u8], max_message: usize) -> Result<Vec<Message>> {
    let mut messages = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some((prefix, after)) = rest.split_first_chunk::<PREFIX_BYTES>() else {
            return Err(Error::Truncated {
                what: "message length",
                expected: PREFIX_BYTES as u64,
                got: rest.len() as u64,
            });
        };
        let len = body_len(*prefix, max_message)?;
        if after.len() < len {
            return Err(Error::Truncated {
                what: "message",
                expected: len as u64,
                got: after.len() as u64,
            });
        }
        messages.push(decode(Bytes::copy_from_slice(&after[..len]))?);
        rest = &after[len..];
    }
    Ok(messages)
}

/// Reads the next framed message from `reader`: `Ok(None)` when the stream ends cleanly
/// before a message starts.
///
/// The prefix is checked against `limits.max_message` before the body is allocated; the body
/// must arrive within `limits.body` of the message's first byte.
///
/// # Errors
///
/// [`Error::Timeout`], [`Error::Truncated`] for a stream that ends inside a message, as
/// [`body_len`] and [`decode`], [`Error::Connection`] for what the stream reports.
pub async fn read_message<R: AsyncRead + Unpin>(
    reader: &mut R,
    limits: &ReadLimits,
    what: &'static str,
) -> Result<Option<Message>> {
    read_message_pooled(reader, limits, what, None).await
}

/// As [`read_message`], with large bodies read into buffers of `pool` (used again once the
/// message and every `bytes` field taken from it are dropped).
pub(crate) async fn read_message_pooled<R: AsyncRead + Unpin>(
    reader: &mut R,
    limits: &ReadLimits,
    what: &'static str,
    pool: Option<&Arc<BufferPool>>,
) -> Result<Option<Message>> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let first = reader.read(&mut prefix);
    let got = match limits.idle {
        Some(idle) => tokio::time::timeout(idle, first)
            .await
            .map_err(|_| Error::Timeout { what, after: idle })?,
        None => first.await,
    }
    .map_err(|e| stream_error(what, &e))?;
    if got == 0 {
        return Ok(None);
    }
    let rest = async {
        let mut got = got;
        while got < PREFIX_BYTES {
            let n = reader
                .read(&mut prefix[got..])
                .await
                .map_err(|e| stream_error(what, &e))?;
            if n == 0 {
                return Err(Error::Truncated {
                    what,
                    expected: PREFIX_BYTES as u64,
                    got: got as u64,
                });
            }
            got += n;
        }
        let len = body_len(prefix, limits.max_message)?;
        // Filled from the stream as it comes, never zeroed first; reused when pooled.
        let mut body = match pool {
            Some(pool) if len >= POOLED_BODY => pool.take(len),
            _ => Vec::with_capacity(len),
        };
        while body.len() < len {
            let room = len - body.len();
            let n = reader
                .read_buf(&mut (&mut body).limit(room))
                .await
                .map_err(|e| stream_error(what, &e))?;
            if n == 0 {
                return Err(Error::Truncated {
                    what,
                    expected: len as u64,
                    got: body.len() as u64,
                });
            }
        }
        decode(match pool {
            Some(pool) if len >= POOLED_BODY => pool.share(body),
            _ => Bytes::from(body),
        })
    };
    let message = tokio::time::timeout(limits.body, rest)
        .await
        .map_err(|_| Error::Timeout {
            what,
            after: limits.body,
        })??;
    Ok(Some(message))
}

/// Bodies from this size on are read into pooled buffers (smaller ones are not worth keeping).
const POOLED_BODY: usize = 64 << 10;

/// Buffers used again once every [`Bytes`] that shares one is dropped, so a steady stream of
/// large messages or frames allocates (and faults in fresh pages) for none of them. At most
/// `keep` free buffers are held; buffers in use are bounded by whoever holds them (the
/// queues and the transport's windows).
pub(crate) struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
    keep: usize,
}

impl BufferPool {
    /// A pool that holds at most `keep` free buffers.
    pub(crate) fn new(keep: usize) -> Arc<Self> {
        Arc::new(Self {
            free: Mutex::new(Vec::new()),
            keep,
        })
    }

    /// A buffer with room for at least `capacity` bytes: a free one from the pool, emptied, or
    /// a new one.
    pub(crate) fn take(&self, capacity: usize) -> Vec<u8> {
        match self.take_any() {
            Some(mut buffer) if buffer.capacity() >= capacity => {
                buffer.clear();
                buffer
            }
            _ => Vec::with_capacity(capacity),
        }
    }

    /// A buffer of `len` bytes whose contents are left over (zeros where it grew), for a
    /// caller that overwrites every byte: a free one from the pool, or a new one.
    pub(crate) fn take_filled(&self, len: usize) -> Vec<u8> {
        let mut buffer = self.take_any().unwrap_or_default();
        if buffer.capacity() < len {
            return vec![0; len];
        }
        buffer.resize(len, 0);
        buffer
    }

    fn take_any(&self) -> Option<Vec<u8>> {
        self.free.lock().ok().and_then(|mut free| free.pop())
    }

    /// `buffer` as shared bytes; it comes back to the pool (if the pool still exists and has
    /// room) when the last [`Bytes`] that shares it is dropped.
    pub(crate) fn share(self: &Arc<Self>, buffer: Vec<u8>) -> Bytes {
        Bytes::from_owner(Pooled {
            buffer,
            pool: Arc::downgrade(self),
        })
    }
}

/// A pooled buffer while bytes share it.
struct Pooled {
    buffer: Vec<u8>,
    pool: Weak<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade()
            && let Ok(mut free) = pool.free.lock()
            && free.len() < pool.keep
        {
            free.push(std::mem::take(&mut self.buffer));
        }
    }
}

/// An I/O error of a stream, as this crate's error (a connection closed by the peer keeps its
/// code and reason).
fn stream_error(what: &'static str, error: &std::io::Error) -> Error {
    if let Some(read) = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<quinn::ReadError>())
        && let quinn::ReadError::ConnectionLost(lost) = read
    {
        return crate::transport::connection_error(what, "peer", lost);
    }
    Error::Connection {
        peer: what.to_string(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{Body, Hello, SignalFrame};

    fn limits(max_message: usize) -> ReadLimits {
        ReadLimits {
            max_message,
            idle: Some(Duration::from_millis(200)),
            body: Duration::from_millis(200),
        }
    }

    fn frame(n: usize) -> Message {
        Body::SignalFrame(SignalFrame {
            sequence: 7,
            first_sample: 1 << 40,
            num_samples: n as u32,
            samples: Bytes::from((0..n * 2).map(|i| i as u8).collect::<Vec<_>>()),
        })
        .into()
    }

    fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn messages_round_trip_through_frames() {
        let messages = vec![
            Body::Hello(Hello {
                protocol_version: 1,
            })
            .into(),
            frame(1001),
            frame(1),
        ];
        let mut bytes = Vec::new();
        for m in &messages {
            bytes.extend_from_slice(&encode(m).unwrap());
        }
        assert_eq!(decode_all(&bytes, 1 << 20).unwrap(), messages);
        let mut reader = &bytes[..];
        let read = block_on(async {
            let mut out = Vec::new();
            while let Some(m) = read_message(&mut reader, &limits(1 << 20), "test")
                .await
                .unwrap()
            {
                out.push(m);
            }
            out
        });
        assert_eq!(read, messages);
    }

    #[test]
    fn split_encoding_equals_whole_encoding() {
        for n in [0usize, 1, 63, 64, 70_000] {
            let message = frame(n);
            let Some(Body::SignalFrame(signal)) = message.body.clone() else {
                unreachable!()
            };
            let head = SignalFrame {
                samples: Bytes::new(),
                ..signal.clone()
            };
            let [a, b] = encode_with_payload(4, &head, 4, signal.samples.clone()).unwrap();
            assert_eq!(
                [&a[..], &b[..]].concat(),
                &encode(&message).unwrap()[..],
                "{n}"
            );
        }
    }

    #[test]
    fn a_prefix_over_the_limit_is_refused_before_reading_the_body() {
        let bytes = encode(&frame(600)).unwrap();
        let err = decode_all(&bytes, 1000).unwrap_err();
        assert!(matches!(err, Error::OverLimit { limit: 1000, .. }), "{err}");
        // Only the prefix is there: the limit is checked before the body is awaited.
        let mut reader = &u32::MAX.to_le_bytes()[..];
        let err = block_on(read_message(&mut reader, &limits(1000), "test")).unwrap_err();
        assert!(
            matches!(err, Error::OverLimit { requested, .. } if requested == u64::from(u32::MAX)),
            "{err}"
        );
    }

    #[test]
    fn truncated_frames_are_errors_at_every_cut() {
        let bytes = encode(&frame(33)).unwrap();
        for cut in 1..bytes.len() {
            let err = decode_all(&bytes[..cut], 1 << 20).unwrap_err();
            assert!(matches!(err, Error::Truncated { .. }), "cut {cut}: {err}");
            let mut reader = &bytes[..cut];
            let err = block_on(read_message(&mut reader, &limits(1 << 20), "test")).unwrap_err();
            assert!(matches!(err, Error::Truncated { .. }), "cut {cut}: {err}");
        }
    }

    #[test]
    fn malformed_protobuf_and_empty_messages_are_errors() {
        // Field 4 (bytes) claiming 100 bytes with 2 present; a varint that never ends; a
        // wire type 7 (invalid); an empty message (no kind).
        for body in [
            &[0x22, 100, 1, 2][..],
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ][..],
            &[0x0f][..],
            &[][..],
        ] {
            let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
            bytes.extend_from_slice(body);
            let err = decode_all(&bytes, 1 << 20).unwrap_err();
            assert!(matches!(err, Error::Malformed { .. }), "{body:?}: {err}");
        }
    }

    #[test]
    fn mutated_frames_give_messages_or_errors() {
        // Valid framed messages with random bytes overwritten, cut or appended: decoding
        // returns messages or an error, and never allocates past the limit (the limit is
        // small, so a prefix over it must be refused, not honoured).
        let header = crate::messages::Header::from_info(
            &dspk_core::RecordingInfo::new(
                vec![dspk_core::ChannelInfo::new("A", 1.0, 0.0, "uV")],
                10,
                dspk_core::SampleRate::from_hz(1000).unwrap(),
                dspk_core::SampleFormat::I16,
            )
            .unwrap(),
            true,
            64,
        )
        .unwrap();
        let mut base = encode(&Body::Header(header).into()).unwrap().to_vec();
        base.extend_from_slice(&encode(&frame(40)).unwrap());
        let mut rng = dspk_core::rng::SplitMix64::new(0x5eed);
        let (mut ok, mut err) = (0, 0);
        for _ in 0..5000 {
            let mut bytes = base.clone();
            for _ in 0..=rng.below(4) {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = rng.next_u64() as u8;
            }
            if rng.below(4) == 0 {
                bytes.truncate(rng.below(bytes.len() as u64) as usize);
            }
            match decode_all(&bytes, 4096) {
                Ok(messages) => {
                    ok += 1;
                    assert!(messages.iter().all(|m| m.body.is_some()));
                }
                Err(_) => err += 1,
            }
        }
        assert!(ok > 0 && err > 0, "{ok} decoded, {err} refused");
    }

    #[test]
    fn pooled_buffers_come_back_when_every_share_is_dropped() {
        let pool = BufferPool::new(2);
        let mut buffer = pool.take(100);
        assert!(buffer.is_empty() && buffer.capacity() >= 100);
        buffer.extend_from_slice(&[7; 100]);
        let address = buffer.as_ptr();
        let bytes = pool.share(buffer);
        let slice = bytes.slice(10..20);
        drop(bytes);
        // A slice still shares the buffer: nothing came back yet.
        assert!(pool.take_any().is_none());
        assert_eq!(&slice[..], &[7; 10]);
        drop(slice);
        // Back, emptied when taken, the same memory.
        let again = pool.take(50);
        assert_eq!((again.as_ptr(), again.len()), (address, 0));
        // take_filled keeps the old contents (the caller overwrites them) at the new length.
        let mut filled = again;
        filled.extend_from_slice(&[3; 80]);
        drop(pool.share(filled));
        assert_eq!(pool.take_filled(60), vec![3; 60]);
        assert_eq!(
            pool.take_filled(70),
            vec![0; 70],
            "an empty pool gives zeros"
        );
        // A buffer too small is not used; a full pool drops what comes back; a pool dropped
        // first leaves the bytes valid.
        drop(pool.share(vec![1; 10]));
        assert!(pool.take(1000).capacity() >= 1000);
        let shares: Vec<Bytes> = (0..4).map(|_| pool.share(vec![0; 8])).collect();
        drop(shares);
        assert_eq!(pool.free.lock().unwrap().len(), 2);
        let orphan = pool.share(vec![9; 4]);
        drop(pool);
        assert_eq!(&orphan[..], &[9; 4]);
    }

    #[test]
    fn large_messages_read_into_pooled_buffers_equal_unpooled_reads() {
        let messages = [frame(40_000), frame(3), frame(40_001), frame(40_000)];
        let mut bytes = Vec::new();
        for m in &messages {
            bytes.extend_from_slice(&encode(m).unwrap());
        }
        let pool = BufferPool::new(4);
        let mut reader = &bytes[..];
        let read = block_on(async {
            let mut out = Vec::new();
            while let Some(m) =
                read_message_pooled(&mut reader, &limits(1 << 20), "test", Some(&pool))
                    .await
                    .unwrap()
            {
                // Dropped at once but the first: its buffer stays out of the pool.
                if out.is_empty() {
                    out.push(Some(m));
                } else {
                    assert_eq!(Some(&m), messages.get(out.len()));
                    out.push(None);
                }
            }
            out
        });
        assert_eq!(read.len(), 4);
        assert_eq!(read[0].as_ref(), Some(&messages[0]));
        // The three large bodies used two buffers: the first (still held) and one reused.
        assert_eq!(pool.free.lock().unwrap().len(), 1);
    }

    #[test]
    fn a_stalled_body_times_out() {
        // A reader that gives a prefix announcing 10 bytes and then nothing, never ending.
        let (mut tx, mut rx) = tokio::io::duplex(64);
        let err = block_on(async move {
            use tokio::io::AsyncWriteExt;
            tx.write_all(&10u32.to_le_bytes()).await.unwrap();
            let result = read_message(&mut rx, &limits(100), "test").await;
            drop(tx);
            result
        })
        .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }
}
