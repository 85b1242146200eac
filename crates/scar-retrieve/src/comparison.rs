//! A policy's context beside static ±1's on the same seeds, and the one way every front end
//! words it.

use std::fmt;

use scar_policy::{Ledger, Options, Policy};
use serde::{Deserialize, Serialize};

use crate::Result;

/// What every policy is measured against: each seed with one neighbour on either side, no
/// budget.
pub const BASELINE: Policy = Policy::StaticWindow { window: 1 };

/// [`BASELINE`] as options for [`scar_policy::expand`] or [`crate::Retriever::expand`].
pub fn baseline_options() -> Result<Options> {
    Ok(Options::new(BASELINE)?)
}

/// How large a context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSize {
    /// Chunks in the context.
    pub chunks: usize,
    /// Their tokens (embedding model's tokenizer).
    pub tokens: usize,
}

impl ContextSize {
    /// The size of the context a ledger chose.
    #[must_use]
    pub fn of(ledger: &Ledger) -> Self {
        Self {
            chunks: ledger.context.len(),
            tokens: ledger.context_tokens,
        }
    }
}

impl fmt::Display for ContextSize {
    /// `3 chunks, 412 tokens`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {} tokens", Chunks(self.chunks), self.tokens)
    }
}

/// A policy's context beside [`BASELINE`]'s on the same seeds.
///
/// Its [`Display`](fmt::Display) is the whole line, [`Comparison::verdict`] the saving alone;
/// a policy that takes more than static ±1 is said to cost more, never to save nothing.
///
/// ```
/// use scar_retrieve::{Comparison, ContextSize};
///
/// let comparison = Comparison {
///     policy: ContextSize { chunks: 5, tokens: 600 },
///     baseline: ContextSize { chunks: 7, tokens: 800 },
/// };
/// assert_eq!(comparison.verdict(), "saved 2 chunks and 200 tokens (25% of static ±1's tokens)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comparison {
    /// The policy's context.
    pub policy: ContextSize,
    /// Static ±1's, from the same seeds.
    pub baseline: ContextSize,
}

impl Comparison {
    /// The difference in words: `saved 2 chunks and 200 tokens (25% of static ±1's tokens)`,
    /// `costs 1 chunk and 40 tokens more than static ±1`, and where chunks and tokens disagree,
    /// both (`… but takes 1 chunk more`).
    #[must_use]
    pub fn verdict(&self) -> String {
        let (ours, theirs) = (self.policy, self.baseline);
        if ours.tokens <= theirs.tokens {
            let tokens = theirs.tokens - ours.tokens;
            let share = 100.0 * tokens as f32 / theirs.tokens.max(1) as f32;
            if ours.chunks <= theirs.chunks {
                format!(
                    "saved {} and {tokens} tokens ({share:.0}% of static ±1's tokens)",
                    Chunks(theirs.chunks - ours.chunks)
                )
            } else {
                format!(
                    "saved {tokens} tokens ({share:.0}% of static ±1's tokens) but takes {} more",
                    Chunks(ours.chunks - theirs.chunks)
                )
            }
        } else {
            let tokens = ours.tokens - theirs.tokens;
            if ours.chunks >= theirs.chunks {
                format!(
                    "costs {} and {tokens} tokens more than static ±1",
                    Chunks(ours.chunks - theirs.chunks)
                )
            } else {
                format!(
                    "costs {tokens} tokens more than static ±1 but takes {} fewer",
                    Chunks(theirs.chunks - ours.chunks)
                )
            }
        }
    }
}

impl fmt::Display for Comparison {
    /// `5 chunks, 600 tokens; static ±1 on the same seeds: 7 chunks, 800 tokens — saved …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; static ±1 on the same seeds: {} — {}",
            self.policy,
            self.baseline,
            self.verdict()
        )
    }
}

/// A count of chunks in words: `1 chunk`, `3 chunks`.
struct Chunks(usize);

impl fmt::Display for Chunks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1 chunk"),
            n => write!(f, "{n} chunks"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(policy: (usize, usize), baseline: (usize, usize)) -> Comparison {
        let size = |(chunks, tokens)| ContextSize { chunks, tokens };
        Comparison {
            policy: size(policy),
            baseline: size(baseline),
        }
    }

    #[test]
    fn a_smaller_context_is_a_saving() {
        let comparison = compare((6, 300), (7, 400));
        assert_eq!(
            comparison.verdict(),
            "saved 1 chunk and 100 tokens (25% of static ±1's tokens)"
        );
        assert_eq!(
            comparison.to_string(),
            "6 chunks, 300 tokens; static ±1 on the same seeds: 7 chunks, 400 tokens — saved 1 \
             chunk and 100 tokens (25% of static ±1's tokens)"
        );
    }

    #[test]
    fn a_larger_context_costs_more_and_never_saves_nothing() {
        let comparison = compare((9, 520), (7, 400));
        assert_eq!(
            comparison.verdict(),
            "costs 2 chunks and 120 tokens more than static ±1"
        );
        assert!(!comparison.to_string().contains("saved"), "{comparison}");
        assert_eq!(
            compare((1, 50), (0, 0)).to_string(),
            "1 chunk, 50 tokens; static ±1 on the same seeds: 0 chunks, 0 tokens — costs 1 \
             chunk and 50 tokens more than static ±1"
        );
    }

    #[test]
    fn chunks_and_tokens_that_disagree_are_both_said() {
        assert_eq!(
            compare((8, 380), (7, 400)).verdict(),
            "saved 20 tokens (5% of static ±1's tokens) but takes 1 chunk more"
        );
        assert_eq!(
            compare((5, 410), (7, 400)).verdict(),
            "costs 10 tokens more than static ±1 but takes 2 chunks fewer"
        );
    }

    #[test]
    fn the_same_context_saves_nothing_and_an_empty_baseline_divides_by_nothing() {
        assert_eq!(
            compare((7, 400), (7, 400)).verdict(),
            "saved 0 chunks and 0 tokens (0% of static ±1's tokens)"
        );
        assert_eq!(
            compare((0, 0), (0, 0)).verdict(),
            "saved 0 chunks and 0 tokens (0% of static ±1's tokens)"
        );
    }

    #[test]
    fn the_baseline_is_static_one_and_valid() {
        assert_eq!(baseline_options().unwrap().policy(), BASELINE);
        assert_eq!(baseline_options().unwrap().budget(), None);
        let size = ContextSize {
            chunks: 1,
            tokens: 12,
        };
        let json = serde_json::to_value(size).unwrap();
        assert_eq!(json, serde_json::json!({"chunks": 1, "tokens": 12}));
    }
}
