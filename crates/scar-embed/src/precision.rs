use std::fmt;
use std::str::FromStr;

use candle_core::{DType, Device};

use crate::{EmbedError, Result};

/// The number format the model computes in, as a person would type it: `auto`, `f32`, `bf16`
/// or `f16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// f16 on a GPU; on a CPU bf16 where it has AVX-512 BF16, else f32. On a CPU bf16's vectors
    /// agree with f32's to a cosine of 0.9999, and retrieval recall moves by at most a third of
    /// a point (docs/PERFORMANCE.md, "Why bf16 is the default").
    #[default]
    Auto,
    /// Single precision throughout.
    F32,
    /// The linear layers' weights and inputs rounded to bfloat16, sums in f32 (on a GPU, every
    /// tensor in bf16).
    Bf16,
    /// Half precision; GPU only.
    F16,
}

impl FromStr for Precision {
    type Err = EmbedError;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "f32" | "fp32" | "float32" => Ok(Self::F32),
            "bf16" | "bfloat16" => Ok(Self::Bf16),
            "f16" | "fp16" | "float16" => Ok(Self::F16),
            _ => Err(EmbedError::BadPrecision(text.to_owned())),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::F16 => "f16",
        })
    }
}

impl Precision {
    /// What `self` means on `device` (never `Auto`), or why it cannot run there.
    pub(crate) fn on(self, device: &Device) -> Result<Self> {
        let unavailable = |reason: &'static str| EmbedError::PrecisionUnavailable {
            precision: self,
            reason,
        };
        match self {
            Self::Auto if device.is_cpu() && crate::bf16::available() => Ok(Self::Bf16),
            Self::Auto if device.is_cpu() => Ok(Self::F32),
            Self::Auto => Ok(Self::F16),
            Self::Bf16 if device.is_cpu() && !crate::bf16::available() => Err(unavailable(
                "this CPU has no AVX-512 BF16 instructions; use f32",
            )),
            Self::F16 if device.is_cpu() => Err(unavailable("f16 runs on a GPU only; use f32")),
            Self::F32 | Self::Bf16 | Self::F16 => Ok(self),
        }
    }

    /// The dtype of the model's tensors on `device` for a precision returned by [`Self::on`]:
    /// on a CPU the tensors stay f32 and bf16 lives in the packed weights.
    pub(crate) fn dtype(self, device: &Device) -> DType {
        match self {
            Self::Bf16 if device.is_cpu() => DType::F32,
            Self::Bf16 => DType::BF16,
            Self::F16 => DType::F16,
            Self::F32 | Self::Auto => DType::F32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_people_type() {
        for (text, precision) in [
            ("auto", Precision::Auto),
            ("F32", Precision::F32),
            ("bfloat16", Precision::Bf16),
            ("fp16", Precision::F16),
        ] {
            assert_eq!(text.parse::<Precision>().unwrap(), precision);
        }
        assert!(matches!(
            "int4".parse::<Precision>(),
            Err(EmbedError::BadPrecision(text)) if text == "int4"
        ));
        assert_eq!(
            Precision::Bf16.to_string().parse::<Precision>().unwrap(),
            Precision::Bf16
        );
    }

    #[test]
    fn resolves_on_the_cpu() {
        let cpu = Device::Cpu;
        let fastest = if crate::bf16::available() {
            Precision::Bf16
        } else {
            Precision::F32
        };
        assert_eq!(Precision::Auto.on(&cpu).unwrap(), fastest);
        assert_eq!(Precision::F32.on(&cpu).unwrap(), Precision::F32);
        assert!(matches!(
            Precision::F16.on(&cpu),
            Err(EmbedError::PrecisionUnavailable { .. })
        ));
        assert_eq!(Precision::Bf16.on(&cpu).is_ok(), crate::bf16::available());
        assert_eq!(Precision::Bf16.dtype(&cpu), DType::F32);
    }
}
