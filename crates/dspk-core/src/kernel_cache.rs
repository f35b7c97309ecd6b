//! The persistent kernel cache: compiled kernels kept on disk between runs.
//!
//! CubeCL compiles each kernel the first time a process launches it. On CUDA (to PTX, through
//! LLVM by default or NVRTC with CubeCL's `cuda-cpp`) and HIP that costs tens to hundreds of
//! milliseconds per kernel, seconds for a whole sort, and every new process pays it again.
//! CubeCL can keep the compiled code in a database (its `persistence` feature, an embedded
//! SQLite-compatible engine) and load it in later processes; dspk turns that on for the runtimes
//! that read it and points it at a directory of its own. On CUDA the driver still translates
//! the cached PTX for the GPU when a module loads; it keeps its own cache of that
//! (`~/.nv/ComputeCache`, `CUDA_CACHE_*` variables).
//!
//! `DSPK_KERNEL_CACHE` ([`KERNEL_CACHE_ENV`]) chooses:
//! - unset or empty: the user's cache directory, `$XDG_CACHE_HOME/dspk/kernels` or
//!   `~/.cache/dspk/kernels` (`%LOCALAPPDATA%\dspk\kernels` on Windows);
//! - `off` (or `0`, `false`): no cache, every process compiles its kernels;
//! - anything else: that directory (a relative path is taken from the current directory).
//!
//! The directory holds one database per CubeCL environment (`default.db`, or the name in
//! `CUBECL_ENVIRONMENT`) with its write-ahead log and shared-memory files (`-wal`, `-tshm`).
//! Deleting the directory is always safe; it only grows (each rebuilt binary adds its own
//! entries), so delete it to reclaim the space.
//!
//! Which runtimes use it: CUDA and HIP. The cargo features `cuda` and `hip` compile it in (the
//! `kernel-cache` feature); builds with only `wgpu` or `cpu` leave it out, because CubeCL
//! recompiles WGSL and CPU kernels in every process whatever the setting.
//!
//! What keeps a stale entry from being used: an entry is found by the kernel's identity (its
//! type with generic and comptime arguments, cube size and launch mode) together with the
//! build id of the running binary, under a namespace naming the CubeCL version, the GPU
//! architecture and the compiler backend. Any rebuild that changes the binary changes its build
//! id, so it compiles afresh. A binary without a build id (linked without `--build-id`) could
//! not be told from a rebuilt one, so the cache stays off there ([`KernelCacheOff::NoBuildId`]).
//!
//! Several processes may share the directory: the database takes a write lock per insert
//! (waiting up to 5 s), two processes that compile the same kernel keep the first entry, and a
//! write that fails costs a compilation in the next run, never an error. A directory that
//! cannot be created (read-only home) leaves the cache off; one that exists but cannot be
//! written is read from if it can be, otherwise CubeCL keeps the kernels in memory.
//!
//! CubeCL reads its configuration once per process, so dspk applies this setting before it
//! opens the first device ([`ComputeTarget::device`](crate::ComputeTarget::device) and
//! [`ComputeTarget::available`](crate::ComputeTarget::available) do it first). It starts from
//! what CubeCL would have read itself (a `cubecl.toml` above the current directory, `CUBECL_*`
//! variables) and sets the compilation cache, the directory, and turns CubeCL's build records
//! off (they would write one row per compiled kernel into the same database, even with the
//! cache off). An application that set or read CubeCL's configuration before dspk keeps its
//! own ([`KernelCacheOff::ConfiguredElsewhere`]).

use std::ffi::{OsStr, OsString};
use std::fmt;
#[cfg(feature = "kernel-cache")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The environment variable that sets the kernel cache: a directory, or `off`.
pub const KERNEL_CACHE_ENV: &str = "DSPK_KERNEL_CACHE";

/// Whether this process keeps compiled kernels between runs, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelCache {
    /// Compiled kernels are loaded from and stored in CubeCL's database in this directory.
    On {
        /// The directory (absolute) that holds the database.
        directory: PathBuf,
    },
    /// Compiled kernels are not kept: each process compiles the kernels it launches.
    Off(KernelCacheOff),
}

/// Why the kernel cache is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelCacheOff {
    /// `DSPK_KERNEL_CACHE` says `off`.
    Disabled,
    /// This binary was built without a runtime that reads the cache (the `cuda` and `hip`
    /// features, or `kernel-cache` itself).
    NotCompiled,
    /// No directory to put it in: no user cache directory, or it could not be created.
    NoDirectory(String),
    /// The binary has no build id, so entries of an earlier build could not be told apart.
    NoBuildId,
    /// CubeCL's configuration was set or read before dspk's first device; it applies unchanged.
    ConfiguredElsewhere,
}

impl fmt::Display for KernelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::On { directory } => write!(f, "kernel cache in {}", directory.display()),
            Self::Off(reason) => write!(f, "kernel cache off: {reason}"),
        }
    }
}

impl fmt::Display for KernelCacheOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => write!(f, "{KERNEL_CACHE_ENV} is off"),
            Self::NotCompiled => {
                f.write_str("built without a runtime that caches kernels (cuda, hip)")
            }
            Self::NoDirectory(reason) => write!(f, "no directory for it ({reason})"),
            Self::NoBuildId => f.write_str("this binary has no build id to key entries on"),
            Self::ConfiguredElsewhere => {
                f.write_str("CubeCL's configuration was set before dspk opened a device")
            }
        }
    }
}

impl KernelCache {
    /// This process's kernel cache: decided from `DSPK_KERNEL_CACHE` and applied to CubeCL's
    /// configuration on the first call, the same answer on every later one. dspk calls it before
    /// opening a device; call it earlier only to report the setting.
    pub fn get() -> &'static Self {
        static APPLIED: OnceLock<KernelCache> = OnceLock::new();
        APPLIED.get_or_init(|| {
            let requested = std::env::var_os(KERNEL_CACHE_ENV);
            apply(requested.as_deref())
        })
    }

    /// Whether compiled kernels are kept between runs.
    #[must_use]
    pub fn is_on(&self) -> bool {
        matches!(self, Self::On { .. })
    }
}

/// What a `DSPK_KERNEL_CACHE` value asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    /// Unset or blank: [`default_kernel_cache_directory`].
    Default,
    /// `off`, `0` or `false` (any case).
    Off,
    /// Any other value: this directory.
    Directory(PathBuf),
}

impl Request {
    fn parse(value: Option<&OsStr>) -> Self {
        let Some(value) = value else {
            return Self::Default;
        };
        match value.to_string_lossy().trim().to_ascii_lowercase().as_str() {
            "" => Self::Default,
            "off" | "0" | "false" => Self::Off,
            _ => Self::Directory(PathBuf::from(value)),
        }
    }
}

/// The default directory of the kernel cache: `dspk/kernels` under the user's cache directory,
/// which is `$XDG_CACHE_HOME` when that is an absolute path and `~/.cache` otherwise
/// (`%LOCALAPPDATA%` on Windows).
///
/// # Errors
///
/// When there is no such directory (no home directory).
pub fn default_kernel_cache_directory() -> Result<PathBuf, String> {
    #[cfg(windows)]
    let base = absolute(std::env::var_os("LOCALAPPDATA"));
    #[cfg(not(windows))]
    let base = user_cache_base(std::env::var_os("XDG_CACHE_HOME"), std::env::home_dir());
    base.map(|base| base.join("dspk").join("kernels"))
        .ok_or_else(|| "no user cache directory: no home directory".to_string())
}

/// The XDG cache base: `XDG_CACHE_HOME` when absolute (relative values are ignored, as the
/// specification says), else `.cache` in the home directory.
#[cfg(not(windows))]
fn user_cache_base(xdg_cache_home: Option<OsString>, home: Option<PathBuf>) -> Option<PathBuf> {
    absolute(xdg_cache_home).or_else(|| home.map(|home| home.join(".cache")))
}

/// The value as a path when it is an absolute one.
fn absolute(value: Option<OsString>) -> Option<PathBuf> {
    value.map(PathBuf::from).filter(|path| path.is_absolute())
}

/// Creates `directory` and makes it absolute.
#[cfg(feature = "kernel-cache")]
fn prepare(directory: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(directory)
        .and_then(|()| std::path::absolute(directory))
        .map_err(|e| format!("{}: {e}", directory.display()))
}

/// Decides the cache for a `DSPK_KERNEL_CACHE` value and sets CubeCL's configuration.
#[cfg(feature = "kernel-cache")]
fn apply(requested: Option<&OsStr>) -> KernelCache {
    use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
    use cubecl::records::RecordLevel;

    let directory = match Request::parse(requested) {
        Request::Off => Err(KernelCacheOff::Disabled),
        Request::Default => default_kernel_cache_directory().map_err(KernelCacheOff::NoDirectory),
        Request::Directory(directory) => Ok(directory),
    };
    let cache = match directory {
        Err(reason) => KernelCache::Off(reason),
        Ok(_) if buildid::build_id().is_none() => KernelCache::Off(KernelCacheOff::NoBuildId),
        Ok(directory) => match prepare(&directory) {
            Ok(directory) => KernelCache::On { directory },
            Err(reason) => KernelCache::Off(KernelCacheOff::NoDirectory(reason)),
        },
    };

    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    // Records would open the database on every compilation, cache or not.
    config.environment.records.level = RecordLevel::Off;
    config.compilation.cache = cache.is_on();
    match &cache {
        KernelCache::On { directory } => {
            config.environment.path = CacheConfig::Directory(directory.clone());
        }
        // The other persistent caches dspk does not use: never a file, wherever they would go.
        KernelCache::Off(_) => {
            config.autotune.disable_cache = true;
            config.throughput.disable_cache = true;
        }
    }
    if CubeClRuntimeConfig::try_set(config) {
        cache
    } else {
        KernelCache::Off(KernelCacheOff::ConfiguredElsewhere)
    }
}

/// Without the `kernel-cache` feature nothing is compiled in to read or write a cache, and
/// CubeCL's configuration is left to CubeCL.
#[cfg(not(feature = "kernel-cache"))]
fn apply(requested: Option<&OsStr>) -> KernelCache {
    KernelCache::Off(match Request::parse(requested) {
        Request::Off => KernelCacheOff::Disabled,
        Request::Default | Request::Directory(_) => KernelCacheOff::NotCompiled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_reads_as_off_a_directory_or_the_default() {
        assert_eq!(Request::parse(None), Request::Default);
        assert_eq!(Request::parse(Some(OsStr::new(" "))), Request::Default);
        for off in ["off", "OFF", " Off ", "0", "false"] {
            assert_eq!(
                Request::parse(Some(OsStr::new(off))),
                Request::Off,
                "{off:?}"
            );
        }
        assert_eq!(
            Request::parse(Some(OsStr::new("/data/kernels"))),
            Request::Directory(PathBuf::from("/data/kernels"))
        );
        assert_eq!(
            Request::parse(Some(OsStr::new("offline-cache"))),
            Request::Directory(PathBuf::from("offline-cache"))
        );
    }

    #[cfg(not(windows))]
    #[test]
    fn the_cache_base_follows_xdg() {
        let home = Some(PathBuf::from("/home/u"));
        assert_eq!(
            user_cache_base(Some("/var/cache/u".into()), home.clone()),
            Some(PathBuf::from("/var/cache/u"))
        );
        // A relative XDG_CACHE_HOME is invalid and ignored.
        assert_eq!(
            user_cache_base(Some("cache".into()), home.clone()),
            Some(PathBuf::from("/home/u/.cache"))
        );
        assert_eq!(
            user_cache_base(None, home),
            Some(PathBuf::from("/home/u/.cache"))
        );
        assert_eq!(user_cache_base(None, None), None);
    }
}
