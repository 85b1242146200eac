//! The evaluation's result as data: [`EvalReport`], serialized as JSON with schema
//! [`SCHEMA_VERSION`] (its markdown is in `markdown.rs`).

use std::collections::BTreeMap;

use scar_index::ChunkerConfig;
use scar_retrieve::FirstStage;
use serde::{Deserialize, Serialize};

use crate::metrics::{Group, GroupMetrics, TestScore};
use crate::neighbours::NeighbourRow;
use crate::options::{NamedPolicy, Scope};
use crate::seeds::{SeedReport, SeedRow};
use crate::stats::PairedBootstrap;

/// Version of the JSON layout of [`EvalReport`]; bumped on any incompatible change.
pub const SCHEMA_VERSION: &str = "scar.eval/2";

/// Everything one evaluation run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// [`SCHEMA_VERSION`].
    pub schema: String,
    /// How the run was set up.
    pub settings: EvalSettings,
    /// What was evaluated and what was left out.
    pub data: DataSummary,
    /// One result per first stage.
    pub stages: Vec<StageResult>,
}

/// How a run was set up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSettings {
    /// The benchmark file.
    pub benchmark: String,
    /// The corpus folder its paths are relative to.
    pub corpus: String,
    /// The index folder.
    pub index: String,
    /// The embedding model the index was built with.
    pub model: String,
    /// Its dimension.
    pub dimension: usize,
    /// How the index cut documents.
    pub chunker: ChunkerConfig,
    /// Seeds per question.
    pub k: usize,
    /// The first stages evaluated.
    pub first_stages: Vec<FirstStage>,
    /// The policies evaluated.
    pub policies: Vec<NamedPolicy>,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// Where the first stage looked for seeds.
    pub scope: Scope,
    /// Whether only a quick subset of the tests ran.
    pub quick: bool,
}

/// What was evaluated and what was left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataSummary {
    /// Tests in the benchmark file.
    pub tests_in_file: usize,
    /// Tests chosen (all, or the quick subset) whose snippets resolved.
    pub tests_chosen: usize,
    /// Tests scored: their spans cover at least one indexed chunk.
    pub tests_scored: usize,
    /// Scored boundary-fragmented tests (gold spans over 2 or more chunks).
    pub boundary: usize,
    /// Scored atomic tests (gold spans inside 1 chunk).
    pub atomic: usize,
    /// Scored tests per `kind` label and group, when the benchmark has kinds.
    pub kinds: BTreeMap<String, BTreeMap<Group, usize>>,
    /// Documents the chosen tests refer to.
    pub documents: usize,
    /// Documents in the index (retrieval searches all of them).
    pub index_documents: usize,
    /// Chunks in the index.
    pub index_chunks: usize,
    /// Snippet paths found only by their file name.
    pub path_fallbacks: usize,
    /// One such fallback, `written → found`.
    pub path_fallback_example: Option<String>,
    /// Snippets and tests left out, one line each.
    pub problems: Vec<String>,
}

/// The results for one first stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageResult {
    /// How the seeds were found.
    pub first_stage: FirstStage,
    /// The judge that reranked the first stage's candidates before the seeds were taken, if one
    /// did (the same first stage is then also evaluated without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranker: Option<String>,
    /// Per policy, the means per group.
    pub policies: Vec<PolicyResult>,
    /// Paired bootstraps, per comparison, group and metric.
    pub comparisons: Vec<Comparison>,
    /// SCAR over the λ × γ grid, on the same seeds.
    pub sweep: Vec<SweepPoint>,
    /// The evidence walk over its depths, on the same seeds.
    pub depth_sweep: Vec<DepthPoint>,
    /// Per test: its gold chunks, seeds and per-policy scores.
    pub tests: Vec<TestRecord>,
    /// Every neighbour of every seed with its signals, when asked for.
    #[serde(skip)]
    pub neighbours: Vec<NeighbourRow>,
    /// Every seed with the first stage's signals and each judge's score, with the neighbours.
    #[serde(skip)]
    pub seeds: Vec<SeedRow>,
    /// How well each signal and judge tells the seeds that hold evidence, with the judges'
    /// times, with the neighbours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_signals: Option<SeedReport>,
}

impl StageResult {
    /// How its seeds were found, for people: `hybrid`, or `hybrid, reranked by sentence`.
    #[must_use]
    pub fn label(&self) -> String {
        match &self.reranker {
            None => self.first_stage.to_string(),
            Some(judge) => format!("{}, reranked by {judge}", self.first_stage),
        }
    }

    /// The result of policy `key`.
    #[must_use]
    pub fn policy(&self, key: &str) -> Option<&PolicyResult> {
        self.policies.iter().find(|p| p.key == key)
    }

    /// How many tests `group` holds, if any.
    #[must_use]
    pub fn tests_in(&self, group: Group) -> Option<usize> {
        self.policies
            .iter()
            .find_map(|p| p.group(group))
            .map(|m| m.n_tests)
    }
}

/// One policy's means per group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// Stable key.
    pub key: String,
    /// Label.
    pub label: String,
    /// The policy.
    pub policy: scar_policy::Policy,
    /// Means per group (groups without tests are absent).
    pub groups: Vec<GroupMetrics>,
}

impl PolicyResult {
    /// The means over `group`, if it has tests.
    #[must_use]
    pub fn group(&self, group: Group) -> Option<&GroupMetrics> {
        means_of(&self.groups, group)
    }
}

/// A paired bootstrap of `candidate − baseline` on one per-test metric over one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The candidate policy's key.
    pub candidate: String,
    /// The baseline policy's key.
    pub baseline: String,
    /// The tests compared.
    pub group: Group,
    /// `recall`, `chunks` or `tokens`.
    pub metric: String,
    /// The result.
    pub result: PairedBootstrap,
}

/// SCAR with one λ and γ, over the same seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// λ.
    pub lambda: f32,
    /// γ.
    pub gamma: f32,
    /// The window.
    pub window: u32,
    /// Means per group.
    pub groups: Vec<GroupMetrics>,
}

impl SweepPoint {
    /// The means over `group`, if it has tests.
    #[must_use]
    pub fn group(&self, group: Group) -> Option<&GroupMetrics> {
        means_of(&self.groups, group)
    }
}

/// The evidence walk at one depth, over the same seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepthPoint {
    /// The depth, as a multiple of the number of seeds.
    pub depth: u32,
    /// The window.
    pub window: u32,
    /// Means per group.
    pub groups: Vec<GroupMetrics>,
}

impl DepthPoint {
    /// The means over `group`, if it has tests.
    #[must_use]
    pub fn group(&self, group: Group) -> Option<&GroupMetrics> {
        means_of(&self.groups, group)
    }
}

/// One test under every policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    /// The test's id.
    pub id: String,
    /// Its kind label, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its group.
    pub group: Group,
    /// Its gold chunk ids.
    pub gold_chunks: Vec<u32>,
    /// The first stage's seeds, best first.
    pub seeds: Vec<u32>,
    /// Scores per policy key.
    pub scores: BTreeMap<String, TestScore>,
}

impl EvalReport {
    /// The policy result `key` of first stage `stage`.
    #[must_use]
    pub fn policy(&self, stage: FirstStage, key: &str) -> Option<&PolicyResult> {
        self.stage(stage)?.policy(key)
    }

    /// The results of first stage `stage`, without a reranker.
    #[must_use]
    pub fn stage(&self, stage: FirstStage) -> Option<&StageResult> {
        self.stages
            .iter()
            .find(|s| s.first_stage == stage && s.reranker.is_none())
    }
}

/// The means over `group` among a result's `groups`, if it has tests.
fn means_of(groups: &[GroupMetrics], group: Group) -> Option<&GroupMetrics> {
    groups.iter().find(|m| m.group == group)
}
