//! Everything a policy decided, as data: the crate documentation describes each field's meaning.

use scar_core::ChunkId;
use serde::{Deserialize, Serialize};

use scar_core::SeamKind;

use crate::{Judgement, Policy, Side};

/// The full account of one expansion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// The policy that ran.
    pub policy: Policy,
    /// The token budget, if one was set.
    pub budget: Option<usize>,
    /// One record per distinct seed, in rank order.
    pub seeds: Vec<SeedRecord>,
    /// The chunks handed to the generator, each once, in document order.
    pub context: Vec<ChunkId>,
    /// The sum of the context chunks' token counts.
    pub context_tokens: usize,
    /// How much BM25's rank counted in the hybrid first stage and the evidence walk's scores and
    /// bars, from 0 to 1: the share of the question its words could read
    /// ([`crate::Rankings::lexical_weight`]).
    #[serde(default = "full_weight")]
    pub lexical_weight: f32,
}

/// The lexical weight of ledgers written before it was recorded, when both lists counted alike.
fn full_weight() -> f32 {
    1.0
}

impl Ledger {
    /// Whether `id` is in the final context.
    #[must_use]
    pub fn contains(&self, id: ChunkId) -> bool {
        self.context.contains(&id)
    }

    /// How many neighbour records, over all seeds, have `outcome`.
    #[must_use]
    pub fn count(&self, outcome: Outcome) -> usize {
        self.neighbours()
            .filter(|record| record.outcome == outcome)
            .count()
    }

    /// All neighbour records, seed by seed.
    pub fn neighbours(&self) -> impl Iterator<Item = &NeighbourRecord> {
        self.seeds.iter().flat_map(|seed| &seed.neighbours)
    }
}

/// What happened to one seed and its neighbours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRecord {
    /// The seed chunk.
    pub id: ChunkId,
    /// Its rank among the seeds, from 1 (the reranker's order when one chose them); ranks of
    /// ignored duplicate seeds are skipped.
    pub rank: usize,
    /// Its first-stage score, as given.
    pub score: f32,
    /// The reranker's verdict, when one chose the seeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged: Option<Judgement>,
    /// cos(query, seed).
    pub query_cos: f32,
    /// The bar this seed's neighbours must pass: SCAR's γ·max(cos(q, c), 0), or the evidence
    /// walk's fused score of a chunk ranked at the depth in both lists; `None` for the baselines.
    pub bar: Option<f32>,
    /// The evidence walk's D, the rank in both lists whose fused score is the bar,
    /// (1 + w) / (60 + D) for the lexical weight w; `None` for the other policies.
    #[serde(default)]
    pub bar_rank: Option<u32>,
    /// The scope a [`Policy::Parent`] or [`Policy::Section`] expanded to; `None` for others.
    pub scope: Option<ParentScope>,
    /// Whether the seed made it into the context: false only when it did not fit the budget.
    pub in_context: bool,
    /// The neighbours considered, walking outwards: first the previous side, then the next.
    pub neighbours: Vec<NeighbourRecord>,
}

/// The part of a document a [`Policy::Parent`] or [`Policy::Section`] seed expands to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParentScope {
    /// The contiguous run of chunks sharing the seed's heading section.
    Section {
        /// The section index.
        section: u32,
    },
    /// The aligned block of ordinals `start..end` holding the seed (the document may end
    /// sooner).
    Block {
        /// First ordinal of the block.
        start: u32,
        /// One past the last ordinal of the block.
        end: u32,
    },
}

/// One step of a walk from a seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighbourRecord {
    /// The direction of the walk.
    pub side: Side,
    /// Steps from the seed, from 1.
    pub distance: u32,
    /// The chunk reached; `None` only for [`Outcome::DocumentEdge`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<ChunkId>,
    /// Where the cut crossed to reach it fell, when the index knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seam: Option<SeamKind>,
    /// cos(query, neighbour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_cos: Option<f32>,
    /// The continuity penalty b = 1 − cos(previous step, neighbour), from the stored continuity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty: Option<f32>,
    /// Its rank by dense similarity to the question, from 1, when the ranking reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_rank: Option<u32>,
    /// Its rank by BM25 for the question, from 1, when the ranking reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical_rank: Option<u32>,
    /// The rule's score: SCAR's S = cos(q, n) − λ·b, or the evidence walk's fused rank score
    /// Σ weight/(60 + rank); `None` for the baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// The seed's bar; `None` for the baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar: Option<f32>,
    /// score − bar: positive means the rule accepts; `None` for the baselines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f32>,
    /// What the policy did with the chunk.
    pub outcome: Outcome,
}

impl NeighbourRecord {
    pub(crate) fn edge(side: Side, distance: u32) -> Self {
        Self {
            side,
            distance,
            id: None,
            seam: None,
            query_cos: None,
            penalty: None,
            dense_rank: None,
            lexical_rank: None,
            score: None,
            bar: None,
            margin: None,
            outcome: Outcome::DocumentEdge,
        }
    }
}

impl Outcome {
    /// How people read the outcome: `accepted`, `rejected`, `not reached`, `already in context`,
    /// `document edge`, `over budget`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::NotReached => "not reached",
            Self::AlreadyInContext => "already in context",
            Self::DocumentEdge => "document edge",
            Self::OverBudget => "over budget",
        }
    }

    /// A one-character mark for the outcome: ✓ ✗ · = | $.
    #[must_use]
    pub fn mark(self) -> char {
        match self {
            Self::Accepted => '✓',
            Self::Rejected => '✗',
            Self::NotReached => '·',
            Self::AlreadyInContext => '=',
            Self::DocumentEdge => '|',
            Self::OverBudget => '$',
        }
    }
}

/// The fate of a neighbour record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Added to the context.
    Accepted,
    /// Failed the rule (SCAR's or the evidence walk's); the walk stops on this side.
    Rejected,
    /// Beyond a rejection on the same side; scored for display but not considered.
    NotReached,
    /// Already in the context as a seed or for a higher-ranked seed; the walk continues past it.
    AlreadyInContext,
    /// The document ends here; the walk stops on this side.
    DocumentEdge,
    /// The policy would add it, but the token budget did not allow it.
    OverBudget,
}
