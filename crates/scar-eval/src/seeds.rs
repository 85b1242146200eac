//! The per-seed table: each seed with the first stage's view of it, every judge's score, and
//! whether it holds evidence. A rule that expands only around seeds judged to hold evidence is
//! as good as its judge here (docs/EVALUATION.md, "What would reach the target"), so the
//! judges are measured on this table before any rule is built on them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use scar_core::{ChunkId, dot};
use scar_index::Index;
use scar_policy::Side;
use scar_retrieve::{Candidate, ChunkStore, FirstStage, Prepared, Rerank, Retriever};
use serde::{Deserialize, Serialize};

use crate::metrics::Group;
use crate::signals::{Quartiles, auc, quartiles};

/// A judge of the seeds under evaluation, by the name its column takes.
#[derive(Debug, Clone)]
pub struct SeedJudge {
    /// Its name: `sentence`, `llm`, `likelihood`, `cross-encoder`.
    pub name: String,
    /// The judge.
    pub judge: Arc<dyn Rerank>,
}

/// Judges are told apart by name: two runs with the same names compare the same columns.
impl PartialEq for SeedJudge {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// One seed of one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRow {
    /// First stage that found it.
    pub first_stage: FirstStage,
    /// The test.
    pub test: String,
    /// Its group.
    pub group: Group,
    /// Its rank among the seeds, from 1.
    pub rank: usize,
    /// The seed.
    pub seed: u32,
    /// Whether it overlaps gold.
    pub holds_gold: bool,
    /// Its neighbours (one step each side, not seeds themselves) that overlap gold: what
    /// expanding it by one can add.
    pub useful_neighbours: usize,
    /// The first stage's score (cosine, BM25 or fused).
    pub first_stage_score: f32,
    /// cos(q, seed).
    pub query_cos: f32,
    /// The evidence walk's fused rank score of the seed itself.
    pub fused: f32,
    /// Each judge's score, by name.
    pub judges: BTreeMap<String, f32>,
}

/// The rows for one prepared question, and each judge's time for its seeds.
pub(crate) fn rows<S: ChunkStore>(
    retriever: &Retriever<S>,
    index: &Index,
    prepared: &Prepared,
    test: &str,
    group: Group,
    gold: &[ChunkId],
    judges: &[SeedJudge],
) -> crate::Result<(Vec<SeedRow>, BTreeMap<String, f64>)> {
    let seeds: Vec<ChunkId> = prepared.seeds.iter().map(|s| s.id).collect();
    let candidates: Vec<Candidate> = prepared
        .seeds
        .iter()
        .map(|s| Candidate {
            id: s.id,
            score: s.score,
        })
        .collect();
    let mut scores = BTreeMap::new();
    let mut seconds = BTreeMap::new();
    for judge in judges {
        let started = Instant::now();
        let given = judge
            .judge
            .score(&prepared.query, &candidates, retriever.store())
            .map_err(|source| crate::EvalError::Retrieve {
                test: test.to_owned(),
                source: Box::new(source),
            })?;
        seconds.insert(judge.name.clone(), started.elapsed().as_secs_f64());
        scores.insert(judge.name.clone(), given);
    }
    let rankings = &prepared.rankings;
    let rows = prepared
        .seeds
        .iter()
        .enumerate()
        .map(|(at, seed)| {
            let useful_neighbours = [Side::Previous, Side::Next]
                .into_iter()
                .filter_map(|side| index.neighbour(seed.id, side))
                .filter(|n| !seeds.contains(n) && gold.contains(n))
                .count();
            SeedRow {
                first_stage: prepared.first_stage,
                test: test.to_owned(),
                group,
                rank: at + 1,
                seed: seed.id.0,
                holds_gold: gold.contains(&seed.id),
                useful_neighbours,
                first_stage_score: seed.score,
                query_cos: dot(&prepared.embedding, index.embedding(seed.id)),
                fused: rankings.fused(seed.id),
                judges: scores
                    .iter()
                    .map(|(name, judged)| (name.clone(), judged[at]))
                    .collect(),
            }
        })
        .collect();
    Ok((rows, seconds))
}

/// One signal's power to tell the seeds that hold evidence from the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedSignal {
    /// The signal.
    pub name: String,
    /// ROC AUC for "the seed holds gold".
    pub auc_holds_gold: f64,
    /// ROC AUC for "a neighbour one step away holds gold the seed does not" (among all seeds).
    pub auc_useful_neighbour: f64,
    /// Its quartiles among seeds that hold gold.
    pub holding: Quartiles,
    /// Its quartiles among the others.
    pub other: Quartiles,
}

/// A judge's time per question (all its seeds together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeTime {
    /// The judge.
    pub name: String,
    /// Median seconds per question.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// The seed diagnosis of one first stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedReport {
    /// Seeds judged (every seed of every test).
    pub seeds: usize,
    /// Of which hold gold.
    pub holding: usize,
    /// Of which have a useful neighbour one step away.
    pub with_useful_neighbour: usize,
    /// The first stage's own signals, then each judge's.
    pub signals: Vec<SeedSignal>,
    /// Each judge's time per question.
    pub times: Vec<JudgeTime>,
}

/// A signal's value for a seed, larger meant to be better.
type SeedSignalOf = Box<dyn Fn(&SeedRow) -> f64>;

/// Summarises one stage's seed table; `None` when no seed holds gold or every one does.
pub(crate) fn summarize(
    rows: &[SeedRow],
    times: &BTreeMap<String, Vec<f64>>,
) -> Option<SeedReport> {
    let holding = rows.iter().filter(|r| r.holds_gold).count();
    let with_useful_neighbour = rows.iter().filter(|r| r.useful_neighbours > 0).count();
    if holding == 0 || holding == rows.len() {
        return None;
    }
    let judges: Vec<&String> = rows.first().map(|r| r.judges.keys().collect())?;
    let mut named: Vec<(String, SeedSignalOf)> = vec![
        (
            "first-stage rank (best first)".to_owned(),
            Box::new(|r| -(r.rank as f64)),
        ),
        (
            "first-stage score".to_owned(),
            Box::new(|r| f64::from(r.first_stage_score)),
        ),
        (
            "cos(q, seed)".to_owned(),
            Box::new(|r| f64::from(r.query_cos)),
        ),
        (
            "fused rank score".to_owned(),
            Box::new(|r| f64::from(r.fused)),
        ),
    ];
    for judge in judges {
        let key = judge.clone();
        named.push((
            format!("judge: {judge}"),
            Box::new(move |r| r.judges.get(&key).map_or(f64::NAN, |&s| f64::from(s))),
        ));
    }
    let split = |signal: &dyn Fn(&SeedRow) -> f64, label: &dyn Fn(&SeedRow) -> bool| {
        let (mut yes, mut no) = (Vec::new(), Vec::new());
        for row in rows {
            if label(row) { &mut yes } else { &mut no }.push(signal(row));
        }
        (yes, no)
    };
    let signals = named
        .iter()
        .map(|(name, signal)| {
            let (holding, other) = split(signal.as_ref(), &|r| r.holds_gold);
            let (useful, rest) = split(signal.as_ref(), &|r| r.useful_neighbours > 0);
            SeedSignal {
                name: name.clone(),
                auc_holds_gold: auc(&holding, &other),
                auc_useful_neighbour: if useful.is_empty() || rest.is_empty() {
                    f64::NAN
                } else {
                    auc(&useful, &rest)
                },
                holding: quartiles(&holding),
                other: quartiles(&other),
            }
        })
        .collect();
    let times = times
        .iter()
        .map(|(name, seconds)| {
            let mut sorted = seconds.clone();
            sorted.sort_by(f64::total_cmp);
            let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
            JudgeTime {
                name: name.clone(),
                p50: at(0.5),
                p95: at(0.95),
            }
        })
        .collect();
    Some(SeedReport {
        seeds: rows.len(),
        holding,
        with_useful_neighbour,
        signals,
        times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: usize, holds_gold: bool, useful_neighbours: usize, judge: f32) -> SeedRow {
        SeedRow {
            first_stage: FirstStage::Hybrid,
            test: format!("t{rank}"),
            group: Group::Boundary,
            rank,
            seed: rank as u32,
            holds_gold,
            useful_neighbours,
            first_stage_score: 1.0 / rank as f32,
            query_cos: 0.5,
            fused: 0.0,
            judges: BTreeMap::from([("sentence".to_owned(), judge)]),
        }
    }

    #[test]
    fn each_signal_is_scored_for_both_labels_and_each_judge_timed() {
        // Rank separates perfectly (gold at ranks 1 and 2); the judge inverts one pair.
        let rows = [
            row(1, true, 1, 0.9),
            row(2, true, 0, 0.2),
            row(3, false, 0, 0.4),
            row(4, false, 0, 0.1),
        ];
        let times = BTreeMap::from([("sentence".to_owned(), vec![0.3, 0.1, 0.2, 0.4])]);
        let report = summarize(&rows, &times).unwrap();
        assert_eq!(
            (report.seeds, report.holding, report.with_useful_neighbour),
            (4, 2, 1)
        );
        let signal = |name: &str| report.signals.iter().find(|s| s.name == name).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(
            signal("first-stage rank (best first)").auc_holds_gold,
            1.0
        ));
        // Cosines all tie: chance.
        assert!(close(signal("cos(q, seed)").auc_holds_gold, 0.5));
        let judge = signal("judge: sentence");
        // Gold {0.9, 0.2} against {0.4, 0.1}: three pairs of four in order.
        assert!(close(judge.auc_holds_gold, 0.75));
        // The one seed with a useful neighbour scores highest.
        assert!(close(judge.auc_useful_neighbour, 1.0));
        assert!(close(judge.holding.median, 0.55));
        let time = &report.times[0];
        // The median of four rounds to the third (index 1.5 → 2), the 95th to the fourth.
        assert!(close(time.p50, 0.3) && close(time.p95, 0.4));
    }

    #[test]
    fn no_report_when_every_seed_or_none_holds_gold() {
        let times = BTreeMap::new();
        assert!(summarize(&[row(1, true, 0, 0.5), row(2, true, 0, 0.5)], &times).is_none());
        assert!(summarize(&[row(1, false, 0, 0.5)], &times).is_none());
    }
}
