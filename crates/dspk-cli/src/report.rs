//! How the `dspk` command, the examples and the benchmarks start and end: Mesa's noisy Vulkan
//! layer turned off first, the arguments read (help and usage errors), and an error printed
//! as a report of its causes with the exit status.

use std::error::Error;
use std::ffi::OsStr;
use std::process::ExitCode;

use crate::flags::Reader;

/// What is printed for `error`: `error: <message>`, then one `  caused by: <message>` line per
/// error in its chain of sources, outermost first; a cause whose message the error above it
/// already quotes is left out.
#[must_use]
pub fn error_report(error: &(dyn Error + 'static)) -> String {
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

/// The exit status of a program whose body returned `result`: success, or on an error its
/// [`error_report`] printed on stderr and failure (exit status 1).
#[must_use]
pub fn finish(result: Result<(), Box<dyn Error>>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprint!("{}", error_report(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// A usage error: `error: <message>`, a blank line and `usage` on stderr, and exit status 2.
#[must_use]
pub fn usage_error(message: &str, usage: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{usage}");
    ExitCode::from(2)
}

/// Runs a program of the workspace (an example, a benchmark): turns the Vulkan layer's noise
/// off ([`quiet_vulkan_device_select`]), reads its arguments with `parse` (as `command`,
/// [`Reader`]), and runs `run` on what it read. `parse` returns `None` for `--help`: `usage`
/// is printed on stdout and the exit status is 0. A usage error prints its message and
/// `usage` ([`usage_error`], exit status 2); an error of `run` its report ([`finish`], exit
/// status 1).
///
/// # Safety
///
/// Sets an environment variable, so no other thread may be running (or reading the
/// environment): call it first in `main`.
#[allow(unsafe_code)]
pub unsafe fn run_program<A>(
    command: &'static str,
    usage: &str,
    parse: impl FnOnce(Reader) -> Result<Option<A>, String>,
    run: impl FnOnce(A) -> Result<(), Box<dyn Error>>,
) -> ExitCode {
    // SAFETY: the caller guarantees that no other thread runs.
    unsafe { quiet_vulkan_device_select() };
    match parse(Reader::new(command, std::env::args_os().skip(1))) {
        Ok(Some(args)) => finish(run(args)),
        Ok(None) => {
            println!("{usage}");
            ExitCode::SUCCESS
        }
        Err(message) => usage_error(&message, usage),
    }
}

/// Whether Mesa's Vulkan device-selection layer would make libwayland print `error:
/// XDG_RUNTIME_DIR is invalid or not set in the environment` (once per Vulkan instance, many
/// times per run), given the values of `XDG_RUNTIME_DIR`, `NODEVICE_SELECT`,
/// `MESA_VK_DEVICE_SELECT` and `DRI_PRIME`: true when the directory is unset or not absolute,
/// the layer is not already off, and no device choice is asked of the layer (then turning it
/// off changes nothing but the noise).
#[must_use]
pub fn device_select_layer_is_noise(
    xdg_runtime_dir: Option<&OsStr>,
    nodevice_select: Option<&OsStr>,
    mesa_vk_device_select: Option<&OsStr>,
    dri_prime: Option<&OsStr>,
) -> bool {
    let runtime_dir_valid =
        xdg_runtime_dir.is_some_and(|dir| std::path::Path::new(dir).is_absolute());
    !runtime_dir_valid
        && nodevice_select.is_none()
        && mesa_vk_device_select.is_none()
        && dri_prime.is_none()
}

/// Turns Mesa's Vulkan device-selection layer off for this process (`NODEVICE_SELECT=1`) when
/// [`device_select_layer_is_noise`] says it would only print `XDG_RUNTIME_DIR` errors: on
/// Linux without a login session (SSH, containers, CI) that layer asks libwayland for a
/// display on every Vulkan instance wgpu creates, and libwayland prints an error each time.
/// The layer only orders GPUs for desktops with several; wgpu ranks adapters itself. Does
/// nothing on other systems.
///
/// # Safety
///
/// Sets an environment variable, so no other thread may be running (or reading the
/// environment): call it first in `main`.
#[allow(unsafe_code)]
pub unsafe fn quiet_vulkan_device_select() {
    let var = std::env::var_os;
    if cfg!(target_os = "linux")
        && device_select_layer_is_noise(
            var("XDG_RUNTIME_DIR").as_deref(),
            var("NODEVICE_SELECT").as_deref(),
            var("MESA_VK_DEVICE_SELECT").as_deref(),
            var("DRI_PRIME").as_deref(),
        )
    {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;

    use super::*;

    /// An error without a source.
    #[derive(Debug)]
    struct Inner;

    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the recording holds no samples (4 channels of 0 samples)")
        }
    }

    impl Error for Inner {}

    /// An error that quotes its source in its own message, as thiserror's `{source}` does.
    #[derive(Debug)]
    struct Quoting(Inner);

    impl fmt::Display for Quoting {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "data.bin: {}", self.0)
        }
    }

    impl Error for Quoting {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    /// An error that leaves its source out of its message.
    #[derive(Debug)]
    struct Wrapping(Quoting);

    impl fmt::Display for Wrapping {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("cannot open the recording")
        }
    }

    impl Error for Wrapping {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    // Guards the examples' error output: it was `Error: Library { path: .., source: .. }`
    // (the Debug dump `main` prints); now each message once, outermost first.
    #[test]
    fn error_report_prints_messages_and_causes_once() {
        let error = Wrapping(Quoting(Inner));
        assert_eq!(
            error_report(&error),
            "error: cannot open the recording\n  caused by: data.bin: the recording holds no \
             samples (4 channels of 0 samples)\n"
        );
        assert_eq!(error_report(&Inner), format!("error: {Inner}\n"));
        let boxed: Box<dyn Error> = Box::new(Inner);
        assert_eq!(finish(Err(boxed)), ExitCode::FAILURE);
        assert_eq!(finish(Ok(())), ExitCode::SUCCESS);
        assert_eq!(usage_error("x", "usage: x"), ExitCode::from(2));
    }

    #[test]
    fn device_select_layer_is_turned_off_only_when_it_is_noise() {
        let set = Some(OsStr::new("1"));
        let run = Some(OsStr::new("/run/user/1000"));
        assert!(device_select_layer_is_noise(None, None, None, None));
        assert!(device_select_layer_is_noise(
            Some(OsStr::new("relative")),
            None,
            None,
            None
        ));
        assert!(!device_select_layer_is_noise(run, None, None, None));
        // Already off, or asked to pick a device: left alone.
        assert!(!device_select_layer_is_noise(None, set, None, None));
        assert!(!device_select_layer_is_noise(None, None, set, None));
        assert!(!device_select_layer_is_noise(None, None, None, set));
    }
}
