//! Types every SCAR crate shares, with no heavy dependencies.
//!
//! A chunk is addressed by a [`ChunkId`], dense and stable within one index. Adjacency, the
//! thing SCAR walks, is (document, ordinal): [`Position`]; a step goes to one [`Side`], across a
//! cut of some [`SeamKind`]. An error is shown to a person, with each of its causes once,
//! through [`ErrorChain`].
//!
//! ```
//! use scar_core::{cosine, ChunkId};
//! let id = ChunkId(7);
//! assert_eq!(id.index(), 7);
//! assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
//! ```

mod error_chain;

pub use error_chain::ErrorChain;
use serde::{Deserialize, Serialize};

/// A chunk's id within one index: its row in the vector store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkId(pub u32);

impl ChunkId {
    /// The id as a row index.
    #[must_use]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for ChunkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Where a chunk sits: its document and its ordinal within that document (0, 1, 2, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Position {
    /// The document's id within the index.
    pub document: u32,
    /// The chunk's place in its document, contiguous from 0.
    pub ordinal: u32,
}

/// A direction along a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Towards the start of the document (lower ordinals).
    Previous,
    /// Towards the end of the document (higher ordinals).
    Next,
}

/// Where a cut between two adjacent chunks fell, from the strongest continuation to the weakest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeamKind {
    /// No thought ends at the cut: inside a sentence, a list or a table, or after a heading line.
    MidSentence,
    /// After a sentence's final mark (`.`, `!`, `?`, `。`, `！`, `？`, `।`, `॥`), within a paragraph.
    SentenceEnd,
    /// At a blank line between paragraphs.
    ParagraphBreak,
    /// The next chunk opens with a heading.
    SectionChange,
}

impl SeamKind {
    /// Every kind, strongest continuation first.
    pub const ALL: [Self; 4] = [
        Self::MidSentence,
        Self::SentenceEnd,
        Self::ParagraphBreak,
        Self::SectionChange,
    ];

    /// A short label for tables and the ledger: `mid-sentence`, `sentence end`, ...
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::MidSentence => "mid-sentence",
            Self::SentenceEnd => "sentence end",
            Self::ParagraphBreak => "paragraph break",
            Self::SectionChange => "section change",
        }
    }

    /// The byte that stands for the kind on disk: its place in [`ALL`](Self::ALL).
    #[must_use]
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The kind a stored byte stands for, if any.
    #[must_use]
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }
}

/// Dot product of two equally long vectors.
#[must_use]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    // Eight independent accumulators let the compiler vectorise without reassociation flags.
    let mut acc = [0.0f32; 8];
    let (a_chunks, a_rest) = a.as_chunks::<8>();
    let (b_chunks, b_rest) = b.as_chunks::<8>();
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// Euclidean norm.
#[must_use]
pub fn norm(a: &[f32]) -> f32 {
    dot(a, a).sqrt()
}

/// Cosine similarity; 0 when either vector has zero norm.
#[must_use]
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let denominator = norm(a) * norm(b);
    if denominator == 0.0 {
        0.0
    } else {
        dot(a, b) / denominator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seam_kinds_round_trip_through_their_stored_code() {
        for kind in SeamKind::ALL {
            assert_eq!(SeamKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(SeamKind::from_code(4), None);
        assert!(SeamKind::MidSentence < SeamKind::SectionChange);
    }

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }

    #[test]
    fn cosine_of_zero_vector_is_zero() {
        assert!(cosine(&[0.0, 0.0], &[1.0, 2.0]).abs() < f32::EPSILON);
    }

    #[test]
    fn cosine_is_scale_invariant() {
        let c = cosine(&[1.0, 2.0, 3.0], &[-2.0, 0.5, 4.0]);
        let scaled = cosine(&[10.0, 20.0, 30.0], &[-2.0, 0.5, 4.0]);
        assert!((c - scaled).abs() < 1e-6);
    }
}
