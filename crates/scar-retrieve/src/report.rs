//! What a search returns, as the CLI prints it (`--json`) and the app draws it.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use scar_core::ChunkId;
use scar_policy::Ledger;
use serde::{Deserialize, Serialize};

use crate::{Comparison, ContextSize, FirstStage, Prepared, Result, StoredChunk};

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
    /// For a document carried inside the file (a mail's attachment), its name there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<String>,
    /// Its place in the document.
    pub ordinal: u32,
    /// Character range in the document's text, half-open.
    pub chars: [usize; 2],
    /// Tokens (embedding model's tokenizer).
    pub tokens: usize,
    /// Enclosing headings, " > "-joined (empty when none).
    pub heading_path: String,
    /// The page it starts on, numbered from 1, for a document of pages (PDF); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// True for a first-stage seed, false for an added neighbour.
    pub seed: bool,
    /// The chunk's text.
    pub text: String,
}

impl ContextChunk {
    /// Its document as a person names it: the file's name, and an attachment's inside it.
    #[must_use]
    pub fn name(&self) -> String {
        document_name(&self.document, self.attachment.as_deref())
    }

    /// Where the chunk is, as it follows the file's name: `¶3`, `¶3, p. 2` in a document of
    /// pages, `› notes.md ¶3` in a mail's attachment.
    #[must_use]
    pub fn place(&self) -> String {
        place(self.attachment.as_deref(), self.ordinal, self.page)
    }
}

/// Where a chunk that the ledger names is, a seed or a neighbour, in the context or not: what a
/// front end shows beside each decision without opening the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkPlace {
    /// The chunk's id in the index.
    pub id: ChunkId,
    /// The document's path.
    pub document: String,
    /// For a document carried inside the file (a mail's attachment), its name there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<String>,
    /// Its place in the document.
    pub ordinal: u32,
    /// The page it starts on, numbered from 1, for a document of pages (PDF); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

impl ChunkPlace {
    /// Its document as a person names it, as [`ContextChunk::name`].
    #[must_use]
    pub fn name(&self) -> String {
        document_name(&self.document, self.attachment.as_deref())
    }

    /// Where the chunk is, as [`ContextChunk::place`] words it.
    #[must_use]
    pub fn place(&self) -> String {
        place(self.attachment.as_deref(), self.ordinal, self.page)
    }
}

pub(crate) fn document_name(path: &str, attachment: Option<&str>) -> String {
    scar_index::document_name(Path::new(path), attachment)
}

fn place(attachment: Option<&str>, ordinal: u32, page: Option<u32>) -> String {
    let mut place = match attachment {
        Some(name) => format!("› {name} ¶{ordinal}"),
        None => format!("¶{ordinal}"),
    };
    if let Some(page) = page {
        let _ = write!(place, ", p. {page}");
    }
    place
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
    /// The size of the context static ±1 ([`crate::BASELINE`]) takes from the same seeds.
    pub static_window_1: ContextSize,
    /// Every seed and neighbour the ledger names, once each, in the ledger's order.
    pub places: Vec<ChunkPlace>,
    /// Time per stage.
    pub timings: Timings,
}

impl SearchReport {
    /// The report of `ledger`, citing each chunk as `cite` reads it.
    pub(crate) fn new(
        cite: impl Fn(ChunkId) -> Result<StoredChunk>,
        prepared: &Prepared,
        ledger: Ledger,
        static_window_1: ContextSize,
        policy_time: Duration,
    ) -> Result<Self> {
        let seeds: HashSet<ChunkId> = ledger.seeds.iter().map(|s| s.id).collect();
        let chunks = ledger
            .context
            .iter()
            .map(|&id| cite(id))
            .map(|chunk| {
                chunk.map(|chunk| ContextChunk {
                    id: chunk.id,
                    seed: seeds.contains(&chunk.id),
                    document: chunk.document,
                    attachment: chunk.attachment,
                    ordinal: chunk.ordinal,
                    chars: chunk.chars,
                    tokens: chunk.tokens,
                    heading_path: chunk.heading_path,
                    page: chunk.page,
                    text: chunk.text,
                })
            })
            .collect::<Result<_>>()?;
        let named = ledger.seeds.iter().flat_map(|seed| {
            std::iter::once(seed.id).chain(seed.neighbours.iter().filter_map(|n| n.id))
        });
        let mut seen = HashSet::new();
        let places = named
            .filter(|&id| seen.insert(id))
            .map(&cite)
            .map(|chunk| {
                chunk.map(|chunk| ChunkPlace {
                    id: chunk.id,
                    document: chunk.document,
                    attachment: chunk.attachment,
                    ordinal: chunk.ordinal,
                    page: chunk.page,
                })
            })
            .collect::<Result<_>>()?;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Ok(Self {
            schema: SCHEMA_VERSION.to_owned(),
            query: prepared.query.clone(),
            query_tokens: prepared.query_tokens,
            first_stage: prepared.first_stage,
            k: prepared.k,
            ledger,
            chunks,
            static_window_1,
            places,
            timings: Timings {
                embed_ms: ms(prepared.embed_time),
                first_stage_ms: ms(prepared.first_stage_time),
                policy_ms: ms(policy_time),
            },
        })
    }

    /// Where chunk `id` is, if the ledger names it.
    #[must_use]
    pub fn place(&self, id: ChunkId) -> Option<&ChunkPlace> {
        self.places.iter().find(|place| place.id == id)
    }

    /// The context beside static ±1's on the same seeds: the sizes every front end shows,
    /// worded by [`Comparison`]'s `Display`.
    #[must_use]
    pub fn comparison(&self) -> Comparison {
        Comparison {
            policy: ContextSize::of(&self.ledger),
            baseline: self.static_window_1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_says_where_it_is_after_its_file_name() {
        let chunk = ContextChunk {
            id: ChunkId(4),
            document: "/d/report.pdf".to_owned(),
            attachment: None,
            ordinal: 3,
            chars: [0, 10],
            tokens: 4,
            heading_path: String::new(),
            page: None,
            seed: true,
            text: "Crane hire".to_owned(),
        };
        assert_eq!(chunk.place(), "¶3");
        let paged = ContextChunk {
            page: Some(2),
            ..chunk.clone()
        };
        assert_eq!(paged.place(), "¶3, p. 2");
        let attached = ContextChunk {
            attachment: Some("notes.md".to_owned()),
            ..chunk.clone()
        };
        assert_eq!(attached.place(), "› notes.md ¶3");
        assert_eq!(
            (chunk.name().as_str(), attached.name().as_str()),
            ("report.pdf", "report.pdf › notes.md")
        );
        // A chunk outside the context is placed in the same words.
        let outside = ChunkPlace {
            id: attached.id,
            document: attached.document.clone(),
            attachment: attached.attachment.clone(),
            ordinal: attached.ordinal,
            page: Some(2),
        };
        assert_eq!(
            (outside.name().as_str(), outside.place().as_str()),
            ("report.pdf › notes.md", "› notes.md ¶3, p. 2")
        );
        // Both fields stay out of the JSON of chunks that have neither.
        let json = serde_json::to_value(&chunk).unwrap();
        assert!(json.get("page").is_none() && json.get("attachment").is_none());
        let back: ContextChunk = serde_json::from_value(json).unwrap();
        assert_eq!(back, chunk);
    }
}
