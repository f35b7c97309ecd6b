//! QUIC and TLS 1.3 set-up: identities (certificate chain and key, from PEM files or
//! generated), trust (the certificates or authorities a side accepts), ALPN, transport limits,
//! and transport errors in words.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::{Error, Result};

/// The ALPN name of the protocol, with its version: a peer that offers another name is refused
/// during the handshake.
pub const ALPN: &[u8] = b"dspk-stream/1";

/// The version of the protocol's messages, in [`Hello`](crate::messages::Hello) and
/// [`Header`](crate::messages::Header) (the version in [`ALPN`]).
pub const PROTOCOL_VERSION: u32 = 1;

/// A certificate chain (leaf first) and its private key: who a server (or, under mutual TLS,
/// a client) is.
#[derive(Debug)]
pub struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Identity {
    /// The identity in two PEM files: the certificate chain (leaf first) and the private key
    /// (PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] for a file that cannot be read, [`Error::Tls`] for one without a
    /// certificate or key.
    pub fn from_pem_files(certificates: &Path, key: &Path) -> Result<Self> {
        let chain = read_certificates(certificates)?;
        let bytes = read_file(key)?;
        let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| Error::Tls {
            what: format!("private key {}", key.display()),
            reason: e.to_string(),
        })?;
        Ok(Self { chain, key })
    }

    /// A new self-signed identity for these DNS names or IP addresses (a test server, or one
    /// whose clients are given its certificate by hand: [`certificate_pem`](Self::certificate_pem)).
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] when a name is not a valid DNS name or address.
    pub fn self_signed(names: &[&str]) -> Result<Self> {
        let names = names.iter().map(|n| (*n).to_string()).collect::<Vec<_>>();
        let certified = rcgen::generate_simple_self_signed(names).map_err(|e| Error::Tls {
            what: "self-signed certificate".into(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            chain: vec![certified.cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()).into(),
        })
    }

    /// The certificate chain, leaf first.
    #[must_use]
    pub fn certificates(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The certificate chain as PEM (what a client is given to trust this identity).
    #[must_use]
    pub fn certificate_pem(&self) -> String {
        self.chain
            .iter()
            .map(|c| pem("CERTIFICATE", c.as_ref()))
            .collect()
    }

    /// The private key as PEM (`PRIVATE KEY` for PKCS#8).
    #[must_use]
    pub fn key_pem(&self) -> String {
        let label = match &self.key {
            PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
            PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
            _ => "PRIVATE KEY",
        };
        pem(label, self.key.secret_der())
    }

    /// Writes the chain and key as two PEM files (read back by
    /// [`from_pem_files`](Self::from_pem_files)).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] for a file that cannot be written.
    pub fn write_pem_files(&self, certificates: &Path, key: &Path) -> Result<()> {
        write_file(certificates, &self.certificate_pem())?;
        write_file(key, &self.key_pem())
    }

    pub(crate) fn parts(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (self.chain.clone(), self.key.clone_key())
    }
}

/// A certificate authority that issues identities: for mutual TLS in tests and small labs (a
/// server trusts the authority, clients get identities it issued).
pub struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    certificate: CertificateDer<'static>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A new authority with this common name.
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] when the key or certificate cannot be made.
    pub fn new(name: &str) -> Result<Self> {
        let tls = |e: rcgen::Error| Error::Tls {
            what: format!("authority `{name}`"),
            reason: e.to_string(),
        };
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate().map_err(tls)?;
        let certificate = params.self_signed(&key).map_err(tls)?.der().clone();
        Ok(Self {
            issuer: rcgen::Issuer::new(params, key),
            certificate,
        })
    }

    /// The authority's certificate (what the side that checks issued identities trusts).
    #[must_use]
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.certificate
    }

    /// A new identity for these DNS names (or, for a client, any name), signed by the
    /// authority.
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] when a name is not valid or signing fails.
    pub fn issue(&self, names: &[&str]) -> Result<Identity> {
        let tls = |e: rcgen::Error| Error::Tls {
            what: format!("identity for {names:?}"),
            reason: e.to_string(),
        };
        let names = names.iter().map(|n| (*n).to_string()).collect::<Vec<_>>();
        let params = rcgen::CertificateParams::new(names).map_err(tls)?;
        let key = rcgen::KeyPair::generate().map_err(tls)?;
        let certificate = params.signed_by(&key, &self.issuer).map_err(tls)?;
        Ok(Identity {
            chain: vec![certificate.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
        })
    }
}

/// The certificates (self-signed servers) or authorities a side trusts. There is no mode that
/// trusts anything.
#[derive(Clone, Debug)]
pub struct Trust {
    roots: RootCertStore,
}

impl Default for Trust {
    fn default() -> Self {
        Self::new()
    }
}

impl Trust {
    /// Trusts nothing yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            roots: RootCertStore::empty(),
        }
    }

    /// Trusts every certificate in a PEM file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`], or [`Error::Tls`] for a file without certificates or with one that
    /// cannot be a trust anchor.
    pub fn from_pem_file(path: &Path) -> Result<Self> {
        let mut trust = Self::new();
        for certificate in read_certificates(path)? {
            trust.add(certificate)?;
        }
        Ok(trust)
    }

    /// Adds a trusted certificate (a self-signed server's, or an authority's).
    ///
    /// # Errors
    ///
    /// [`Error::Tls`] for a certificate that cannot be a trust anchor.
    pub fn add(&mut self, certificate: CertificateDer<'static>) -> Result<()> {
        self.roots.add(certificate).map_err(|e| Error::Tls {
            what: "trusted certificate".into(),
            reason: e.to_string(),
        })
    }

    /// Trusts these certificates.
    ///
    /// # Errors
    ///
    /// As [`add`](Self::add).
    pub fn with(certificates: &[CertificateDer<'static>]) -> Result<Self> {
        let mut trust = Self::new();
        for certificate in certificates {
            trust.add(certificate.clone())?;
        }
        Ok(trust)
    }

    /// Whether nothing is trusted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }
}

/// The largest UDP payload over IPv4 (65535 bytes of IP datagram less the IP and UDP headers):
/// what loopback carries in one datagram.
pub const MAX_IPV4_UDP_PAYLOAD: u16 = 65_507;

/// The smallest UDP payload between peers on one machine (see [`TransportOptions::loopback`]):
/// quinn pads the handshake's packets to it, and their length field holds 14 bits, so it stays
/// below 16384.
pub const LOCAL_MIN_UDP_PAYLOAD: u16 = 16_000;

/// Datagrams quinn puts in one segmented send (GSO) at most; the kernel refuses a send whose
/// datagrams add up to more than [`MAX_IPV4_UDP_PAYLOAD`].
const GSO_BATCH: usize = 10;

/// Transport limits and sizes, the same on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportOptions {
    /// A connection with no packet for this long is closed (default 30 s).
    pub idle_timeout: Duration,
    /// Keep-alive packets are sent this often, so an idle but live connection stays open
    /// (default 5 s).
    pub keep_alive: Duration,
    /// Bytes a peer may send on one stream before this side reads them (default 16 MiB); the
    /// connection's window is twice this.
    pub stream_window: u32,
    /// Bytes this side keeps in flight, unacknowledged, per connection: with the per-client
    /// queue, what bounds a server's memory per client (default 16 MiB).
    pub send_window: u64,
    /// The largest UDP payload, in bytes (default 1472: Ethernet). Path MTU discovery looks for
    /// datagrams up to this size (the peer's own limit caps it); between a client and a server
    /// on a loopback address they start at, and never fall below, the smaller of this and
    /// [`LOCAL_MIN_UDP_PAYLOAD`]. On loopback (MTU 65536) [`MAX_IPV4_UDP_PAYLOAD`] saves most
    /// of the per-packet work ([`loopback`](Self::loopback)).
    /// Up to 6550 bytes, datagrams are sent ten at a time (segmentation offload); above, one
    /// at a time (ten would pass the kernel's 64 KiB limit on one send).
    pub max_udp_payload: u16,
    /// Bytes of the socket's kernel send and receive buffers (default 4 MiB; the kernel caps
    /// them at `net.core.wmem_max` and `net.core.rmem_max`). A burst that overflows the
    /// receive buffer is lost, and the sender then slows down.
    pub socket_buffer: usize,
}

impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30),
            keep_alive: Duration::from_secs(5),
            stream_window: 16 << 20,
            send_window: 16 << 20,
            max_udp_payload: 1472,
            socket_buffer: 4 << 20,
        }
    }
}

impl TransportOptions {
    /// The defaults with datagrams up to [`MAX_IPV4_UDP_PAYLOAD`]: for a server and clients on
    /// one machine (on a network, path MTU discovery finds that such datagrams do not pass and
    /// stays at the largest that do).
    #[must_use]
    pub fn loopback() -> Self {
        Self {
            max_udp_payload: MAX_IPV4_UDP_PAYLOAD,
            ..Self::default()
        }
    }

    /// Whether datagrams are sent several at a time (segmentation offload): only when a whole
    /// batch fits one send.
    fn segmentation_offload(&self) -> bool {
        usize::from(self.max_udp_payload) * GSO_BATCH <= usize::from(MAX_IPV4_UDP_PAYLOAD)
    }

    /// The quinn transport configuration; `bidi` and `uni`: streams the peer may open at once;
    /// `local`: every peer is on this machine (a client of a loopback address, a server bound
    /// to one). Loopback carries every datagram size, and a loss there is a full receive queue,
    /// not a smaller path; path MTU discovery would take a few bursts of such losses for an MTU
    /// black hole and send 1200-byte datagrams for a minute. So local datagrams start at, and
    /// never fall below, [`LOCAL_MIN_UDP_PAYLOAD`] (a peer that accepts less still gets less:
    /// its transport parameters cap the size), and discovery looks again one second after a
    /// black hole.
    pub(crate) fn config(
        &self,
        bidi: u32,
        uni: u32,
        local: bool,
    ) -> Result<quinn::TransportConfig> {
        let mut config = quinn::TransportConfig::default();
        let idle = quinn::IdleTimeout::try_from(self.idle_timeout)
            .map_err(|e| Error::invalid("transport: idle timeout", e.to_string()))?;
        config
            .max_idle_timeout(Some(idle))
            .keep_alive_interval(Some(self.keep_alive))
            .stream_receive_window(self.stream_window.into())
            .receive_window(
                (u64::from(self.stream_window) * 2)
                    .try_into()
                    .map_err(|_| {
                        Error::invalid("transport: stream window", self.stream_window.to_string())
                    })?,
            )
            .send_window(self.send_window)
            .max_concurrent_bidi_streams(bidi.into())
            .max_concurrent_uni_streams(uni.into())
            .enable_segmentation_offload(self.segmentation_offload());
        let largest = self.max_udp_payload.max(1200);
        let mut mtu = quinn::MtuDiscoveryConfig::default();
        mtu.upper_bound(largest);
        if local {
            let floor = largest.min(LOCAL_MIN_UDP_PAYLOAD);
            // Ten datagrams in the first congestion window, as RFC 9002 has it (quinn's fixed
            // 14720 bytes would hold back any datagram larger than that).
            let mut congestion = quinn::congestion::CubicConfig::default();
            congestion.initial_window(10 * u64::from(floor));
            config
                .initial_mtu(floor)
                .min_mtu(floor)
                .congestion_controller_factory(Arc::new(congestion));
            mtu.black_hole_cooldown(Duration::from_secs(1));
        }
        config.mtu_discovery_config(Some(mtu));
        Ok(config)
    }

    /// The quinn endpoint configuration.
    pub(crate) fn endpoint(&self) -> Result<quinn::EndpointConfig> {
        let mut config = quinn::EndpointConfig::default();
        config
            .max_udp_payload_size(self.max_udp_payload.max(1200))
            .map_err(|e| Error::invalid("transport: max UDP payload", e.to_string()))?;
        Ok(config)
    }

    /// A UDP socket bound to `addr` with the kernel buffers of
    /// [`socket_buffer`](Self::socket_buffer); `what` names it in errors.
    pub(crate) fn socket(
        &self,
        addr: SocketAddr,
        what: &'static str,
    ) -> Result<std::net::UdpSocket> {
        let system = |e: std::io::Error| Error::System {
            what,
            reason: format!("{addr}: {e}"),
        };
        let socket = std::net::UdpSocket::bind(addr).map_err(system)?;
        let state = quinn::udp::UdpSocketState::new((&socket).into()).map_err(system)?;
        state
            .set_recv_buffer_size((&socket).into(), self.socket_buffer)
            .map_err(system)?;
        state
            .set_send_buffer_size((&socket).into(), self.socket_buffer)
            .map_err(system)?;
        Ok(socket)
    }
}

/// The crypto provider (ring) every config is built with, AES-128-GCM first: TLS 1.3's
/// mandatory cipher suite, with 10 AES rounds per block to AES-256's 14 (encrypting and
/// decrypting bound a signal stream's rate: each side does one of them on one core).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(provider)
}

/// The rustls error of a config being built, in words.
fn tls_error(what: &str) -> impl Fn(rustls::Error) -> Error + '_ {
    move |e| Error::Tls {
        what: what.to_string(),
        reason: e.to_string(),
    }
}

/// The server's TLS 1.3 config: its identity, ALPN, and client certificates from `clients`'
/// authorities required when given.
pub(crate) fn server_crypto(
    identity: &Identity,
    clients: Option<&Trust>,
) -> Result<quinn::crypto::rustls::QuicServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error("server config"))?;
    let builder = match clients {
        Some(trust) => {
            if trust.is_empty() {
                return Err(Error::invalid(
                    "server: client authorities",
                    "mutual TLS with no trusted authority would refuse every client",
                ));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(trust.roots.clone()),
                provider(),
            )
            .build()
            .map_err(|e| Error::Tls {
                what: "client verifier".into(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let (chain, key) = identity.parts();
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(tls_error("server identity"))?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    quinn::crypto::rustls::QuicServerConfig::try_from(config).map_err(|e| Error::Tls {
        what: "server config for QUIC".into(),
        reason: e.to_string(),
    })
}

/// The client's TLS 1.3 config: the server certificates or authorities it trusts, its own
/// identity for mutual TLS, and the ALPN names it offers.
pub(crate) fn client_crypto(
    trust: &Trust,
    identity: Option<&Identity>,
    alpn: &[u8],
) -> Result<quinn::crypto::rustls::QuicClientConfig> {
    if trust.is_empty() {
        return Err(Error::invalid(
            "client: trust",
            "no trusted certificate: give the server's certificate or its authority",
        ));
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error("client config"))?
        .with_root_certificates(trust.roots.clone());
    let mut config = match identity {
        Some(identity) => {
            let (chain, key) = identity.parts();
            builder
                .with_client_auth_cert(chain, key)
                .map_err(tls_error("client identity"))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    quinn::crypto::rustls::QuicClientConfig::try_from(config).map_err(|e| Error::Tls {
        what: "client config for QUIC".into(),
        reason: e.to_string(),
    })
}

/// The ALPN a connection agreed on, checked to be [`ALPN`].
pub(crate) fn check_alpn(connection: &quinn::Connection) -> Result<()> {
    let protocol = connection
        .handshake_data()
        .and_then(|data| data.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|data| data.protocol);
    match protocol {
        Some(p) if p == ALPN => Ok(()),
        other => Err(Error::Handshake {
            peer: connection.remote_address().to_string(),
            reason: format!(
                "the peer agreed on ALPN {:?}, not {}",
                other.map(|p| String::from_utf8_lossy(&p).into_owned()),
                String::from_utf8_lossy(ALPN)
            ),
        }),
    }
}

/// A TLS alert's meaning, for handshake errors.
fn alert(code: u8) -> &'static str {
    match code {
        40 => "handshake failure",
        42 => "bad certificate",
        43 => "unsupported certificate",
        44 => "certificate revoked",
        45 => "certificate expired",
        46 => "certificate unknown (not trusted)",
        48 => "certificate of an unknown authority (not trusted)",
        49 => "access denied",
        70 => "protocol version not supported",
        112 => "unrecognized server name",
        116 => "a client certificate is required",
        120 => "no common application protocol: the peer does not speak dspk-stream/1 (ALPN)",
        _ => "TLS alert",
    }
}

/// A connection's error in words: a close by the peer keeps its code and reason, a TLS alert
/// becomes a handshake error that names it.
pub(crate) fn connection_error(
    peer: &str,
    by: &'static str,
    error: &quinn::ConnectionError,
) -> Error {
    use quinn::ConnectionError as E;
    let crypto = |code: u64, reason: &str| {
        (0x100..0x200).contains(&code).then(|| {
            let text = alert((code - 0x100) as u8);
            Error::Handshake {
                peer: peer.to_string(),
                reason: if reason.is_empty() {
                    format!("{text} (alert {})", code - 0x100)
                } else {
                    format!("{text} (alert {}): {reason}", code - 0x100)
                },
            }
        })
    };
    match error {
        E::ApplicationClosed(close) => Error::Closed {
            by,
            code: close.error_code.into_inner(),
            reason: String::from_utf8_lossy(&close.reason).into_owned(),
        },
        E::ConnectionClosed(close) => {
            let reason = String::from_utf8_lossy(&close.reason);
            crypto(u64::from(close.error_code), &reason).unwrap_or_else(|| Error::Connection {
                peer: peer.to_string(),
                reason: error.to_string(),
            })
        }
        E::TransportError(transport) => crypto(u64::from(transport.code), &transport.reason)
            .unwrap_or_else(|| Error::Connection {
                peer: peer.to_string(),
                reason: error.to_string(),
            }),
        E::TimedOut => Error::Connection {
            peer: peer.to_string(),
            reason: "timed out: no packet from the peer within the idle timeout".into(),
        },
        _ => Error::Connection {
            peer: peer.to_string(),
            reason: error.to_string(),
        },
    }
}

/// The certificates of a PEM file.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = read_file(path)?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls {
            what: format!("certificates {}", path.display()),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(Error::Tls {
            what: format!("certificates {}", path.display()),
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(chain)
}

/// A whole file (certificates and keys are small).
fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Writes a whole file.
fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// A PEM block: `-----BEGIN label-----`, base64 in lines of 64, `-----END label-----`.
fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut base64 = Vec::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                base64.push(ALPHABET[(n >> (18 - 6 * k)) as usize & 63]);
            } else {
                base64.push(b'=');
            }
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in base64.chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_go_ten_at_a_time_only_when_ten_fit_one_send() {
        let with = |max_udp_payload| TransportOptions {
            max_udp_payload,
            ..TransportOptions::default()
        };
        assert!(TransportOptions::default().segmentation_offload());
        assert!(with(6_550).segmentation_offload());
        assert!(!with(6_551).segmentation_offload());
        assert!(!TransportOptions::loopback().segmentation_offload());
        assert_eq!(
            TransportOptions::loopback().max_udp_payload,
            MAX_IPV4_UDP_PAYLOAD
        );
    }

    #[test]
    fn sockets_get_their_buffers_or_say_which_address_failed() {
        let options = TransportOptions::default();
        let socket = options
            .socket("127.0.0.1:0".parse().unwrap(), "test socket")
            .unwrap();
        assert!(socket.local_addr().unwrap().port() > 0);
        // An address of no interface here (TEST-NET-1).
        let err = options
            .socket("192.0.2.1:0".parse().unwrap(), "test socket")
            .unwrap_err();
        assert!(
            matches!(&err, Error::System { what: "test socket", reason } if reason.contains("192.0.2.1")),
            "{err}"
        );
    }

    #[test]
    fn aes_128_gcm_is_offered_first() {
        let provider = provider();
        assert_eq!(
            provider.cipher_suites[0].suite(),
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
        );
        // Reordered, not filtered.
        assert_eq!(
            provider.cipher_suites.len(),
            rustls::crypto::ring::default_provider().cipher_suites.len()
        );
    }

    #[test]
    fn pem_round_trips_through_the_pem_reader() {
        let identity = Identity::self_signed(&["localhost"]).unwrap();
        let parsed = CertificateDer::pem_slice_iter(identity.certificate_pem().as_bytes())
            .collect::<std::result::Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(parsed, identity.certificates());
        let key = PrivateKeyDer::from_pem_slice(identity.key_pem().as_bytes()).unwrap();
        assert_eq!(key.secret_der(), identity.key.secret_der());
        // Lengths with every remainder mod 3 (padding).
        for n in [1usize, 2, 3, 4, 5, 100] {
            let der: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let text = pem("CERTIFICATE", &der);
            let back = CertificateDer::from_pem_slice(text.as_bytes()).unwrap();
            assert_eq!(back.as_ref(), &der[..]);
        }
    }

    #[test]
    fn identities_and_trust_from_files() {
        let dir = std::env::temp_dir().join(format!("dspk-stream-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let identity = Identity::self_signed(&["localhost", "127.0.0.1"]).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        identity.write_pem_files(&cert, &key).unwrap();
        let back = Identity::from_pem_files(&cert, &key).unwrap();
        assert_eq!(back.certificates(), identity.certificates());
        assert!(!Trust::from_pem_file(&cert).unwrap().is_empty());
        // The key file holds no certificate; a missing file names itself.
        let err = Trust::from_pem_file(&key).unwrap_err();
        assert!(matches!(err, Error::Tls { .. }), "{err}");
        let err = Trust::from_pem_file(&dir.join("missing.pem")).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn configs_refuse_empty_trust() {
        let err = client_crypto(&Trust::new(), None, ALPN).err().unwrap();
        assert!(matches!(err, Error::Invalid { .. }), "{err}");
        let identity = Identity::self_signed(&["localhost"]).unwrap();
        let err = server_crypto(&identity, Some(&Trust::new())).err().unwrap();
        assert!(matches!(err, Error::Invalid { .. }), "{err}");
        let authority = Authority::new("dspk test").unwrap();
        let trust = Trust::with(std::slice::from_ref(authority.certificate())).unwrap();
        server_crypto(&identity, Some(&trust)).unwrap();
        let client = authority.issue(&["client"]).unwrap();
        client_crypto(&trust, Some(&client), ALPN).unwrap();
    }
}
