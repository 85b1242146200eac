//! The crate's one error type.

use scar_core::ChunkId;

use crate::Side;

/// Why a policy could not be built or run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// SCAR's γ is outside (0, 1).
    #[error("SCAR's gamma must lie strictly between 0 and 1, got {0}; the paper uses 0.8")]
    Gamma(f32),
    /// SCAR's λ is negative or not finite.
    #[error("SCAR's lambda must be finite and at least 0, got {0}; the paper uses 0.1")]
    Lambda(f32),
    /// A parent block of zero chunks.
    #[error("a parent block must hold at least 1 chunk")]
    EmptyBlock,
    /// An evidence depth of zero.
    #[error("the evidence depth must be at least 1 (it multiplies the number of seeds)")]
    ZeroDepth,
    /// A policy name nobody knows.
    #[error("unknown policy `{0}`: use evidence, scar, static_window, top_k, parent or section")]
    UnknownKind(String),
    /// The evidence walk was asked to run without the first stage's rankings.
    #[error("the evidence policy needs the question's dense and BM25 rankings; none were given")]
    NoRankings,
    /// The query embedding cannot be compared.
    #[error("the query embedding {0}; check the embedding model's output")]
    Query(VectorProblem),
    /// A chunk embedding cannot be compared.
    #[error("the embedding of chunk {id} {problem}")]
    Chunk {
        /// The chunk at fault.
        id: ChunkId,
        /// What is wrong with its embedding.
        problem: VectorProblem,
    },
    /// A chunk embedding and the query embedding differ in length.
    #[error(
        "chunk {id} has {found} dimensions but the query has {expected}; \
         embed queries with the model that built the index"
    )]
    Dimensions {
        /// The chunk at fault.
        id: ChunkId,
        /// The query's dimension.
        expected: usize,
        /// The chunk's dimension.
        found: usize,
    },
    /// A stored continuity is NaN or infinite.
    #[error("the stored continuity of chunk {id} towards {side:?} is {value}")]
    Continuity {
        /// The chunk whose continuity was asked for.
        id: ChunkId,
        /// Towards which neighbour.
        side: Side,
        /// The value found.
        value: f32,
    },
}

/// What makes an embedding unusable for cosines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VectorProblem {
    /// All components are zero, so no direction to compare.
    #[error("has zero norm")]
    ZeroNorm,
    /// Some component is NaN or infinite, or the norm overflows.
    #[error("is not finite")]
    NonFinite,
}

impl VectorProblem {
    /// The problem with a vector of this norm, if any.
    pub(crate) fn of_norm(norm: f32) -> Option<Self> {
        if !norm.is_finite() {
            Some(Self::NonFinite)
        } else if norm == 0.0 {
            Some(Self::ZeroNorm)
        } else {
            None
        }
    }
}

/// The crate's result type.
pub type Result<T, E = PolicyError> = std::result::Result<T, E>;
