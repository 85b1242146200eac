//! What a search returns, as the CLI prints it (`--json`) and the app draws it.

use std::time::Duration;

use scar_core::ChunkId;
use scar_index::Index;
use scar_policy::Ledger;
use serde::{Deserialize, Serialize};

use crate::{FirstStage, Prepared};

/// Version of the JSON layout of [`SearchReport`]; bumped on any incompatible change.
pub const SCHEMA_VERSION: &str = "scar.search/2";

/// Time per stage, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Embedding the question.
    pub embed_ms: f64,
    /// Finding the seeds.
    pub first_stage_ms: f64,
    /// Running the policy.
    pub policy_ms: f64,
}

/// A chunk of the final context, with what a reader needs to cite it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextChunk {
    /// The chunk's id in the index.
    pub id: ChunkId,
    /// The document's path.
    pub document: String,
    /// Its place in the document.
    pub ordinal: u32,
    /// Character range in the document's text, half-open.
    pub chars: [usize; 2],
    /// Tokens (embedding model's tokenizer).
    pub tokens: usize,
    /// Enclosing headings, " > "-joined (empty when none).
    pub heading_path: String,
    /// True for a first-stage seed, false for an added neighbour.
    pub seed: bool,
    /// The chunk's text.
    pub text: String,
}

/// Everything one search decided, in the versioned layout [`SCHEMA_VERSION`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchReport {
    /// [`SCHEMA_VERSION`].
    pub schema: String,
    /// The question.
    pub query: String,
    /// Tokens in the question.
    pub query_tokens: usize,
    /// How the seeds were found.
    pub first_stage: FirstStage,
    /// Seeds asked for.
    pub k: usize,
    /// Every decision: seeds, neighbours considered, outcome and scores (see scar-policy).
    pub ledger: Ledger,
    /// The context in document order.
    pub chunks: Vec<ContextChunk>,
    /// Time per stage.
    pub timings: Timings,
}

impl SearchReport {
    pub(crate) fn new(
        index: &Index,
        prepared: &Prepared,
        ledger: Ledger,
        policy_time: Duration,
    ) -> Self {
        let seeds: std::collections::HashSet<ChunkId> = ledger.seeds.iter().map(|s| s.id).collect();
        let chunks = ledger
            .context
            .iter()
            .filter_map(|&id| index.chunk(id))
            .map(|chunk| ContextChunk {
                id: chunk.id,
                document: chunk.document.path.display().to_string(),
                ordinal: chunk.ordinal,
                chars: [chunk.chars.start, chunk.chars.end],
                tokens: chunk.token_count,
                heading_path: chunk.heading_path.to_owned(),
                seed: seeds.contains(&chunk.id),
                text: chunk.text.to_owned(),
            })
            .collect();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Self {
            schema: SCHEMA_VERSION.to_owned(),
            query: prepared.query.clone(),
            query_tokens: prepared.query_tokens,
            first_stage: prepared.first_stage,
            k: prepared.k,
            ledger,
            chunks,
            timings: Timings {
                embed_ms: ms(prepared.embed_time),
                first_stage_ms: ms(prepared.first_stage_time),
                policy_ms: ms(policy_time),
            },
        }
    }
}
