//! BM25 over the store, exact and bounded: the question's words are read one at a time, rarest
//! first, and only until the words left are too common to lift a chunk into the ranking
//! (`MaxScore`, as Lucene's and tantivy's searches skip chunks). A word's weight comes from the
//! store's count of the chunks holding it (`scar_terms`), so no search counts a common word's
//! chunks; and a chunk holding only words whose best contributions add up to less than the
//! ranking's last score so far is never read.
//!
//! The scores are tantivy's BM25 (k1 = 1.2, b = 0.75) over the words the folder index reads:
//! the same as scoring every chunk that holds a word of the question.

use postgres::Transaction;

/// Term-frequency saturation and length normalisation, tantivy's defaults.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A word of the question, with its weight among the store's chunks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Term {
    pub lexeme: String,
    /// Its inverse document frequency.
    pub idf: f64,
}

impl Term {
    /// A word held by `holding` of `chunks` chunks. The count of chunks may be a moment older
    /// than the word's: never fewer than hold the word, so that every weight stays positive.
    pub fn new(lexeme: String, holding: f64, chunks: f64) -> Self {
        let chunks = chunks.max(holding);
        Self {
            lexeme,
            idf: (1.0 + (chunks - holding + 0.5) / (holding + 0.5)).ln(),
        }
    }

    /// More than the word adds to any chunk's score: its saturated frequency stays below k1 + 1.
    fn bound(&self) -> f64 {
        self.idf * (K1 + 1.0)
    }
}

/// The distinct words of `question`, each with how many of the store's chunks hold it (0 for
/// a word none holds).
pub(crate) fn word_counts(
    transaction: &mut Transaction<'_>,
    question: &str,
) -> Result<Vec<(String, i64)>, postgres::Error> {
    Ok(transaction
        .query(
            "SELECT q.lexeme, coalesce(s.chunks, 0)::int8 \
             FROM unnest(tsvector_to_array(to_tsvector('simple', $1))) q(lexeme) \
             LEFT JOIN scar_terms s ON s.lexeme = q.lexeme",
            &[&question],
        )?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect())
}

/// The words of `counts` the store holds, with their weights among `chunks` chunks.
pub(crate) fn terms(counts: &[(String, i64)], chunks: f64) -> Vec<Term> {
    counts
        .iter()
        .filter(|(_, holding)| *holding > 0)
        .map(|(lexeme, holding)| Term::new(lexeme.clone(), *holding as f64, chunks))
        .collect()
}

/// The next word whose chunks must be read, or `None` when every chunk that can still reach
/// the ranking has been scored. `unread` are the words not read yet; `threshold` the ranking's
/// last score so far, when it holds as many chunks as asked. A chunk not scored holds only
/// unread words, so it scores less than their bounds' sum: the commonest words, whose bounds
/// add up to less than the threshold, need not be read.
pub(crate) fn next_to_read(unread: &[&Term], threshold: Option<f64>) -> Option<usize> {
    let mut by_bound: Vec<usize> = (0..unread.len()).collect();
    by_bound.sort_by(|&a, &b| unread[a].bound().total_cmp(&unread[b].bound()));
    let threshold = threshold.unwrap_or(0.0);
    let mut below = 0.0;
    let mut needed = by_bound.len();
    for (at, &term) in by_bound.iter().enumerate() {
        below += unread[term].bound();
        if below >= threshold {
            needed = at;
            break;
        }
    }
    // The rarest word of those needed: fewest chunks, and the most it can add.
    by_bound[needed..].last().copied()
}

/// The `depth`-th best of `scores`, when there are that many.
fn threshold(scores: &[(i32, f64)], depth: usize) -> Option<f64> {
    if depth == 0 || scores.len() < depth {
        return None;
    }
    let mut values: Vec<f64> = scores.iter().map(|&(_, score)| score).collect();
    let (_, &mut at, _) = values.select_nth_unstable_by(depth - 1, |a, b| b.total_cmp(a));
    Some(at)
}

/// Scores every chunk chosen by `filter` (a condition on `c`, the chunk, which may read
/// `$4` on, `chosen`) against `terms`, the chunks' mean length being `mean_words`.
fn score(
    transaction: &mut Transaction<'_>,
    terms: &[Term],
    mean_words: f64,
    filter: &str,
    chosen: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<Vec<(i32, f64)>, postgres::Error> {
    let lexemes: Vec<&str> = terms.iter().map(|term| term.lexeme.as_str()).collect();
    let idfs: Vec<f64> = terms.iter().map(|term| term.idf).collect();
    let sql = format!(
        "SELECT c.id, sum(q.idf * u.tf * {saturation} \
                          / (u.tf + {K1} * ({keep} + {B} * c.words / $3::float8)))::float8 \
         FROM scar_chunks c \
         CROSS JOIN LATERAL ( \
             SELECT v.lexeme, array_length(v.positions, 1)::float8 AS tf \
             FROM unnest(ts_filter(setweight(c.lexical, 'A', $1::text[]), '{{a}}')) v) u \
         JOIN unnest($1::text[], $2::float8[]) AS q(lexeme, idf) ON q.lexeme = u.lexeme \
         WHERE {filter} GROUP BY c.id",
        saturation = K1 + 1.0,
        keep = 1.0 - B,
    );
    let mut parameters: Vec<&(dyn postgres::types::ToSql + Sync)> =
        vec![&lexemes, &idfs, &mean_words];
    parameters.extend_from_slice(chosen);
    Ok(transaction
        .query(&sql, &parameters)?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect())
}

/// A `tsquery` matching any of the lexemes in the array parameter `$n`.
fn any_of(n: usize) -> String {
    format!(
        "(SELECT string_agg(quote_literal(word), ' | ')::tsquery FROM unnest(${n}::text[]) word)"
    )
}

/// The best `depth` chunks for `terms`, best first, ties by id.
pub(crate) fn ranking(
    transaction: &mut Transaction<'_>,
    terms: &[Term],
    mean_words: f64,
    depth: usize,
) -> Result<Vec<(i32, f64)>, postgres::Error> {
    let mut scores: Vec<(i32, f64)> = Vec::new();
    let mut read: Vec<&str> = Vec::new();
    loop {
        let unread: Vec<&Term> = terms
            .iter()
            .filter(|term| !read.contains(&term.lexeme.as_str()))
            .collect();
        let Some(next) = next_to_read(&unread, threshold(&scores, depth)) else {
            break;
        };
        let word = vec![unread[next].lexeme.as_str()];
        // Its chunks, but those holding a word read before: they are scored already.
        scores.extend(if read.is_empty() {
            score(
                transaction,
                terms,
                mean_words,
                &format!("c.lexical @@ {}", any_of(4)),
                &[&word],
            )?
        } else {
            let filter = format!(
                "c.lexical @@ {} AND NOT c.lexical @@ {}",
                any_of(4),
                any_of(5)
            );
            score(transaction, terms, mean_words, &filter, &[&word, &read])?
        });
        read.push(word[0]);
    }
    Ok(best(scores, depth))
}

/// The best `depth` of `scores`, best first, ties by id.
fn best(mut scores: Vec<(i32, f64)>, depth: usize) -> Vec<(i32, f64)> {
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scores.truncate(depth);
    scores
}

/// The best `depth` chunks among `among` (ids) for `terms`, best first, ties by id.
pub(crate) fn ranking_among(
    transaction: &mut Transaction<'_>,
    terms: &[Term],
    mean_words: f64,
    depth: usize,
    among: &[i32],
) -> Result<Vec<(i32, f64)>, postgres::Error> {
    let scores = score(transaction, terms, mean_words, "c.id = ANY($4)", &[&among])?;
    Ok(best(scores, depth))
}

#[cfg(test)]
mod tests {
    use super::{K1, Term, best, next_to_read, threshold};

    /// A word whose most a chunk can get from it is `bound`.
    fn bounded(lexeme: &str, bound: f64) -> Term {
        Term {
            lexeme: lexeme.to_owned(),
            idf: bound / (K1 + 1.0),
        }
    }

    #[test]
    fn rarer_words_weigh_more_and_every_word_weighs_something() {
        let rare = Term::new("kayak".into(), 2.0, 1000.0);
        let common = Term::new("the".into(), 990.0, 1000.0);
        assert!(rare.idf > common.idf);
        assert!(common.idf > 0.0);
        // A word in every chunk, counted when a second writer's chunks were not yet: still
        // a weight, not a logarithm of a negative number.
        assert!(Term::new("the".into(), 1001.0, 1000.0).idf > 0.0);
    }

    #[test]
    fn words_are_read_rarest_first_until_the_rest_cannot_reach_the_ranking() {
        let (a, b, c) = (bounded("a", 1.0), bounded("b", 2.0), bounded("c", 10.0));
        // Nothing ranked yet: every word counts, the rarest first.
        assert_eq!(next_to_read(&[&a, &b, &c], None), Some(2));
        // A chunk holding only `a` and `b` scores under 3: with 2.5 to beat, both are needed
        // (`b` first), and with 3.5 neither.
        assert_eq!(next_to_read(&[&a, &b], Some(2.5)), Some(1));
        assert_eq!(next_to_read(&[&a, &b], Some(3.5)), None);
        // `a` alone cannot reach 2.5.
        assert_eq!(next_to_read(&[&a], Some(2.5)), None);
        assert_eq!(next_to_read(&[], None), None);
        // Reaching the threshold exactly is enough to tie with the last chunk ranked.
        assert_eq!(next_to_read(&[&a, &b], Some(3.0)), Some(1));
    }

    #[test]
    fn the_threshold_is_the_last_score_of_a_full_ranking() {
        let scores = [(1, 0.5), (2, 3.0), (3, 2.0), (4, 1.0)];
        assert_eq!(threshold(&scores, 2), Some(2.0));
        assert_eq!(threshold(&scores, 4), Some(0.5));
        assert_eq!(threshold(&scores, 5), None);
        assert_eq!(threshold(&scores, 0), None);
        assert_eq!(
            best(vec![(7, 1.0), (3, 2.0), (5, 1.0)], 2),
            [(3, 2.0), (5, 1.0)]
        );
    }
}
