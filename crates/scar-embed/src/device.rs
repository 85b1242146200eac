use std::fmt;
use std::str::FromStr;

use candle_core::Device;

use crate::{EmbedError, Result};

/// Where the model runs, as a person would type it: `cpu`, `cuda`, `cuda:N` or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// Always the CPU.
    Cpu,
    /// The given CUDA device; an error when CUDA is not compiled in or not present.
    Cuda(usize),
    /// CUDA device 0 when this build has CUDA and a GPU is present, else the CPU.
    #[default]
    Auto,
}

impl FromStr for DeviceChoice {
    type Err = EmbedError;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "auto" => Ok(Self::Auto),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Self::Cuda)
                .ok_or_else(|| EmbedError::BadDevice(text.to_owned())),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::Auto => f.write_str("auto"),
        }
    }
}

impl DeviceChoice {
    /// True where the model surely runs on the CPU: `cpu`, or `auto` in a build without CUDA
    /// (in a CUDA build, `auto` is the GPU unless none answers when it is opened).
    #[must_use]
    pub fn is_cpu(self) -> bool {
        self == Self::Cpu || (self == Self::Auto && !candle_core::utils::cuda_is_available())
    }

    /// Opens the device. `Auto` falls back to the CPU when no GPU can be used.
    pub fn open(self) -> Result<Device> {
        match self {
            Self::Cuda(ordinal) if candle_core::utils::cuda_is_available() => {
                Device::new_cuda(ordinal)
                    .map_err(|source| EmbedError::CudaUnavailable { ordinal, source })
            }
            Self::Cuda(_) => Err(EmbedError::CudaNotCompiled),
            Self::Auto if candle_core::utils::cuda_is_available() => {
                Ok(Device::new_cuda(0).unwrap_or(Device::Cpu))
            }
            Self::Cpu | Self::Auto => Ok(Device::Cpu),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_people_type() {
        assert_eq!("cpu".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cpu);
        assert_eq!(
            "CUDA".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(0)
        );
        assert_eq!(
            "cuda:2".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Cuda(2)
        );
        assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
        assert!("tpu".parse::<DeviceChoice>().is_err());
        assert!("cuda:x".parse::<DeviceChoice>().is_err());
    }

    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        if !candle_core::utils::cuda_is_available() {
            assert!(matches!(
                DeviceChoice::Cuda(0).open(),
                Err(EmbedError::CudaNotCompiled)
            ));
            assert!(matches!(DeviceChoice::Auto.open(), Ok(Device::Cpu)));
        }
    }
}
