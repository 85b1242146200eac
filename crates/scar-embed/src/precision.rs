use std::fmt;
use std::str::FromStr;

use candle_core::{DType, Device};

use crate::bert::Packing;
use crate::{EmbedError, Result};

/// The number format the model computes in, as a person would type it: `auto`, `f32`, `bf16`,
/// `int8` or `f16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// f16 on a GPU; on a CPU the fastest measured that passed the gate of docs/PERFORMANCE.md
    /// (vectors at a cosine of 0.999 to f32's, retrieval recall within half a point): bf16 where
    /// it has AVX-512 BF16 (on AMX tiles where it has them), f16 weights where the f32 product is
    /// our AVX2 one (AVX2, FMA and F16C without AVX-512: as fast on batches, faster on one
    /// question, half the memory), else f32. int8 is not chosen: on the one CPU with both
    /// measured it was slower than bf16 (docs/PERFORMANCE.md).
    #[default]
    Auto,
    /// Single precision throughout.
    F32,
    /// The linear layers' weights and inputs rounded to bfloat16, sums in f32 (on a GPU, every
    /// tensor in bf16).
    Bf16,
    /// The linear layers' weights and inputs as int8 in blocks of 32, each block with an f32
    /// scale, sums exact within a block and f32 across; CPUs with AVX-512 VNNI or AVX-VNNI only.
    Int8,
    /// Half precision: on a GPU every tensor; on a CPU with AVX2, FMA and F16C the linear
    /// layers' weights rounded to f16 (half the memory), their inputs and every sum in f32.
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
            "int8" | "i8" => Ok(Self::Int8),
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
            Self::Int8 => "int8",
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
            Self::Auto if device.is_cpu() => Ok(Self::fastest_on_this_cpu()),
            Self::Auto => Ok(Self::F16),
            Self::Bf16 if device.is_cpu() && !crate::bf16::available() => Err(unavailable(
                "this CPU has no AVX-512 BF16 instructions; use f32",
            )),
            Self::Int8 if !device.is_cpu() => {
                Err(unavailable("int8 runs on a CPU only; use f16 or bf16"))
            }
            Self::Int8 if !crate::int8::available() => Err(unavailable(
                "this CPU has neither AVX-512 VNNI nor AVX-VNNI; use f32",
            )),
            Self::F16 if device.is_cpu() && !crate::f32_panels::available() => Err(unavailable(
                "f16 on a CPU needs AVX2, FMA and F16C; use f32",
            )),
            Self::F32 | Self::Bf16 | Self::Int8 | Self::F16 => Ok(self),
        }
    }

    /// What `auto` is on this CPU.
    fn fastest_on_this_cpu() -> Self {
        if crate::bf16::available() {
            Self::Bf16
        } else if crate::f32_panels::preferred() {
            Self::F16
        } else {
            Self::F32
        }
    }

    /// What `self` computes in on this CPU and with which instructions, e.g. `int8 on AVX-512
    /// VNNI` for `auto`; an error where it cannot run here.
    pub fn on_this_cpu(self) -> Result<String> {
        Ok(self.on(&Device::Cpu)?.described_on_cpu())
    }

    /// A precision returned by [`Self::on`] for the CPU, with the instructions it runs on.
    pub(crate) fn described_on_cpu(self) -> String {
        let instructions = match self {
            Self::Bf16 if crate::bf16::tiles_available() => "AMX tiles",
            Self::Bf16 => "AVX-512 BF16",
            Self::Int8 => crate::int8::Kernel::best().map_or("", crate::int8::Kernel::name),
            Self::F16 => "AVX2, FMA and F16C",
            _ => f32_instructions(),
        };
        format!("{self} on {instructions}{}", crate::cpu::cap_note())
    }

    /// How the linear layers hold their weights for a precision returned by [`Self::on`].
    pub(crate) fn packing(self, device: &Device) -> Packing {
        match self {
            Self::Bf16 if device.is_cpu() => Packing::Bf16,
            Self::Int8 => Packing::Int8,
            Self::F32 if device.is_cpu() && crate::f32_panels::preferred() => Packing::F32Panels,
            Self::F16 if device.is_cpu() => Packing::F16Panels,
            _ => Packing::Tensors,
        }
    }

    /// The dtype of the model's tensors on `device` for a precision returned by [`Self::on`]:
    /// on a CPU the tensors stay f32 and bf16 or f16 lives in the packed weights.
    pub(crate) fn dtype(self, device: &Device) -> DType {
        match self {
            Self::Bf16 | Self::F16 if device.is_cpu() => DType::F32,
            Self::Bf16 => DType::BF16,
            Self::F16 => DType::F16,
            Self::F32 | Self::Int8 | Self::Auto => DType::F32,
        }
    }
}

/// The widest instructions the f32 linear layers run on: our AVX2 product
/// ([`crate::f32_panels`]) where it is preferred, else gemm's kernels, which candle calls.
fn f32_instructions() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if crate::f32_panels::preferred() {
            return "AVX2 and FMA";
        }
        if has!("avx512f") {
            return "AVX-512";
        }
        "SSE"
    }
    // gemm's kernels for 64-bit ARM are NEON's, which every such CPU has.
    #[cfg(target_arch = "aarch64")]
    {
        "NEON"
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    "this CPU's vector unit"
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
            ("INT8", Precision::Int8),
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
        } else if crate::f32_panels::preferred() {
            Precision::F16
        } else {
            Precision::F32
        };
        assert_eq!(Precision::Auto.on(&cpu).unwrap(), fastest);
        assert_eq!(Precision::Int8.on(&cpu).is_ok(), crate::int8::available());
        assert!(
            Precision::Auto
                .on_this_cpu()
                .unwrap()
                .starts_with(&format!("{fastest} on "))
        );
        assert_eq!(Precision::F32.on(&cpu).unwrap(), Precision::F32);
        assert_eq!(
            Precision::F16.on(&cpu).is_ok(),
            crate::f32_panels::available()
        );
        assert_eq!(Precision::Bf16.on(&cpu).is_ok(), crate::bf16::available());
        assert_eq!(Precision::Bf16.dtype(&cpu), DType::F32);
        assert_eq!(Precision::F16.dtype(&cpu), DType::F32);
    }
}
