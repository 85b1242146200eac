//! Which expansion rule to run, and with what token budget.

use serde::{Deserialize, Serialize};

use crate::{PolicyError, Result};

/// An expansion policy: SCAR, the evidence walk, or one of the baselines the paper compares
/// them with.
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
    /// The parent chunk, as parent-document retrievers build it: the aligned block of `block`
    /// chunks that holds the seed.
    Parent {
        /// Block length in chunks; at least 1.
        block: u32,
    },
    /// The seed's heading section: the chunks around it with the same section index. In a
    /// document without sections, the aligned block of `block` chunks that holds the seed.
    Section {
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
    /// The evidence walk: a neighbour joins when the question's own rankings (dense and BM25,
    /// fused) place it among the top `depth × seeds` chunks, as if the first stage had been asked
    /// for `depth` times as many seeds (and in the better half of the chunks searched).
    Evidence {
        /// How many times the number of seeds the rankings may reach; at least 1.
        depth: u32,
        /// How far to walk on each side; 0 keeps the seeds alone.
        window: u32,
    },
}

/// A person's name for the policy and its settings: `top-k`, `static ±1`, `parent (block 4)`,
/// `section (or block 4)`, `SCAR ±1, λ = 0.10, γ = 0.80`, `evidence ±2, depth 10×k`.
impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::TopK => f.write_str("top-k"),
            Self::StaticWindow { window } => write!(f, "static ±{window}"),
            Self::Parent { block } => write!(f, "parent (block {block})"),
            Self::Section { block } => write!(f, "section (or block {block})"),
            Self::Scar {
                lambda,
                gamma,
                window,
            } => write!(f, "SCAR ±{window}, λ = {lambda:.2}, γ = {gamma:.2}"),
            Self::Evidence { depth, window } => write!(f, "evidence ±{window}, depth {depth}×k"),
        }
    }
}

impl Policy {
    /// The paper's λ.
    pub const PAPER_LAMBDA: f32 = 0.1;
    /// The paper's γ.
    pub const PAPER_GAMMA: f32 = 0.8;
    /// The evidence walk's default depth: neighbours must rank among the top 10·k chunks.
    pub const DEFAULT_DEPTH: u32 = 10;
    /// The parent block's default length in chunks (about 4 children, as parent-document
    /// retrievers use).
    pub const DEFAULT_BLOCK: u32 = 4;

    /// SCAR with the paper's λ = 0.1 and γ = 0.8, walking `window` chunks on each side.
    #[must_use]
    pub const fn scar(window: u32) -> Self {
        Self::Scar {
            lambda: Self::PAPER_LAMBDA,
            gamma: Self::PAPER_GAMMA,
            window,
        }
    }

    /// The evidence walk at its default depth, walking `window` chunks on each side.
    #[must_use]
    pub const fn evidence(window: u32) -> Self {
        Self::Evidence {
            depth: Self::DEFAULT_DEPTH,
            window,
        }
    }

    /// Which kind of policy this is.
    #[must_use]
    pub fn kind(&self) -> PolicyKind {
        match self {
            Self::TopK => PolicyKind::TopK,
            Self::StaticWindow { .. } => PolicyKind::StaticWindow,
            Self::Parent { .. } => PolicyKind::Parent,
            Self::Section { .. } => PolicyKind::Section,
            Self::Scar { .. } => PolicyKind::Scar,
            Self::Evidence { .. } => PolicyKind::Evidence,
        }
    }

    /// The policy of `kind` with the relevant values from `settings`.
    #[must_use]
    pub fn from_kind(kind: PolicyKind, settings: &PolicySettings) -> Self {
        let window = settings.window.unwrap_or_else(|| kind.default_window());
        match kind {
            PolicyKind::TopK => Self::TopK,
            PolicyKind::StaticWindow => Self::StaticWindow { window },
            PolicyKind::Parent => Self::Parent {
                block: settings.block,
            },
            PolicyKind::Section => Self::Section {
                block: settings.block,
            },
            PolicyKind::Scar => Self::Scar {
                lambda: settings.lambda,
                gamma: settings.gamma,
                window,
            },
            PolicyKind::Evidence => Self::Evidence {
                depth: settings.depth,
                window,
            },
        }
    }

    /// Checks the parameters: γ in (0, 1), λ finite and ≥ 0, a block and a depth of at least 1.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::Parent { block: 0 } | Self::Section { block: 0 } => Err(PolicyError::EmptyBlock),
            Self::Evidence { depth: 0, .. } => Err(PolicyError::ZeroDepth),
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

/// The evidence walk ±2 at its default depth: the default policy (docs/EVALUATION.md says why).
impl Default for Policy {
    fn default() -> Self {
        Self::from_kind(PolicyKind::default(), &PolicySettings::default())
    }
}

/// The kinds of policy, each with one name used everywhere: the command line, the config file,
/// the JSON ledger and the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// [`Policy::TopK`].
    TopK,
    /// [`Policy::StaticWindow`].
    StaticWindow,
    /// [`Policy::Parent`].
    Parent,
    /// [`Policy::Section`].
    Section,
    /// [`Policy::Scar`].
    Scar,
    /// [`Policy::Evidence`].
    #[default]
    Evidence,
}

impl PolicyKind {
    /// Every kind, in the order menus list them.
    pub const ALL: [Self; 6] = [
        Self::Evidence,
        Self::Scar,
        Self::StaticWindow,
        Self::TopK,
        Self::Parent,
        Self::Section,
    ];

    /// The one name: `top_k`, `static_window`, `parent`, `section`, `scar`, `evidence`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::TopK => "top_k",
            Self::StaticWindow => "static_window",
            Self::Parent => "parent",
            Self::Section => "section",
            Self::Scar => "scar",
            Self::Evidence => "evidence",
        }
    }

    /// The window this kind walks when none is set: 2 for the evidence walk (it stops where the
    /// evidence does), 1 for SCAR and the static window (the paper's ±1), 0 for the others.
    #[must_use]
    pub fn default_window(self) -> u32 {
        match self {
            Self::Evidence => 2,
            Self::Scar | Self::StaticWindow => 1,
            Self::TopK | Self::Parent | Self::Section => 0,
        }
    }

    /// Whether the kind reads the window setting.
    #[must_use]
    pub fn walks(self) -> bool {
        matches!(self, Self::Evidence | Self::Scar | Self::StaticWindow)
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads a kind by its name; `topk`, `top-k`, `static` and `static-window` are accepted too.
impl std::str::FromStr for PolicyKind {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self> {
        let name = text.trim().to_ascii_lowercase().replace('-', "_");
        let alias = match name.as_str() {
            "topk" => Some(Self::TopK),
            "static" => Some(Self::StaticWindow),
            _ => None,
        };
        alias
            .or_else(|| Self::ALL.into_iter().find(|kind| kind.name() == name))
            .ok_or_else(|| PolicyError::UnknownKind(text.to_owned()))
    }
}

/// The values a policy may read, with their defaults: λ 0.1, γ 0.8 (the paper's), the kind's own
/// window, a block of 4 chunks and a depth of 10·k.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicySettings {
    /// SCAR's λ.
    pub lambda: f32,
    /// SCAR's γ.
    pub gamma: f32,
    /// Steps on each side; `None` for the kind's [`default_window`](PolicyKind::default_window).
    pub window: Option<u32>,
    /// The parent block, in chunks.
    pub block: u32,
    /// The evidence walk's depth, as a multiple of the number of seeds.
    pub depth: u32,
}

impl Default for PolicySettings {
    fn default() -> Self {
        Self {
            lambda: Policy::PAPER_LAMBDA,
            gamma: Policy::PAPER_GAMMA,
            window: None,
            block: Policy::DEFAULT_BLOCK,
            depth: Policy::DEFAULT_DEPTH,
        }
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
        assert_eq!(
            Policy::Section { block: 4 }.to_string(),
            "section (or block 4)"
        );
        assert_eq!(Policy::evidence(2).to_string(), "evidence ±2, depth 10×k");
    }

    #[test]
    fn kinds_have_one_name_and_take_the_old_spellings_too() {
        for kind in PolicyKind::ALL {
            assert_eq!(kind.name().parse::<PolicyKind>().unwrap(), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.name()));
            assert_eq!(
                Policy::from_kind(kind, &PolicySettings::default()).kind(),
                kind
            );
        }
        for (alias, kind) in [
            ("topk", PolicyKind::TopK),
            ("Top-K", PolicyKind::TopK),
            ("static", PolicyKind::StaticWindow),
            ("static-window", PolicyKind::StaticWindow),
        ] {
            assert_eq!(alias.parse::<PolicyKind>().unwrap(), kind);
        }
        assert_eq!(
            "window".parse::<PolicyKind>(),
            Err(PolicyError::UnknownKind("window".into()))
        );
    }

    #[test]
    fn settings_fill_each_kind_with_its_own_window_unless_one_is_set() {
        let defaults = PolicySettings::default();
        assert_eq!(
            Policy::from_kind(PolicyKind::Evidence, &defaults),
            Policy::evidence(2)
        );
        assert_eq!(
            Policy::from_kind(PolicyKind::Scar, &defaults),
            Policy::scar(1)
        );
        let set = PolicySettings {
            window: Some(3),
            ..defaults
        };
        assert_eq!(
            Policy::from_kind(PolicyKind::StaticWindow, &set),
            Policy::StaticWindow { window: 3 }
        );
        assert!(!PolicyKind::Parent.walks() && PolicyKind::Evidence.walks());
    }

    #[test]
    fn default_is_the_evidence_walk_and_scar_keeps_the_papers_setting() {
        assert_eq!(
            Policy::default(),
            Policy::Evidence {
                depth: 10,
                window: 2
            }
        );
        assert_eq!(
            Policy::scar(1),
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
        assert_eq!(
            Options::new(Policy::Section { block: 0 }),
            Err(PolicyError::EmptyBlock)
        );
        assert_eq!(
            Options::new(Policy::Evidence {
                depth: 0,
                window: 2
            }),
            Err(PolicyError::ZeroDepth)
        );
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
