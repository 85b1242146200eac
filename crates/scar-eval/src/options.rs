//! How an evaluation runs: the policies compared, the first stages, the bootstrap and the
//! sweeps, validated once before any question is embedded.

use scar_policy::Policy;
use scar_retrieve::FirstStage;
use serde::{Deserialize, Serialize};

use crate::seeds::SeedJudge;
use crate::stats::DEFAULT_SEED;
use crate::{EvalError, Result};

/// A policy under evaluation, with a stable key for JSON and a label for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedPolicy {
    /// Stable key, e.g. `scar_1`.
    pub key: String,
    /// Label, e.g. `SCAR ±1`.
    pub label: String,
    /// The policy.
    pub policy: Policy,
}

impl NamedPolicy {
    /// A named policy.
    #[must_use]
    pub fn new(key: &str, label: &str, policy: Policy) -> Self {
        Self {
            key: key.to_owned(),
            label: label.to_owned(),
            policy,
        }
    }
}

/// The key of SCAR ±1 with the paper's λ and γ.
pub const SCAR_1: &str = "scar_1";
/// The key of the static ±1 window.
pub const STATIC_1: &str = "static_1";
/// The key of SCAR ±1 without the continuity penalty (λ = 0).
pub const SCAR_1_NO_PENALTY: &str = "scar_1_lambda0";
/// The key of the evidence walk at its defaults (±2, depth 10×k), the default policy.
pub const EVIDENCE: &str = "evidence_2";

/// The comparison set: the paper's (top-k, static ±1 and ±2, parent, SCAR ±1 and ±2 with λ = 0.1
/// and γ = 0.8, SCAR ±1 with λ = 0), the heading-section variant of parent, and the evidence
/// walk ±1, ±2 (the default) and ±3 at its default depth.
#[must_use]
pub fn default_policies() -> Vec<NamedPolicy> {
    let gamma = Policy::PAPER_GAMMA;
    let block = Policy::DEFAULT_BLOCK;
    vec![
        NamedPolicy::new("top_k", "top-k", Policy::TopK),
        NamedPolicy::new(STATIC_1, "static ±1", Policy::StaticWindow { window: 1 }),
        NamedPolicy::new("static_2", "static ±2", Policy::StaticWindow { window: 2 }),
        NamedPolicy::new("parent_4", "parent (block of 4)", Policy::Parent { block }),
        NamedPolicy::new(
            "section",
            "section (or block of 4)",
            Policy::Section { block },
        ),
        NamedPolicy::new(SCAR_1, "SCAR ±1", Policy::scar(1)),
        NamedPolicy::new("scar_2", "SCAR ±2", Policy::scar(2)),
        NamedPolicy::new(
            SCAR_1_NO_PENALTY,
            "SCAR ±1, λ = 0",
            Policy::Scar {
                lambda: 0.0,
                gamma,
                window: 1,
            },
        ),
        NamedPolicy::new("evidence_1", "evidence ±1", Policy::evidence(1)),
        NamedPolicy::new(EVIDENCE, "evidence ±2", Policy::evidence(2)),
        NamedPolicy::new("evidence_3", "evidence ±3", Policy::evidence(3)),
    ]
}

/// Where the first stage looks for a test's seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The whole index, as a user's search does (and as LegalBench-RAG scores retrieval).
    #[default]
    Index,
    /// Only the documents that hold the test's evidence: the "oracle document" setting, which
    /// isolates the expansion from finding the right document. It matters for benchmarks whose
    /// questions repeat across documents, such as `ContractNLI`'s 17 hypotheses per contract.
    Document,
}

impl std::str::FromStr for Scope {
    type Err = EvalError;

    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "index" => Ok(Self::Index),
            "document" => Ok(Self::Document),
            _ => Err(EvalError::Options(format!(
                "unknown scope `{text}`: use index or document"
            ))),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Index => "index",
            Self::Document => "document",
        })
    }
}

/// How to run an evaluation. [`Default`]: k = 5, the hybrid first stage, [`default_policies`],
/// the evidence walk against static ±1 and against SCAR ±1, SCAR ±1 against static ±1 and λ = 0
/// against λ = 0.1, B = 10,000 resamples with [`DEFAULT_SEED`], the sweep
/// λ ∈ {0, 0.05, 0.1, 0.2, 0.3} × γ ∈ {0.60, 0.65, …, 0.95} for SCAR ±1, and the evidence walk
/// ±2 at depths 1 to 50.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalOptions {
    /// Seeds per question.
    pub k: usize,
    /// First stages, each evaluated on its own seeds.
    pub first_stages: Vec<FirstStage>,
    /// Policies, all run on the same seeds.
    pub policies: Vec<NamedPolicy>,
    /// `(candidate, baseline)` policy keys to compare with the paired bootstrap.
    pub comparisons: Vec<(String, String)>,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// λ values of the sweep.
    pub sweep_lambdas: Vec<f32>,
    /// γ values of the sweep.
    pub sweep_gammas: Vec<f32>,
    /// The SCAR window of the sweep.
    pub sweep_window: u32,
    /// Depths of the evidence walk's sweep.
    pub sweep_depths: Vec<u32>,
    /// The evidence walk's window in its sweep.
    pub sweep_depth_window: u32,
    /// Where the first stage looks for seeds.
    pub scope: Scope,
    /// Whether the tests are a quick subset (recorded in the report).
    pub quick: bool,
    /// Whether to gather the per-neighbour and per-seed tables.
    pub neighbour_table: bool,
    /// Judges of the seeds, each scoring every seed in the per-seed table (with
    /// `neighbour_table`).
    pub seed_judges: Vec<SeedJudge>,
    /// A judge that reranks the first stage's candidates: each first stage is then evaluated
    /// twice, without and with it, on the same tests.
    pub reranker: Option<SeedJudge>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            k: scar_retrieve::DEFAULT_K,
            first_stages: vec![FirstStage::default()],
            policies: default_policies(),
            comparisons: vec![
                (EVIDENCE.to_owned(), STATIC_1.to_owned()),
                (EVIDENCE.to_owned(), SCAR_1.to_owned()),
                (SCAR_1.to_owned(), STATIC_1.to_owned()),
                (SCAR_1_NO_PENALTY.to_owned(), SCAR_1.to_owned()),
            ],
            resamples: 10_000,
            seed: DEFAULT_SEED,
            sweep_lambdas: vec![0.0, 0.05, 0.1, 0.2, 0.3],
            sweep_gammas: (0..8).map(|i| 0.6 + 0.05 * i as f32).collect(),
            sweep_window: 1,
            sweep_depths: vec![1, 2, 3, 5, 7, 10, 15, 20, 30, 50],
            sweep_depth_window: 2,
            scope: Scope::Index,
            quick: false,
            neighbour_table: false,
            seed_judges: Vec::new(),
            reranker: None,
        }
    }
}

impl EvalOptions {
    /// Checks k, the first stages, the policies, the comparison keys and the sweep values.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(EvalError::Options(message));
        if self.k == 0 {
            return bad("k must be at least 1".into());
        }
        if self.first_stages.is_empty() {
            return bad("name at least one first stage".into());
        }
        if !self.seed_judges.is_empty() && !self.neighbour_table {
            return bad(
                "judges of the seeds are measured in the per-seed table: ask for it".into(),
            );
        }
        if self.policies.is_empty() {
            return bad("name at least one policy".into());
        }
        for policy in &self.policies {
            policy.policy.validate()?;
        }
        for (candidate, baseline) in &self.comparisons {
            for key in [candidate, baseline] {
                if !self.policies.iter().any(|p| &p.key == key) {
                    return bad(format!(
                        "comparison names policy `{key}`, which is not evaluated"
                    ));
                }
            }
        }
        for &lambda in &self.sweep_lambdas {
            for &gamma in &self.sweep_gammas {
                Policy::Scar {
                    lambda,
                    gamma,
                    window: self.sweep_window,
                }
                .validate()?;
            }
        }
        for &depth in &self.sweep_depths {
            Policy::Evidence {
                depth,
                window: self.sweep_depth_window,
            }
            .validate()?;
        }
        Ok(())
    }
}
