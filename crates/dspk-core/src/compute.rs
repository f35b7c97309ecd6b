//! Compute targets: which CubeCL runtime runs the kernels, chosen at run time.
//!
//! Runtimes are cargo features (`wgpu` by default, `cuda`, `hip`, `cpu`); a binary can carry
//! several and pick one when it starts, from `DSPK_RUNTIME` or by preference (GPUs first).
//! This module is the only place in dspk that turns a choice into a CubeCL client.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use cubecl::device::WgpuDeviceKind;
use cubecl::{Device, client::Client};

use crate::{Error, KernelCache, Result};

/// The environment variable that picks a runtime: `wgpu`, `cuda`, `hip` or `cpu`.
pub const RUNTIME_ENV: &str = "DSPK_RUNTIME";

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
                        Self::Wgpu => target.device().ok().map(|_| (2, target)),
                        Self::Cpu => target.device().ok().map(|_| (1, target)),
                        _ => target.device().ok().map(|_| (0, target)),
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

    /// The CubeCL device this target runs on: device 0 of CUDA or HIP; for wgpu the adapter
    /// wgpu ranks best (a discrete GPU first, a software adapter such as lavapipe when there is
    /// nothing else; `CUBECL_WGPU_DEFAULT_DEVICE` overrides); the CPU.
    ///
    /// The [`KernelCache`] setting is applied to CubeCL first (once per process): CubeCL reads
    /// its configuration when the first device opens.
    ///
    /// # Errors
    ///
    /// [`Error::NotCompiled`], or [`Error::NoDevice`] with the runtime's reason.
    pub fn device(self) -> Result<Device> {
        self.ensure_compiled()?;
        KernelCache::get();
        let device = match self {
            Self::Cuda => Device::cuda(0),
            Self::Hip => Device::rocm(0),
            Self::Wgpu => Device::wgpu(WgpuDeviceKind::DefaultDevice),
            Self::Cpu => Device::cpu(),
        };
        device.map_err(|reason| Error::NoDevice {
            target: self.name(),
            reason: reason.to_string(),
            compiled: compiled_list(),
        })
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
