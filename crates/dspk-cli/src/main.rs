//! `dspk`: sort a recording with Kilosort4 on any GPU (or the CPU) into a Phy folder, say what a
//! recording holds, convert it to a raw binary file or a Zarr store.
//!
//! ```text
//! dspk sort recording.ap.bin                       # Phy folder recording.ap_dspk_sort/ beside it
//! dspk sort session/ --probe probe.json --set Th_learned=7 --out sorted/
//! dspk sort data.bin --n-chan-bin 385 --fs 30000 --probe chanMap.mat --device 1
//! dspk info recording.ap.bin
//! dspk convert recording.nwb --to raw recording.dat
//! dspk --help
//! ```
//!
//! Exit status: 0 success, 1 a failure while running (the error and its causes on stderr), 2 a
//! usage error (the problem and the usage on stderr). `DSPK_RUNTIME=wgpu|cuda|hip|cpu` picks
//! the runtime among those compiled in (cargo features `wgpu` (default), `cuda`, `hip`, `cpu`),
//! `DSPK_DEVICE=N` its device; the feature `formats` adds Zarr stores and NWB files.

// `main` turns the Vulkan layer's noise off first, which sets an environment variable (unsafe
// in Rust 2024) before any other thread exists.
#![deny(unsafe_code)]

mod args;
mod convert;
mod sort;

use dspk_cli::describe::{describe, probe_line};
use dspk_cli::recording;
use dspk_cli::report::{finish, quiet_vulkan_device_select, usage_error};

use std::error::Error;
use std::process::ExitCode;

use args::Command;

/// Why a command did not succeed.
enum Failure {
    /// The command line is wrong: exit status 2.
    Usage(String),
    /// Running it failed: exit status 1.
    Runtime(Box<dyn Error>),
}

impl<E: Into<Box<dyn Error>>> From<E> for Failure {
    fn from(error: E) -> Self {
        Self::Runtime(error.into())
    }
}

#[allow(unsafe_code)]
fn main() -> ExitCode {
    // SAFETY: first in main, no other thread yet.
    unsafe { quiet_vulkan_device_select() };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => usage_error(
            &message,
            &format!("{}\n\n(`dspk --help` says more)", args::USAGE),
        ),
        Err(Failure::Runtime(error)) => finish(Err(error)),
    }
}

/// Parses the command line and runs the command.
fn run() -> Result<(), Failure> {
    let command = args::parse(std::env::args_os().skip(1).collect()).map_err(Failure::Usage)?;
    match command {
        Command::Help(topic) => println!("{}", args::help(topic)),
        Command::Version => println!("dspk {}", env!("CARGO_PKG_VERSION")),
        Command::Info { recording, plain } => {
            let opened = recording::open_with(&recording, plain.as_ref())?;
            let probe = recording::recording_probe(&recording, &opened.format)?;
            print!(
                "{}{}",
                describe(&recording, &opened.format, opened.source.as_ref()),
                probe_line(probe.as_ref())
            );
        }
        Command::Convert(convert) => convert::convert(&convert)?,
        Command::Sort(sort) => {
            let settings = dspk_cli::settings::settings(sort.preset.as_deref(), &sort.sets)
                .map_err(Failure::Usage)?;
            sort::sort(&sort, settings)?;
        }
    }
    Ok(())
}
