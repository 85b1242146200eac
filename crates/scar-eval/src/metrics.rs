//! Per-test scores and their means, on plain data: chunk extents in, numbers out.

use std::ops::Range;

use scar_core::ChunkId;
use serde::{Deserialize, Serialize};

/// Where a chunk sits in the text: its document (any key, e.g. the index's slot) and its
/// character range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkExtent {
    /// The chunk.
    pub id: ChunkId,
    /// Its document.
    pub document: u32,
    /// Half-open code-point range in the document's text.
    pub chars: Range<usize>,
}

/// The part of a benchmark a test is reported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// Gold spans cover 2 or more chunks.
    Boundary,
    /// Gold spans cover exactly 1 chunk.
    Atomic,
    /// Every scored test.
    All,
}

impl Group {
    /// The three groups in report order.
    pub const ALL: [Self; 3] = [Self::Boundary, Self::Atomic, Self::All];

    /// The group of a test whose gold spans cover `gold_chunks` chunks; `None` for 0.
    #[must_use]
    pub fn of(gold_chunks: usize) -> Option<Self> {
        match gold_chunks {
            0 => None,
            1 => Some(Self::Atomic),
            _ => Some(Self::Boundary),
        }
    }

    /// Whether a test of group `test` (never `All`) counts in this group.
    #[must_use]
    pub fn contains(self, test: Self) -> bool {
        self == Self::All || self == test
    }

    /// The group's name in reports.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Boundary => "boundary",
            Self::Atomic => "atomic",
            Self::All => "all",
        }
    }
}

/// A test's evidence: gold spans merged per document, and the chunks they cover.
///
/// - Gold chunks: the chunks of the evidence's documents whose character range overlaps a gold
///   span (half-open ranges; touching is not overlapping).
/// - Group: a test whose gold spans cover 2 or more chunks is boundary-fragmented, one that
///   covers exactly 1 is atomic; a test covering none cannot be scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gold {
    spans: Vec<(u32, Range<usize>)>,
    chunks: Vec<ChunkId>,
}

impl Gold {
    /// The evidence `spans` (document, characters), with `chunks` the extents of every chunk
    /// of those documents (chunks of other documents are ignored).
    #[must_use]
    pub fn new(
        spans: impl IntoIterator<Item = (u32, Range<usize>)>,
        chunks: &[ChunkExtent],
    ) -> Self {
        let spans = union(spans);
        let mut ids: Vec<ChunkId> = chunks
            .iter()
            .filter(|chunk| {
                spans.iter().any(|(document, span)| {
                    *document == chunk.document && overlap(span, &chunk.chars) > 0
                })
            })
            .map(|chunk| chunk.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Self { spans, chunks: ids }
    }

    /// The gold chunks, sorted.
    #[must_use]
    pub fn chunks(&self) -> &[ChunkId] {
        &self.chunks
    }

    /// The merged gold spans, sorted by document and start.
    #[must_use]
    pub fn spans(&self) -> &[(u32, Range<usize>)] {
        &self.spans
    }

    /// Gold characters.
    #[must_use]
    pub fn chars(&self) -> usize {
        self.spans.iter().map(|(_, span)| span.len()).sum()
    }

    /// The test's group; `None` when the spans cover no chunk.
    #[must_use]
    pub fn group(&self) -> Option<Group> {
        Group::of(self.chunks.len())
    }
}

/// One test under one policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestScore {
    /// Gold chunks in the context / gold chunks.
    pub recall: f64,
    /// Unique chunks in the context.
    pub chunks: usize,
    /// The context's tokens (the ledger's `context_tokens`).
    pub tokens: usize,
    /// Context characters that are gold / context characters.
    pub span_precision: f64,
    /// Gold characters in the context / gold characters.
    pub span_recall: f64,
}

/// Scores a context (its chunks' extents, each once) against a test's gold.
///
/// - Recall: gold chunks in the context / gold chunks.
/// - Span precision and recall (LegalBench-RAG): with the context's characters and the gold
///   characters each taken as a union of ranges per document, overlapping characters /
///   context characters, and / gold characters. A context with no characters has precision 0.
#[must_use]
pub fn score(gold: &Gold, context: &[ChunkExtent], tokens: usize) -> TestScore {
    let found = gold
        .chunks
        .iter()
        .filter(|id| context.iter().any(|chunk| chunk.id == **id))
        .count();
    let retrieved = union(
        context
            .iter()
            .map(|chunk| (chunk.document, chunk.chars.clone())),
    );
    let retrieved_chars: usize = retrieved.iter().map(|(_, range)| range.len()).sum();
    let shared: usize = retrieved
        .iter()
        .flat_map(|(document, range)| {
            gold.spans
                .iter()
                .filter(move |(d, _)| d == document)
                .map(move |(_, span)| overlap(range, span))
        })
        .sum();
    TestScore {
        recall: ratio(found, gold.chunks.len()),
        chunks: context.len(),
        tokens,
        span_precision: ratio(shared, retrieved_chars),
        span_recall: ratio(shared, gold.chars()),
    }
}

/// The means of one policy's scores over one group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GroupMetrics {
    /// The group.
    pub group: Group,
    /// Tests in it.
    pub n_tests: usize,
    /// Mean per-test recall.
    pub recall: f64,
    /// Share of tests with every gold chunk in the context.
    pub full_recall: f64,
    /// Mean unique chunks in the context.
    pub mean_chunks: f64,
    /// `recall / mean_chunks` (0 when no chunk was retrieved).
    pub chunk_efficiency: f64,
    /// Mean context tokens.
    pub mean_tokens: f64,
    /// Mean per-test span precision.
    pub span_precision: f64,
    /// Mean per-test span recall.
    pub span_recall: f64,
}

/// The means over each of [`Group::ALL`] that has tests; `groups[i]` is test `i`'s group.
///
/// Every mean is over tests (macro average, as the paper reports recall), and chunk efficiency
/// is mean recall / mean unique chunks.
#[must_use]
pub fn aggregate(scores: &[TestScore], groups: &[Group]) -> Vec<GroupMetrics> {
    Group::ALL
        .into_iter()
        .filter_map(|group| {
            let members: Vec<&TestScore> = in_group(scores, groups, group).collect();
            if members.is_empty() {
                return None;
            }
            let mean = |f: &dyn Fn(&TestScore) -> f64| {
                members.iter().map(|s| f(s)).sum::<f64>() / members.len() as f64
            };
            let recall = mean(&|s| s.recall);
            let mean_chunks = mean(&|s| s.chunks as f64);
            Some(GroupMetrics {
                group,
                n_tests: members.len(),
                recall,
                full_recall: mean(&|s| f64::from(u8::from(s.recall >= 1.0))),
                mean_chunks,
                chunk_efficiency: if mean_chunks > 0.0 {
                    recall / mean_chunks
                } else {
                    0.0
                },
                mean_tokens: mean(&|s| s.tokens as f64),
                span_precision: mean(&|s| s.span_precision),
                span_recall: mean(&|s| s.span_recall),
            })
        })
        .collect()
}

/// The values of the tests that count in `group`; `groups[i]` is test `i`'s group.
pub(crate) fn in_group<'a, T>(
    values: &'a [T],
    groups: &'a [Group],
    group: Group,
) -> impl Iterator<Item = &'a T> {
    values
        .iter()
        .zip(groups)
        .filter(move |(_, test)| group.contains(**test))
        .map(|(value, _)| value)
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Characters two half-open ranges share.
fn overlap(a: &Range<usize>, b: &Range<usize>) -> usize {
    a.end.min(b.end).saturating_sub(a.start.max(b.start))
}

/// Sorted, disjoint ranges per document covering the same characters as `ranges`.
fn union(ranges: impl IntoIterator<Item = (u32, Range<usize>)>) -> Vec<(u32, Range<usize>)> {
    let mut ranges: Vec<(u32, Range<usize>)> =
        ranges.into_iter().filter(|(_, r)| !r.is_empty()).collect();
    ranges.sort_by_key(|(document, range)| (*document, range.start, range.end));
    let mut merged: Vec<(u32, Range<usize>)> = Vec::with_capacity(ranges.len());
    for (document, range) in ranges {
        match merged.last_mut() {
            Some((last_document, last))
                if *last_document == document && range.start <= last.end =>
            {
                last.end = last.end.max(range.end);
            }
            _ => merged.push((document, range)),
        }
    }
    merged
}
