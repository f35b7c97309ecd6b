//! `dspk`: sort a recording with Kilosort4 on any GPU (or the CPU) into a Phy folder, say what a
//! recording holds, convert it to a raw binary file or a Zarr store.
//!
//! ```text
//! dspk sort recording.ap.bin                       # Phy folder recording.ap_dspk_sort/ beside it
//! dspk sort session/ --probe probe.json --set Th_learned=7 --out sorted/
//! dspk info recording.ap.bin
//! dspk convert recording.nwb --to raw recording.dat
//! dspk --help
//! ```
//!
//! Exit status: 0 success, 1 a failure while running (the error and its causes on stderr), 2 a
//! usage error (the problem and the usage on stderr). `DSPK_RUNTIME=wgpu|cuda|hip|cpu` picks
//! the runtime among those compiled in (cargo features `wgpu` (default), `cuda`, `hip`, `cpu`);
//! the feature `formats` adds Zarr stores and NWB files.

// One function sets an environment variable, which Rust 2024 marks unsafe; `main` calls it
// before any other thread exists.
#![deny(unsafe_code)]

mod args;
mod convert;
mod describe;
mod sort;

use dspk_cli::recording;

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
        Err(Failure::Usage(message)) => {
            eprintln!(
                "error: {message}\n\n{}\n\n(`dspk --help` says more)",
                args::USAGE
            );
            ExitCode::from(2)
        }
        Err(Failure::Runtime(error)) => {
            eprint!("{}", error_report(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Parses the command line and runs the command.
fn run() -> Result<(), Failure> {
    let command = args::parse(std::env::args_os().skip(1).collect()).map_err(Failure::Usage)?;
    match command {
        Command::Help(topic) => println!("{}", args::help(topic)),
        Command::Version => println!("dspk {}", env!("CARGO_PKG_VERSION")),
        Command::Info { recording } => {
            let opened = recording::open(&recording)?;
            let probe = recording::recording_probe(&recording, &opened.format)?;
            print!(
                "{}{}",
                describe::describe(&recording, &opened.format, opened.source.as_ref()),
                describe::probe_line(probe.as_ref())
            );
        }
        Command::Convert(convert) => convert::convert(&convert)?,
        Command::Sort(sort) => {
            let settings =
                args::settings(sort.preset.as_deref(), &sort.sets).map_err(Failure::Usage)?;
            sort::sort(&sort, settings)?;
        }
    }
    Ok(())
}

/// What is printed for `error`: `error: <message>`, then one `  caused by: <message>` line per
/// error in its chain of sources, outermost first; a cause whose message the error above it
/// already quotes is left out.
fn error_report(error: &(dyn Error + 'static)) -> String {
    let mut report = format!("error: {error}\n");
    let mut above = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let message = inner.to_string();
        if !above.contains(&message) {
            report.push_str(&format!("  caused by: {message}\n"));
        }
        above = message;
        cause = inner.source();
    }
    report
}

/// Turns Mesa's Vulkan device-selection layer off (`NODEVICE_SELECT=1`) on Linux when it would
/// only make libwayland print `XDG_RUNTIME_DIR is invalid or not set` for every Vulkan
/// instance (no absolute `XDG_RUNTIME_DIR`: SSH, containers, CI) and no device choice is asked
/// of it (`NODEVICE_SELECT`, `MESA_VK_DEVICE_SELECT`, `DRI_PRIME` unset); wgpu ranks the
/// adapters itself. As `dspk_examples::quiet_vulkan_device_select`.
///
/// # Safety
///
/// Sets an environment variable: no other thread may be running.
#[allow(unsafe_code)]
unsafe fn quiet_vulkan_device_select() {
    let var = std::env::var_os;
    let runtime_dir_valid =
        var("XDG_RUNTIME_DIR").is_some_and(|dir| std::path::Path::new(&dir).is_absolute());
    let asked = ["NODEVICE_SELECT", "MESA_VK_DEVICE_SELECT", "DRI_PRIME"]
        .iter()
        .any(|name| var(name).is_some());
    if cfg!(target_os = "linux") && !runtime_dir_valid && !asked {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}
