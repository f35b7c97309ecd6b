//! Helpers shared by the loopback tests: a recording with seeded random samples, a server on
//! a free loopback port with a self-signed certificate, sessions that trust it.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dspk_core::rng::SplitMix64;
use dspk_core::{ChannelInfo, MemoryRecording, RationalTime, RecordingSource, SampleRate};
use dspk_stream::{
    ClientTls, Identity, Server, ServerOptions, ServerTls, Session, SessionOptions, Trust,
};
use dspk_view::LocalBackend;

/// `channels` channels of `samples` int16 samples (seeded random, full range), an exact
/// non-integer rate, a start time and metadata.
pub fn recording(channels: usize, samples: usize, seed: u64) -> MemoryRecording {
    let mut rng = SplitMix64::new(seed);
    let values: Vec<i16> = (0..channels * samples)
        .map(|_| rng.next_u64() as i16)
        .collect();
    let infos = (0..channels)
        .map(|c| {
            ChannelInfo::new(
                format!("AP{c}"),
                0.195 * (c + 1) as f64,
                -3.25 * c as f64,
                "uV",
            )
        })
        .collect();
    let rate = SampleRate::new(750_003, 25).unwrap(); // 30000.12 Hz
    let mut recording = MemoryRecording::from_samples(infos, rate, &values).unwrap();
    recording.info_mut().start_time = RationalTime::new(12_345, 7).unwrap();
    recording
        .info_mut()
        .metadata
        .insert("probe".into(), "NP1010 #42".into());
    recording
}

/// A self-signed server identity for `localhost`.
pub fn identity() -> Identity {
    Identity::self_signed(&["localhost"]).unwrap()
}

/// Options that keep the tests fast: short timeouts, small frames.
pub fn options() -> ServerOptions {
    ServerOptions {
        frame_bytes: 16 << 10,
        stall_timeout: Duration::from_secs(2),
        handshake_timeout: Duration::from_secs(2),
        body_timeout: Duration::from_secs(2),
        ..ServerOptions::default()
    }
}

/// A server of `source` on a free loopback port.
pub fn serve(
    source: Arc<dyn RecordingSource>,
    identity: &Identity,
    options: ServerOptions,
) -> (Server, SocketAddr) {
    let tls = ServerTls {
        identity: identity.clone(),
        client_authorities: None,
    };
    let server = Server::bind(
        "127.0.0.1:0".parse().unwrap(),
        &tls,
        LocalBackend::new(source),
        options,
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    (server, addr)
}

/// The TLS of a client that trusts `identity`.
pub fn trusting(identity: &Identity) -> ClientTls {
    ClientTls {
        trust: Trust::with(identity.certificates()).unwrap(),
        identity: None,
    }
}

/// Session options with a short timeout.
pub fn session_options() -> SessionOptions {
    SessionOptions {
        timeout: Duration::from_secs(5),
        ..SessionOptions::default()
    }
}

/// A session with the server at `addr` that trusts `identity`.
pub fn connect(addr: SocketAddr, identity: &Identity) -> Session {
    Session::connect(addr, "localhost", &trusting(identity), session_options()).unwrap()
}
