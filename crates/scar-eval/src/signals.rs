//! How well each signal tells a useful neighbour (one holding evidence its seed does not) from
//! the rest: ROC AUC, the quartiles of each label, and the ROC curves as a picture.

use serde::{Deserialize, Serialize};

use crate::metrics::Group;
use crate::neighbours::NeighbourRow;
use crate::report::StageResult;

/// One signal's value for a neighbour; larger should mean "more likely useful".
type Signal = fn(&NeighbourRow) -> f64;

/// The signals measured, each oriented so that larger is meant to be better.
pub const SIGNALS: [(&str, Signal); 9] = [
    ("cos(q,n) / cos(q,c)", |r| {
        f64::from(r.query_cos) / f64::from(r.query_cos_seed).max(1e-6)
    }),
    ("continuity cos(c,n)", |r| f64::from(r.continuity)),
    ("SCAR margin (λ 0.1, γ 0.8)", |r| {
        f64::from(r.paper_margin())
    }),
    ("seam kind (mid-sentence best)", |r| {
        3.0 - f64::from(r.seam_kind.code())
    }),
    ("seam relevance cos(q, seam)", |r| f64::from(r.seam_cos)),
    ("BM25(n) / BM25(c)", |r| {
        f64::from(r.bm25) / f64::from(r.bm25_seed).max(1e-6)
    }),
    ("dense rank (best first)", |r| -(r.dense_rank as f64)),
    ("BM25 rank (best first)", |r| {
        -(r.bm25_rank.unwrap_or(r.index_chunks) as f64)
    }),
    ("fused rank score (evidence walk)", |r| f64::from(r.fused())),
];

/// The quartiles of a signal among one label's neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quartiles {
    /// 25th percentile.
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// 75th percentile.
    pub q3: f64,
}

/// One signal's power to separate useful neighbours from the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalSummary {
    /// The signal.
    pub name: String,
    /// Area under its ROC curve: 0.5 is chance, 1 a perfect separation.
    pub auc: f64,
    /// Its quartiles among useful neighbours.
    pub useful: Quartiles,
    /// Its quartiles among the others.
    pub other: Quartiles,
}

/// Every signal's separation on one stage's boundary-fragmented tests, with the paper's rule as
/// a point: the share of useful neighbours it accepts (true positive rate) and of the others
/// (false positive rate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalReport {
    /// Neighbours decided: distance 1, not themselves seeds.
    pub neighbours: usize,
    /// Of which useful.
    pub useful: usize,
    /// One row per signal of [`SIGNALS`].
    pub signals: Vec<SignalSummary>,
    /// The paper's rule (SCAR margin > 0): (false positive rate, true positive rate).
    pub paper_point: (f64, f64),
}

/// The decisions SCAR ±1 and static ±1 make on the boundary-fragmented tests: every neighbour
/// at distance 1 that is not itself a seed.
fn decided(rows: &[NeighbourRow]) -> impl Iterator<Item = &NeighbourRow> {
    rows.iter()
        .filter(|r| r.group == Group::Boundary && r.distance == 1 && !r.is_seed)
}

/// Summarises the signals of one stage's table; `None` when no neighbour was useful or none
/// was not.
#[must_use]
pub fn summarize(rows: &[NeighbourRow]) -> Option<SignalReport> {
    let decided: Vec<&NeighbourRow> = decided(rows).collect();
    let useful = decided.iter().filter(|r| r.useful).count();
    if useful == 0 || useful == decided.len() {
        return None;
    }
    let signals = SIGNALS
        .iter()
        .map(|(name, signal)| {
            let (pos, neg) = split(&decided, *signal);
            SignalSummary {
                name: (*name).to_owned(),
                auc: auc(&pos, &neg),
                useful: quartiles(&pos),
                other: quartiles(&neg),
            }
        })
        .collect();
    let accepted = |label: bool| {
        let of_label: Vec<_> = decided.iter().filter(|r| r.useful == label).collect();
        of_label.iter().filter(|r| r.paper_margin() > 0.0).count() as f64 / of_label.len() as f64
    };
    Some(SignalReport {
        neighbours: decided.len(),
        useful,
        signals,
        paper_point: (accepted(false), accepted(true)),
    })
}

/// A signal's values among useful and other neighbours.
fn split(rows: &[&NeighbourRow], signal: Signal) -> (Vec<f64>, Vec<f64>) {
    let mut useful = Vec::new();
    let mut other = Vec::new();
    for row in rows {
        if row.useful {
            useful.push(signal(row));
        } else {
            other.push(signal(row));
        }
    }
    (useful, other)
}

/// The probability that a random positive scores above a random negative, ties counting half
/// (the Mann-Whitney form of the ROC AUC).
#[must_use]
pub fn auc(positives: &[f64], negatives: &[f64]) -> f64 {
    // Sum of the positives' mid-ranks (from 1, ascending), ties sharing their average rank.
    let mut rank_sum = 0.0;
    let mut below = 0;
    let all = labelled(positives, negatives, false);
    for tied in all.chunk_by(same_value) {
        let mid_rank = (2 * below + tied.len() + 1) as f64 / 2.0;
        rank_sum += mid_rank * tied.iter().filter(|x| x.1).count() as f64;
        below += tied.len();
    }
    let (p, n) = (positives.len() as f64, negatives.len() as f64);
    (rank_sum - p * (p + 1.0) / 2.0) / (p * n)
}

/// The ROC curve of a signal: (false positive rate, true positive rate) at every threshold,
/// from (0, 0) to (1, 1).
#[must_use]
pub fn roc(positives: &[f64], negatives: &[f64]) -> Vec<(f64, f64)> {
    let (p, n) = (positives.len() as f64, negatives.len() as f64);
    let mut curve = vec![(0.0, 0.0)];
    let (mut tp, mut fp) = (0.0, 0.0);
    let all = labelled(positives, negatives, true);
    for tied in all.chunk_by(same_value) {
        let hits = tied.iter().filter(|x| x.1).count() as f64;
        tp += hits;
        fp += tied.len() as f64 - hits;
        curve.push((fp / n, tp / p));
    }
    curve
}

/// Every value labelled (true for a positive) and sorted, highest first when `descending`.
fn labelled(positives: &[f64], negatives: &[f64], descending: bool) -> Vec<(f64, bool)> {
    let mut all: Vec<(f64, bool)> = positives
        .iter()
        .map(|&v| (v, true))
        .chain(negatives.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|a, b| {
        let order = a.0.total_cmp(&b.0);
        if descending { order.reverse() } else { order }
    });
    all
}

/// AUC and ROC both treat a run of equal values as one step.
fn same_value(a: &(f64, bool), b: &(f64, bool)) -> bool {
    a.0.total_cmp(&b.0).is_eq()
}

pub(crate) fn quartiles(values: &[f64]) -> Quartiles {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let position = q * (sorted.len() - 1) as f64;
        let (low, high) = (position.floor() as usize, position.ceil() as usize);
        sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
    };
    Quartiles {
        q1: at(0.25),
        median: at(0.5),
        q3: at(0.75),
    }
}

/// The ROC curves of every signal of `stage`'s table, for the picture.
#[must_use]
pub fn curves(stage: &StageResult) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let decided: Vec<&NeighbourRow> = decided(&stage.neighbours).collect();
    SIGNALS
        .iter()
        .map(|(name, signal)| {
            let (pos, neg) = split(&decided, *signal);
            (*name, roc(&pos, &neg))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_is_the_share_of_pairs_ordered_right() {
        // Pairs (p, n): (3,1) (3,2) (3,3) (5,1) (5,2) (5,3): five right, one tie → 5.5 / 6.
        assert!((auc(&[3.0, 5.0], &[1.0, 2.0, 3.0]) - 5.5 / 6.0).abs() < 1e-12);
        for (positives, negatives, expected) in [
            (&[2.0][..], &[1.0][..], 1.0),
            (&[1.0], &[2.0], 0.0),
            (&[1.0, 1.0], &[1.0], 0.5),
        ] {
            assert!((auc(positives, negatives) - expected).abs() < 1e-12);
        }
    }

    #[test]
    fn roc_runs_from_nothing_to_everything_through_each_threshold() {
        let curve = roc(&[3.0, 5.0], &[1.0, 3.0]);
        // Thresholds 5, 3 (one positive and one negative tie), 1.
        assert_eq!(curve, [(0.0, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, 1.0)]);
    }

    #[test]
    fn quartiles_interpolate() {
        let q = quartiles(&[4.0, 1.0, 3.0, 2.0, 5.0]);
        assert_eq!((q.q1, q.median, q.q3), (2.0, 3.0, 4.0));
        let q = quartiles(&[1.0, 2.0]);
        assert_eq!((q.q1, q.median, q.q3), (1.25, 1.5, 1.75));
    }
}
