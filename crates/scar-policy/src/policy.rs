//! Which expansion rule to run, and with what token budget.

use serde::{Deserialize, Serialize};

use crate::{PolicyError, Result};

/// An expansion policy: SCAR or one of the baselines the paper compares it with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Policy {
    /// The seeds alone.
    TopK,
    /// Every neighbour within `window` chunks of a seed.
    StaticWindow {
        /// How far to reach on each side.
        window: u32,
    },
    /// The seed's heading section: the chunks around it with the same section index. In a
    /// document without sections, the aligned block of `block` chunks that holds the seed.
    Parent {
        /// Block length in chunks, used when the seed has no section; at least 1.
        block: u32,
    },
    /// SCAR: a neighbour joins when `cos(q, n) − λ·(1 − cos(c, n)) > γ·max(cos(q, c), 0)`.
    Scar {
        /// λ, the weight of the continuity penalty; finite and ≥ 0.
        lambda: f32,
        /// γ, the bar as a share of the seed's own relevance; in (0, 1).
        gamma: f32,
        /// How far to walk on each side; 0 keeps the seeds alone.
        window: u32,
    },
}

/// A person's name for the policy and its settings: `top-k`, `static ±1`, `parent (block 4)`,
/// `SCAR ±1, λ = 0.10, γ = 0.80`.
impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::TopK => f.write_str("top-k"),
            Self::StaticWindow { window } => write!(f, "static ±{window}"),
            Self::Parent { block } => write!(f, "parent (block {block})"),
            Self::Scar {
                lambda,
                gamma,
                window,
            } => write!(f, "SCAR ±{window}, λ = {lambda:.2}, γ = {gamma:.2}"),
        }
    }
}

impl Policy {
    /// The paper's λ.
    pub const PAPER_LAMBDA: f32 = 0.1;
    /// The paper's γ.
    pub const PAPER_GAMMA: f32 = 0.8;

    /// SCAR with the paper's λ = 0.1 and γ = 0.8, walking `window` chunks on each side.
    #[must_use]
    pub const fn scar(window: u32) -> Self {
        Self::Scar {
            lambda: Self::PAPER_LAMBDA,
            gamma: Self::PAPER_GAMMA,
            window,
        }
    }

    /// Checks the parameters: γ in (0, 1), λ finite and ≥ 0, a parent block of at least 1.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::Parent { block: 0 } => Err(PolicyError::EmptyBlock),
            Self::Scar { gamma, .. } if !(gamma > 0.0 && gamma < 1.0) => {
                Err(PolicyError::Gamma(gamma))
            }
            Self::Scar { lambda, .. } if !(lambda.is_finite() && lambda >= 0.0) => {
                Err(PolicyError::Lambda(lambda))
            }
            _ => Ok(()),
        }
    }
}

/// SCAR(±1) with the paper's settings.
impl Default for Policy {
    fn default() -> Self {
        Self::scar(1)
    }
}

/// A validated policy and an optional token budget: everything [`expand`](crate::expand) needs
/// besides the query, the seeds and the source.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Options {
    policy: Policy,
    budget: Option<usize>,
}

impl Options {
    /// Validates `policy`; the budget starts unlimited.
    pub fn new(policy: Policy) -> Result<Self> {
        policy.validate()?;
        Ok(Self {
            policy,
            budget: None,
        })
    }

    /// The same options with at most `budget` context tokens (`None`: unlimited).
    #[must_use]
    pub fn with_budget(self, budget: Option<usize>) -> Self {
        Self { budget, ..self }
    }

    /// The policy to run.
    #[must_use]
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The token budget, if any.
    #[must_use]
    pub fn budget(&self) -> Option<usize> {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_people_write_them() {
        assert_eq!(Policy::TopK.to_string(), "top-k");
        assert_eq!(Policy::StaticWindow { window: 2 }.to_string(), "static ±2");
        assert_eq!(Policy::Parent { block: 4 }.to_string(), "parent (block 4)");
        assert_eq!(Policy::scar(1).to_string(), "SCAR ±1, λ = 0.10, γ = 0.80");
    }

    #[test]
    fn default_is_the_papers_setting() {
        assert_eq!(
            Policy::default(),
            Policy::Scar {
                lambda: 0.1,
                gamma: 0.8,
                window: 1
            }
        );
        assert_eq!(Options::default().policy(), Policy::default());
        assert_eq!(Options::default().budget(), None);
    }

    #[test]
    fn validation_rejects_out_of_range_parameters() {
        let scar = |lambda, gamma| Policy::Scar {
            lambda,
            gamma,
            window: 1,
        };
        assert_eq!(scar(0.1, 0.0).validate(), Err(PolicyError::Gamma(0.0)));
        assert_eq!(scar(0.1, 1.0).validate(), Err(PolicyError::Gamma(1.0)));
        assert!(matches!(
            scar(0.1, f32::NAN).validate(),
            Err(PolicyError::Gamma(_))
        ));
        assert_eq!(scar(-0.5, 0.8).validate(), Err(PolicyError::Lambda(-0.5)));
        assert!(matches!(
            scar(f32::INFINITY, 0.8).validate(),
            Err(PolicyError::Lambda(_))
        ));
        assert_eq!(
            Options::new(Policy::Parent { block: 0 }),
            Err(PolicyError::EmptyBlock)
        );
        assert!(Options::new(scar(0.0, 0.5)).is_ok());
        assert!(Options::new(Policy::Parent { block: 1 }).is_ok());
        assert!(Options::new(Policy::StaticWindow { window: 0 }).is_ok());
    }

    #[test]
    fn policies_serialize_with_a_snake_case_kind() {
        let json = serde_json::to_string(&Policy::StaticWindow { window: 2 }).unwrap();
        assert_eq!(json, r#"{"kind":"static_window","window":2}"#);
        let back: Policy = serde_json::from_str(r#"{"kind":"top_k"}"#).unwrap();
        assert_eq!(back, Policy::TopK);
    }
}
