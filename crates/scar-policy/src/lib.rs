//! SCAR, the evidence walk and their baselines as a pure function: seeds in, a [`Ledger`] of every decision out.
//!
//! No I/O, threads or global state. [`expand`] reads chunks through a [`ChunkSource`], and the
//! CLI, the desktop app and the evaluation all show the same ledger.
//!
//! # The policies
//! For a seed `c` and an adjacent chunk `n`, with `q` the query:
//!
//! **SCAR** ([`Policy::Scar`], the paper's rule, exactly):
//! - penalty `b(c, n) = 1 − cos(c, n)`, from the continuity the source stored at indexing time;
//! - score `S(c, n) = cos(q, n) − λ·b(c, n)`;
//! - bar `γ·max(cos(q, c), 0)`: the paper's relative bar, clamped at 0 so that a seed pointing
//!   away from the query asks `S > 0` and a higher γ never accepts more;
//! - `n` is accepted iff `S > bar` (strictly); the margin is `S − bar`.
//!
//! **The evidence walk** ([`Policy::Evidence`]) asks whether the question's own first stage
//! already found `n` worth reading, had it been asked for `depth` times as many seeds:
//! - signals: `n`'s rank by dense similarity and by BM25 among the question's candidates
//!   ([`Rankings`], each list from 1 to the depth the first stage looked);
//! - score: the reciprocal rank fusion of the two, `1/(60 + dense rank) + w/(60 + BM25 rank)`
//!   (a list that did not reach `n` adds nothing), where `w`, BM25's weight, is the share of
//!   the question's distinct words BM25 could read (1 when the documents hold every
//!   word of the question; near 0 for a question in another language, which shares a name with
//!   them at most; [`Rankings::with_lexical_weight`]);
//! - bar: the score of a chunk ranked `D` in both lists, `(1 + w)/(60 + D)`, where
//!   `D = depth × seeds`, but at most half the chunks searched (in a small collection a
//!   neighbour must still beat the median chunk; [`Rankings::evidence_rank`]);
//! - `n` is accepted iff score > bar; the margin is score − bar.
//!
//! Ranks, unlike cosines, mean the same thing for every embedding model, so one depth serves
//! them all (docs/EVALUATION.md measures why relevance ranks, not continuity, carry the
//! evidence).
//!
//! Both walk outwards on each side, one step at a time up to the window `w`. SCAR takes each
//! step's penalty against the chunk it continues (the seed at step 1, then the previous step),
//! always against the seed's bar. At the first rejection the walk stops on that side: the chunks
//! beyond, up to `w`, are still scored for display and marked [`Outcome::NotReached`]. A chunk
//! already in the context (a seed, or accepted for a higher-ranked seed) is marked
//! [`Outcome::AlreadyInContext`] and the walk goes on through it. The end of the document closes
//! a side with one [`Outcome::DocumentEdge`] record.
//!
//! The baselines walk the same way but accept everything they reach, recording cosines,
//! penalties and ranks without a score or bar: [`Policy::StaticWindow`] up to `w` steps,
//! [`Policy::Parent`] over the seed's aligned block of chunks (the parent chunk of
//! parent-document retrievers), [`Policy::Section`] over its heading section (or, with no
//! section, its block), and [`Policy::TopK`] not at all. Seeds are processed in rank order; a
//! repeated seed keeps its first rank and later copies are ignored. [`PolicyKind`] names each
//! kind once for the command line, the config file, the JSON and the app.
//!
//! # The budget
//! With a token budget ([`Options::with_budget`]), the seeds are admitted first, in rank order,
//! each if it fits. Then the neighbours the policy accepted compete best first: by margin for
//! SCAR and the evidence walk, by seed rank, distance and side (previous first) for the
//! baselines. A neighbour is eligible only once the chunk it continues (the seed or the previous
//! step) is in the context, and is admitted if it fits. Whatever the policy would have had but
//! did not get in is marked [`Outcome::OverBudget`], and a seed left out has `in_context: false`.
//!
//! # The ledger
//! - [`Ledger`]: `policy` and `budget` as run; `seeds`, one [`SeedRecord`] per distinct seed in
//!   rank order; `context`, the chunks handed on, each once, in document order
//!   ([`scar_core::Position`]); `context_tokens`, their total.
//! - [`SeedRecord`]: `id`, `rank` (from 1), first-stage `score`, `query_cos` = cos(q, c), `bar`
//!   (SCAR and the evidence walk), `scope` (Parent and Section: which [`ParentScope`] it used),
//!   `in_context`, and `neighbours`, the previous side's steps outwards then the next side's.
//! - [`NeighbourRecord`]: `side`, `distance` (from 1), `id` (absent at a document edge), `seam`
//!   (where the cut crossed fell, [`scar_core::SeamKind`]), `query_cos` = cos(q, n), `penalty`
//!   b, `dense_rank` and `lexical_rank` (when the rankings reached it), the rule's `score`,
//!   `bar` and `margin` (SCAR and the evidence walk), and the [`Outcome`].
//!
//! Every ledger type is `serde`-serializable with snake-case enums.
//!
//! # Errors
//! A decision is never made on a NaN: a zero-norm or non-finite query or chunk embedding, a chunk
//! whose dimension differs from the query's, or a non-finite stored continuity is a
//! [`PolicyError`] naming the chunk. The evidence walk without rankings is an error too. Empty
//! seeds give an empty ledger.
//!
//! # Example
//! ```
//! use scar_policy::{expand, MemoryChunk, MemorySource, Options, Outcome, Policy, Rankings, Seed};
//!
//! let mut source = MemorySource::new();
//! let ids = source.add_document([
//!     MemoryChunk::new(vec![0.0, 1.0], 12),   // off topic
//!     MemoryChunk::new(vec![1.0, 0.0], 20),   // the retrieved chunk
//!     MemoryChunk::new(vec![0.96, 0.28], 15), // its continuation
//! ]);
//! let seeds = [Seed { id: ids[1], score: 0.9, judged: None }];
//! let options = Options::new(Policy::scar(1))?;
//! let ledger = expand(&source, &[1.0, 0.0], &seeds, &Rankings::default(), &options)?;
//!
//! // Previous: S = 0 − 0.1·(1 − 0) = −0.1, below the bar 0.8·1 = 0.8.
//! // Next: S = 0.96 − 0.1·(1 − 0.96) = 0.956 > 0.8.
//! let outcomes: Vec<_> = ledger.seeds[0].neighbours.iter().map(|n| n.outcome).collect();
//! assert_eq!(outcomes, [Outcome::Rejected, Outcome::Accepted]);
//! assert_eq!(ledger.context, [ids[1], ids[2]]);
//! assert_eq!(ledger.context_tokens, 35);
//! # Ok::<(), scar_policy::PolicyError>(())
//! ```
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod error;
mod expand;
mod ledger;
mod policy;
mod rankings;
mod source;

#[cfg(test)]
mod properties;

pub use error::{PolicyError, Result, VectorProblem};
pub use expand::{Judgement, Seed, expand};
pub use ledger::{Ledger, NeighbourRecord, Outcome, ParentScope, SeedRecord};
pub use policy::{Options, Policy, PolicyKind, PolicySettings};
pub use rankings::{RRF_K, Rankings, fused_score, rank_vote};
// Defined in scar-core, where the index uses them too.
pub use scar_core::{SeamKind, Side};
pub use source::{ChunkSource, MemoryChunk, MemorySource};
