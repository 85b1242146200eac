//! The instruction sets our own kernels may use. `SCAR_MAX_CPU_ISA` caps them below what the
//! CPU has, as oneDNN's `ONEDNN_MAX_CPU_ISA` and `PyTorch`'s `ATEN_CPU_CAPABILITY` do: `avx2` runs
//! the kernels a laptop without AVX-512 gets, `avx512` those of a CPU without AMX, so that one
//! machine can measure and troubleshoot the classes below it. It caps the kernels of this crate
//! (capped at `avx2`, the f32 linear layers run on our AVX2 product) and of the chat models
//! (`scar-answer`); gemm's f32 products, which candle and the attention call, detect the CPU
//! themselves and are not capped.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that caps the instruction sets.
pub const MAX_ISA_VARIABLE: &str = "SCAR_MAX_CPU_ISA";

/// A class of x86-64 CPU, by the widest instructions our kernels use on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// AVX2 and FMA (and AVX-VNNI where present): most laptops.
    Avx2,
    /// AVX-512 (and its VNNI and BF16 extensions where present), without AMX.
    Avx512,
    /// AMX tiles too: no cap.
    Amx,
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Avx2 => "avx2",
            Self::Avx512 => "avx512",
            Self::Amx => "amx",
        })
    }
}

/// A value of [`MAX_ISA_VARIABLE`] that names no class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MAX_ISA_VARIABLE}={0:?} names no instruction set: use avx2, avx512 or amx")]
pub struct UnknownIsa(pub String);

impl FromStr for Isa {
    type Err = UnknownIsa;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "avx2" => Ok(Self::Avx2),
            "avx512" => Ok(Self::Avx512),
            "amx" => Ok(Self::Amx),
            _ => Err(UnknownIsa(value.to_owned())),
        }
    }
}

/// The cap [`MAX_ISA_VARIABLE`] sets, read once: `Ok(None)` where it is unset or empty. Front
/// ends report the error; the kernels treat a value they cannot read as no cap.
///
/// # Errors
/// [`UnknownIsa`] for a value that names no class.
pub fn max_isa() -> Result<Option<Isa>, UnknownIsa> {
    read_cap().clone()
}

/// The environment's cap, read once.
fn read_cap() -> &'static Result<Option<Isa>, UnknownIsa> {
    static CAP: OnceLock<Result<Option<Isa>, UnknownIsa>> = OnceLock::new();
    CAP.get_or_init(|| match std::env::var(MAX_ISA_VARIABLE) {
        Ok(value) if !value.trim().is_empty() => value.parse().map(Some),
        _ => Ok(None),
    })
}

/// True where the cap lets kernels use `isa`'s instructions (the CPU must still have them).
#[must_use]
pub fn allows(isa: Isa) -> bool {
    match read_cap() {
        Ok(Some(cap)) => isa <= *cap,
        Ok(None) | Err(_) => true,
    }
}

/// `" (our kernels capped at avx2 by SCAR_MAX_CPU_ISA)"` where a cap is set, for the lines that
/// say what a CPU computes on; empty otherwise.
#[must_use]
pub fn cap_note() -> String {
    match max_isa() {
        Ok(Some(cap)) => format!(" (our kernels capped at {cap} by {MAX_ISA_VARIABLE})"),
        _ => String::new(),
    }
}

/// pulp's dispatcher for this CPU, without AVX-512 where the cap says so; chosen once, as
/// every vectorised loop asks for it.
pub(crate) fn arch() -> pulp::Arch {
    static ARCH: OnceLock<pulp::Arch> = OnceLock::new();
    *ARCH.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if !allows(Isa::Avx512) {
            return pulp::x86::V3::try_new().map_or(pulp::Arch::Scalar, pulp::Arch::V3);
        }
        pulp::Arch::new()
    })
}

#[cfg(test)]
mod tests {
    use super::{Isa, UnknownIsa};

    #[test]
    fn classes_parse_in_any_case_and_order_by_width() {
        assert_eq!("AVX2".parse(), Ok(Isa::Avx2));
        assert_eq!(" avx512 ".parse(), Ok(Isa::Avx512));
        assert_eq!("amx".parse(), Ok(Isa::Amx));
        assert_eq!("sse".parse::<Isa>(), Err(UnknownIsa("sse".to_owned())));
        assert!(Isa::Avx2 < Isa::Avx512 && Isa::Avx512 < Isa::Amx);
        assert_eq!(Isa::Avx512.to_string(), "avx512");
    }
}
