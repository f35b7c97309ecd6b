//! Compute targets: which CubeCL runtime runs the kernels, chosen at run time.
//!
//! Runtimes are cargo features (`wgpu` by default, `cuda`, `hip`, `cpu`); a binary can carry
//! several and pick one when it starts, from `DSPK_RUNTIME` or by preference (GPUs first).
//! This module is the only place in dspk that turns a choice into a CubeCL client.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use cubecl::device::{RuntimeId, WgpuDeviceKind};
use cubecl::{Device, client::Client};

use crate::{Error, KernelCache, Result};

/// The environment variable that picks a runtime: `wgpu`, `cuda`, `hip` or `cpu`.
pub const RUNTIME_ENV: &str = "DSPK_RUNTIME";

/// The environment variable that picks the device of the chosen runtime by index (`0`, `1`,
/// ...): one GPU per process on a machine with several (`DSPK_DEVICE=1 dspk sort ...`). Unset
/// or empty: the runtime's default device (see [`ComputeTarget::device_at`]).
pub const DEVICE_ENV: &str = "DSPK_DEVICE";

/// A CubeCL runtime dspk can launch kernels on.
///
/// Every variant exists in every build, so a name can always be parsed; asking for a client of
/// one that was not compiled in is an error that says which ones were.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComputeTarget {
    /// NVIDIA GPUs through CUDA (cargo feature `cuda`; needs the driver's libcuda at run time).
    Cuda,
    /// AMD GPUs through ROCm/HIP (cargo feature `hip`).
    Hip,
    /// Any GPU through wgpu: Vulkan, Metal, DX12, or a software Vulkan driver such as lavapipe
    /// when no GPU exists (cargo feature `wgpu`, the default).
    Wgpu,
    /// The host CPU through CubeCL's LLVM-compiled CPU runtime (cargo feature `cpu`).
    Cpu,
}

impl ComputeTarget {
    /// Every target, in order of preference.
    pub const ALL: [Self; 4] = [Self::Cuda, Self::Hip, Self::Wgpu, Self::Cpu];

    /// The name used by `DSPK_RUNTIME` and the cargo feature: `cuda`, `hip`, `wgpu`, `cpu`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Cuda => "cuda",
            Self::Hip => "hip",
            Self::Wgpu => "wgpu",
            Self::Cpu => "cpu",
        }
    }

    /// Whether this binary was built with this runtime's feature.
    #[must_use]
    pub const fn is_compiled(self) -> bool {
        match self {
            Self::Cuda => cfg!(feature = "cuda"),
            Self::Hip => cfg!(feature = "hip"),
            Self::Wgpu => cfg!(feature = "wgpu"),
            Self::Cpu => cfg!(feature = "cpu"),
        }
    }

    /// The targets compiled into this binary, in order of preference.
    #[must_use]
    pub fn compiled() -> Vec<Self> {
        Self::ALL.into_iter().filter(|t| t.is_compiled()).collect()
    }

    /// The compiled targets that have a device on this machine, best first: GPUs (CUDA, HIP,
    /// wgpu on a hardware adapter), then the CPU runtime, then wgpu on a software adapter
    /// (lavapipe), which is slower than the CPU runtime.
    ///
    /// Probed once per process (adapter enumeration only; no device is opened), after the
    /// [`KernelCache`] setting is applied.
    #[must_use]
    pub fn available() -> Vec<Self> {
        static AVAILABLE: OnceLock<Vec<ComputeTarget>> = OnceLock::new();
        AVAILABLE
            .get_or_init(|| {
                KernelCache::get();
                let mut ranked: Vec<(u8, Self)> = Self::compiled()
                    .into_iter()
                    .filter_map(|target| match target {
                        Self::Wgpu if has_hardware_wgpu_adapter() => Some((0, target)),
                        Self::Wgpu => target.device_at(None).ok().map(|_| (2, target)),
                        Self::Cpu => target.device_at(None).ok().map(|_| (1, target)),
                        _ => target.device_at(None).ok().map(|_| (0, target)),
                    })
                    .collect();
                ranked.sort_by_key(|&(rank, _)| rank);
                ranked.into_iter().map(|(_, target)| target).collect()
            })
            .clone()
    }

    /// The target named by `DSPK_RUNTIME`, or the first [`available`](Self::available) one when
    /// it is unset or empty.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownRuntime`] for a name dspk does not know, [`Error::NotCompiled`] for a
    /// runtime this binary lacks, [`Error::NoRuntimeAvailable`] when it is unset and no
    /// compiled runtime has a device.
    pub fn from_env() -> Result<Self> {
        Self::select(std::env::var(RUNTIME_ENV).ok().as_deref())
    }

    /// The target a `DSPK_RUNTIME` value names, or the first [`available`](Self::available) one
    /// for `None` or an empty value. [`from_env`](Self::from_env) is this on the variable.
    ///
    /// # Errors
    ///
    /// As [`from_env`](Self::from_env).
    pub fn select(requested: Option<&str>) -> Result<Self> {
        match requested {
            Some(name) if !name.trim().is_empty() => {
                let target: Self = name.parse()?;
                target.ensure_compiled()?;
                Ok(target)
            }
            _ => Self::available()
                .first()
                .copied()
                .ok_or_else(|| Error::NoRuntimeAvailable {
                    compiled: compiled_list(),
                }),
        }
    }

    /// [`Error::NotCompiled`] unless this runtime is compiled in.
    fn ensure_compiled(self) -> Result<()> {
        if self.is_compiled() {
            Ok(())
        } else {
            Err(Error::NotCompiled {
                target: self.name(),
                compiled: compiled_list(),
            })
        }
    }

    /// The CubeCL device this target runs on: the one `DSPK_DEVICE` names
    /// ([`device_index_from_env`](Self::device_index_from_env)), else the default one (see
    /// [`device_at`](Self::device_at)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeviceIndex`] when `DSPK_DEVICE` is not a whole number; otherwise as
    /// [`device_at`](Self::device_at).
    pub fn device(self) -> Result<Device> {
        self.device_at(Self::device_index_from_env()?)
    }

    /// The CubeCL device at `index` among this runtime's [`devices`](Self::devices), or with
    /// `None` the default one: device 0 of CUDA or HIP; for wgpu the adapter wgpu ranks best
    /// (a discrete GPU first, a software adapter such as lavapipe when there is nothing else;
    /// `CUBECL_WGPU_DEFAULT_DEVICE` overrides); the CPU.
    ///
    /// The [`KernelCache`] setting is applied to CubeCL first (once per process): CubeCL reads
    /// its configuration when the first device opens.
    ///
    /// # Errors
    ///
    /// [`Error::NotCompiled`]; [`Error::NoSuchDevice`], naming how many devices there are,
    /// for an index past them; [`Error::NoDevice`] with the runtime's reason when it has none.
    pub fn device_at(self, index: Option<usize>) -> Result<Device> {
        self.ensure_compiled()?;
        KernelCache::get();
        let no_device = |reason: String| Error::NoDevice {
            target: self.name(),
            reason,
            compiled: compiled_list(),
        };
        let Some(index) = index else {
            let device = match self {
                Self::Cuda => Device::cuda(0),
                Self::Hip => Device::rocm(0),
                Self::Wgpu => Device::wgpu(WgpuDeviceKind::DefaultDevice),
                Self::Cpu => Device::cpu(),
            };
            return device.map_err(|reason| no_device(reason.to_string()));
        };
        let devices = self.devices();
        match devices.get(index) {
            Some(device) => Ok(device.clone()),
            None if devices.is_empty() => Err(no_device("no device found".to_string())),
            None => Err(Error::NoSuchDevice {
                target: self.name(),
                index,
                count: devices.len(),
            }),
        }
    }

    /// The devices of this runtime on this machine, in the order [`device_at`](Self::device_at)
    /// counts them: CUDA's and HIP's in the driver's order; wgpu's adapters (on the graphics
    /// API wgpu settles on) with GPUs before software adapters such as lavapipe; the one CPU.
    /// Empty when the runtime is not compiled in or finds nothing.
    #[must_use]
    pub fn devices(self) -> Vec<Device> {
        if !self.is_compiled() {
            return Vec::new();
        }
        KernelCache::get();
        let runtime = match self {
            Self::Cuda => RuntimeId::Cuda,
            Self::Hip => RuntimeId::Hip,
            Self::Wgpu => RuntimeId::Wgpu,
            Self::Cpu => RuntimeId::Cpu,
        };
        let mut devices: Vec<Device> = Device::enumerate_all()
            .into_iter()
            .filter(|d| d.runtime() == runtime)
            .collect();
        // Stable: wgpu's own order within GPUs and within software adapters.
        devices.sort_by_key(|d| matches!(d, Device::Wgpu(w) if w.kind == WgpuDeviceKind::Cpu));
        devices
    }

    /// The device index `DSPK_DEVICE` gives: `None` when it is unset or empty.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeviceIndex`] when it is set to anything but a whole number.
    pub fn device_index_from_env() -> Result<Option<usize>> {
        let value = std::env::var_os(DEVICE_ENV).map(|v| v.to_string_lossy().into_owned());
        parse_device_index(DEVICE_ENV, value.as_deref())
    }

    /// A CubeCL client on this target's [`device`](Self::device), created on first use and
    /// shared by every later call in the process.
    ///
    /// # Errors
    ///
    /// As [`device`](Self::device).
    pub fn client(self) -> Result<Client> {
        Ok(self.device()?.client())
    }

    /// A CubeCL client on the device [`device_at`](Self::device_at) gives for `index`
    /// (`--device N`), created on first use and shared by every later call in the process.
    ///
    /// # Errors
    ///
    /// As [`device_at`](Self::device_at).
    pub fn client_at(self, index: Option<usize>) -> Result<Client> {
        Ok(self.device_at(index)?.client())
    }
}

/// A device index read from `source_name` (`DSPK_DEVICE`): `None` for no value or an empty
/// one (surrounding space ignored), else a whole number from 0.
///
/// # Errors
///
/// [`Error::InvalidDeviceIndex`] naming `source_name` and the value.
pub fn parse_device_index(source_name: &str, value: Option<&str>) -> Result<Option<usize>> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| Error::InvalidDeviceIndex {
                source_name: source_name.to_string(),
                value: text.to_string(),
            }),
    }
}

/// Whether wgpu sees a GPU (discrete, integrated or virtual), not only a software adapter.
fn has_hardware_wgpu_adapter() -> bool {
    [
        WgpuDeviceKind::DiscreteGpu(0),
        WgpuDeviceKind::IntegratedGpu(0),
        WgpuDeviceKind::VirtualGpu(0),
    ]
    .into_iter()
    .any(|kind| Device::wgpu(kind).is_ok())
}

/// The compiled targets' names, comma-separated (or `none`).
fn compiled_list() -> String {
    let names: Vec<_> = ComputeTarget::compiled().iter().map(|t| t.name()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

impl FromStr for ComputeTarget {
    type Err = Error;

    /// Parses a runtime name, ignoring case and surrounding space (`"rocm"` is an alias of
    /// `hip`, `"vulkan"` is not: it is a wgpu backend).
    fn from_str(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cuda" => Ok(Self::Cuda),
            "hip" | "rocm" => Ok(Self::Hip),
            "wgpu" => Ok(Self::Wgpu),
            "cpu" => Ok(Self::Cpu),
            _ => Err(Error::UnknownRuntime {
                name: name.to_string(),
                compiled: compiled_list(),
            }),
        }
    }
}

impl fmt::Display for ComputeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for target in ComputeTarget::ALL {
            assert_eq!(target.name().parse::<ComputeTarget>().unwrap(), target);
            assert_eq!(target.to_string(), target.name());
        }
        assert_eq!(
            " CUDA ".parse::<ComputeTarget>().unwrap(),
            ComputeTarget::Cuda
        );
        assert_eq!("rocm".parse::<ComputeTarget>().unwrap(), ComputeTarget::Hip);
    }

    #[test]
    fn unknown_names_list_what_is_compiled() {
        let error = "opencl".parse::<ComputeTarget>().unwrap_err();
        let message = error.to_string();
        assert!(message.contains("unknown runtime `opencl`"), "{message}");
        for target in ComputeTarget::compiled() {
            assert!(message.contains(target.name()), "{message}");
        }
    }

    #[test]
    fn device_indices_parse_or_name_the_value() {
        assert_eq!(parse_device_index(DEVICE_ENV, None).unwrap(), None);
        assert_eq!(parse_device_index(DEVICE_ENV, Some(" ")).unwrap(), None);
        assert_eq!(parse_device_index(DEVICE_ENV, Some("0")).unwrap(), Some(0));
        assert_eq!(
            parse_device_index(DEVICE_ENV, Some(" 3 ")).unwrap(),
            Some(3)
        );
        for bad in ["-1", "1.5", "gpu1", "cuda:0"] {
            let error = parse_device_index(DEVICE_ENV, Some(bad)).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("DSPK_DEVICE is `{bad}`: expected a device index, a whole number from 0")
            );
        }
    }

    // One GPU per process: an index past the devices present names how many there are (wgpu
    // on lavapipe and the CPU runtime have one each).
    #[test]
    fn a_device_index_past_the_devices_names_their_count() {
        for target in ComputeTarget::compiled() {
            let count = target.devices().len();
            if count == 0 {
                continue;
            }
            assert!(target.device_at(Some(count - 1)).is_ok(), "{target}");
            let error = target.device_at(Some(count)).unwrap_err();
            assert!(matches!(error, Error::NoSuchDevice { .. }), "{error}");
            let message = error.to_string();
            let devices = if count == 1 { "device" } else { "devices" };
            assert!(
                message.starts_with(&format!(
                    "device {count} of the {target} runtime was asked for, but it has {count} \
                     {devices} (indices 0 to {})",
                    count - 1
                )),
                "{message}"
            );
        }
        if ComputeTarget::Cpu.is_compiled() {
            assert_eq!(ComputeTarget::Cpu.devices().len(), 1);
        }
    }

    #[test]
    fn targets_not_compiled_in_say_so() {
        for target in ComputeTarget::ALL.into_iter().filter(|t| !t.is_compiled()) {
            let selected = ComputeTarget::select(Some(target.name())).unwrap_err();
            assert!(matches!(selected, Error::NotCompiled { .. }), "{selected}");
            let error = target.client().err().expect("not compiled in");
            assert!(matches!(error, Error::NotCompiled { .. }), "{error}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("the {target} runtime is not compiled")),
                "{message}"
            );
            assert!(
                message.contains(&format!("`{target}` cargo feature")),
                "{message}"
            );
        }
    }
}
