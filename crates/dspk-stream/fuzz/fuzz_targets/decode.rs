//! The message decoder: any bytes, split into length-prefixed messages (a limit of 1 MiB) and
//! decoded, must give `Ok` or an error, never a panic or an allocation sized by a prefix over
//! the limit; every decoded message is converted to dspk's types (checked), and encodes back
//! to bytes that decode and encode to the same bytes.

#![no_main]

use dspk_core::{ChannelInfo, RecordingInfo, SampleFormat, SampleRate};
use dspk_stream::framing;
use dspk_stream::messages::Body;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(messages) = framing::decode_all(data, 1 << 20) else {
        return;
    };
    let channels = (0..4)
        .map(|c| ChannelInfo::new(format!("CH{c}"), 0.5, 0.0, "uV"))
        .collect();
    let rate = SampleRate::from_hz(30_000).expect("a rate");
    let info = RecordingInfo::new(channels, 1 << 20, rate, SampleFormat::I16).expect("an info");
    for message in messages {
        let framed = framing::encode(&message).expect("a decoded message encodes");
        let again = framing::decode_all(&framed, usize::MAX).expect("and decodes back");
        // Bytes, not values: a NaN gain is not equal to itself.
        let reframed = framing::encode(&again[0]).expect("encodes again");
        assert_eq!(reframed, framed);
        match message
            .body
            .expect("decode refuses messages without a kind")
        {
            Body::Header(header) => {
                if let Ok(back) = header.to_info() {
                    let stored = header.stored_access;
                    let header2 = dspk_stream::messages::Header::from_info(
                        &back,
                        stored,
                        header.frame_samples,
                    )
                    .expect("a checked header encodes");
                    assert_eq!(header2.to_info().expect("and checks"), back);
                }
                let _ = header.word_size();
            }
            Body::SignalFrame(frame) => {
                let _ = frame.check(info.num_channels(), 2);
            }
            Body::ViewRequest(request) => {
                let _ = request.to_request().check(&info);
            }
            Body::ViewAnswer(answer) => {
                let channels = answer.channels as usize % 8;
                let _ = answer.to_view(channels);
            }
            _ => {}
        }
    }
});
