//! Network sessions for continuous signals (QUIC + TLS 1.3, protobuf messages) for dspk.
//!
//! Nothing is implemented yet: the sessions arrive with the streaming issue.

#![forbid(unsafe_code)]
