//! The front-end of dspk: what the `dspk` command, the workspace's examples and its
//! benchmarks share. It is the one place for
//!
//! - opening a recording by path with its probe and raw data file ([`recording`]), and saying
//!   what it holds ([`describe`]);
//! - reading the command line ([`flags`]) and the sorter's settings from it ([`settings`]);
//! - progress on the terminal: a bar per sorting stage, a stream's windows ([`progress`]), a
//!   sort run under them and its report ([`sorter`]), streamed passes and their speed
//!   ([`passes`]);
//! - starting and ending a program: the Vulkan layer quieted, help, usage errors and error
//!   reports with the exit status ([`report`]).
//!
//! Unlike the library crates it draws progress on stderr and prints usage and error reports
//! (what a command-line program shows); everything else comes back as text for the program to
//! print.

// One function sets an environment variable, which Rust 2024 marks unsafe; it is an
// `unsafe fn` whose callers promise no other thread runs yet.
#![deny(unsafe_code)]

pub mod describe;
pub mod flags;
pub mod passes;
pub mod progress;
pub mod recording;
pub mod report;
pub mod settings;
pub mod sorter;
