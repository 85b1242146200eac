//! Answers measured on questions with known evidence: each question is answered from each
//! policy's context (the same seeds), and each answer's citations and traced sentences are
//! checked against the gold chunks.

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use scar_answer::{Answer, GenerationParams, Generator, Question};
use scar_policy::Options;
use scar_retrieve::{ChunkStore, FirstStage, Retriever};
use serde::{Deserialize, Serialize};

use crate::benchmark::Resolved;
use crate::metrics::{Group, score};
use crate::options::Scope;
use crate::run::{Progress, ScoredTest, context_extents, gold_tests};
use crate::{EvalError, Result};

/// Version of the JSON layout of [`AnswerEvalReport`] (`scar eval --answers --json`).
pub const ANSWERS_SCHEMA_VERSION: &str = "scar.answers/1";

/// How to run an answer evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerEvalOptions {
    /// Seeds per question.
    pub k: usize,
    /// The first stage that finds the seeds.
    pub first_stage: FirstStage,
    /// Where the first stage looks for seeds.
    pub scope: Scope,
    /// The contexts compared, each built from the same seeds; at least one.
    pub policies: Vec<Options>,
    /// How each answer is generated.
    pub params: GenerationParams,
}

/// One question answered from one policy's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// The test's id.
    pub test: String,
    /// Its group.
    pub group: Group,
    /// The policy, as people name it.
    pub policy: String,
    /// Chunks in the context.
    pub chunks: usize,
    /// Share of the gold chunks in the context (the retrieval recall).
    pub context_recall: f64,
    /// Tokens of the prompt as the model read it (`None` when a server does not say).
    pub prompt_tokens: Option<usize>,
    /// Seconds until the first token.
    pub first_token_seconds: f64,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// The answer.
    pub text: String,
    /// The answer cites at least one source that the prompt holds.
    pub cites: bool,
    /// Sentences that claim something (the ones traced).
    pub sentences: usize,
    /// Of those, the ones found in a source.
    pub found: usize,
    /// Of those found, the ones whose source chunk overlaps the gold evidence.
    pub found_in_gold: usize,
    /// Sentences whose `[n]` citation names another source than the one found.
    pub disagreements: usize,
}

impl AnswerRecord {
    /// Sentences flagged "not found in the sources".
    #[must_use]
    pub fn flagged(&self) -> usize {
        self.sentences - self.found
    }
}

/// One policy's answers, summed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerSummary {
    /// The policy, as people name it.
    pub policy: String,
    /// Questions answered.
    pub answers: usize,
    /// Share of answers citing at least one source.
    pub cite_rate: f64,
    /// Sentences traced, over every answer.
    pub sentences: usize,
    /// Share of the traced sentences found in a source whose chunk overlaps the gold evidence
    /// (of the sentences found in any source).
    pub gold_attribution_rate: f64,
    /// Share of the traced sentences flagged "not found in the sources".
    pub flag_rate: f64,
    /// Share of the traced sentences whose citation and attribution disagree.
    pub disagreement_rate: f64,
    /// Mean context recall.
    pub context_recall: f64,
    /// Mean chunks in the context.
    pub chunks: f64,
    /// Mean prompt tokens (of the answers whose count is known).
    pub prompt_tokens: f64,
    /// Median seconds to the first token.
    pub median_first_token_seconds: f64,
    /// Mean seconds to the first token.
    pub mean_first_token_seconds: f64,
}

/// An answer evaluation, in the layout [`ANSWERS_SCHEMA_VERSION`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerEvalReport {
    /// [`ANSWERS_SCHEMA_VERSION`].
    pub schema: String,
    /// The benchmark file.
    pub benchmark: String,
    /// The embedding model of the index.
    pub model: String,
    /// The chat model that answered.
    pub llm: String,
    /// Seeds per question.
    pub k: usize,
    /// The first stage.
    pub first_stage: FirstStage,
    /// Where seeds came from.
    pub scope: Scope,
    /// Most tokens per answer.
    pub max_tokens: usize,
    /// Questions answered (with each policy).
    pub questions: usize,
    /// Tests chosen but left out, one line each.
    pub problems: Vec<String>,
    /// Per policy, in the order given.
    pub summaries: Vec<AnswerSummary>,
    /// Every answer, question by question, policy by policy.
    pub records: Vec<AnswerRecord>,
}

/// Answers every test of `benchmark` with `generator`, once from each policy's context, and
/// scores the answers against the gold chunks. `progress` counts answers.
pub fn evaluate_answers<S: ChunkStore>(
    retriever: &Retriever<S>,
    benchmark: &Resolved,
    generator: &mut dyn Generator,
    options: &AnswerEvalOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<AnswerEvalReport> {
    if options.policies.is_empty() {
        return Err(EvalError::Options("no policy to answer from".to_owned()));
    }
    if options.k == 0 {
        return Err(EvalError::Options("k must be at least 1".to_owned()));
    }
    let store = retriever.store();
    let mut problems = benchmark.problems.clone();
    let tests = gold_tests(store, benchmark, &mut problems)?;
    let total = tests.len() * options.policies.len();
    let mut done = 0;
    progress(Progress { done, total });
    let mut records = Vec::with_capacity(total);
    for test in &tests {
        let retrieve = |source| EvalError::Retrieve {
            test: test.id.to_owned(),
            source: Box::new(source),
        };
        let prepared = match options.scope {
            Scope::Index => retriever.prepare(test.query, options.first_stage, options.k),
            Scope::Document => retriever.prepare_within(
                test.query,
                options.first_stage,
                options.k,
                &test.documents,
            ),
        }
        .map_err(retrieve)?;
        for policy in &options.policies {
            let question = Question::search(retriever, &prepared, policy).map_err(retrieve)?;
            let answered = question
                .answer(generator, retriever, &options.params, &mut |_| {
                    ControlFlow::Continue(())
                })
                .map_err(|source| EvalError::Answer {
                    test: test.id.to_owned(),
                    source: Box::new(source),
                })?;
            let ids: Vec<_> = answered
                .search
                .chunks
                .iter()
                .map(|chunk| chunk.id)
                .collect();
            let context = context_extents(store, &ids)?;
            records.push(record(test, policy, &answered.answer, &context));
            done += 1;
            progress(Progress { done, total });
        }
    }
    let summaries = options
        .policies
        .iter()
        .map(|policy| {
            let label = policy.policy().to_string();
            let own: Vec<&AnswerRecord> = records.iter().filter(|r| r.policy == label).collect();
            summarize(label, &own)
        })
        .collect();
    Ok(AnswerEvalReport {
        schema: ANSWERS_SCHEMA_VERSION.to_owned(),
        benchmark: benchmark.benchmark.display().to_string(),
        model: store.model().id.clone(),
        llm: generator.name(),
        k: options.k,
        first_stage: options.first_stage,
        scope: options.scope,
        max_tokens: options.params.max_tokens,
        questions: tests.len(),
        problems,
        summaries,
        records,
    })
}

fn record(
    test: &ScoredTest<'_>,
    policy: &Options,
    answer: &Answer,
    context: &[crate::metrics::ChunkExtent],
) -> AnswerRecord {
    let gold = test.gold.chunks();
    let chunk_of = |number: usize| {
        answer
            .prompt
            .sources
            .iter()
            .find(|source| source.number == number)
            .map(|source| source.chunk)
    };
    let found = answer.attribution.iter().filter(|s| s.found);
    AnswerRecord {
        test: test.id.to_owned(),
        group: test.group,
        policy: policy.policy().to_string(),
        chunks: context.len(),
        context_recall: score(&test.gold, context, 0).recall,
        prompt_tokens: answer.generation.prompt_tokens,
        first_token_seconds: answer.generation.first_token_seconds,
        generated_tokens: answer.generation.generated_tokens,
        text: answer.generation.text.clone(),
        cites: !answer.citations.cited.is_empty(),
        sentences: answer.attribution.len(),
        found: found.clone().count(),
        found_in_gold: found
            .filter(|s| chunk_of(s.source).is_some_and(|chunk| gold.contains(&chunk)))
            .count(),
        disagreements: answer.attribution.iter().filter(|s| s.disagrees()).count(),
    }
}

fn summarize(policy: String, records: &[&AnswerRecord]) -> AnswerSummary {
    let share = |part: usize, whole: usize| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let mean = |values: &[f64]| {
        if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        }
    };
    let total = |field: fn(&AnswerRecord) -> usize| records.iter().map(|r| field(r)).sum();
    let sentences = total(|r| r.sentences);
    let found = total(|r| r.found);
    let mut first_token: Vec<f64> = records.iter().map(|r| r.first_token_seconds).collect();
    first_token.sort_by(f64::total_cmp);
    let prompt_tokens: Vec<f64> = records
        .iter()
        .filter_map(|r| r.prompt_tokens.map(|t| t as f64))
        .collect();
    AnswerSummary {
        policy,
        answers: records.len(),
        cite_rate: share(records.iter().filter(|r| r.cites).count(), records.len()),
        sentences,
        gold_attribution_rate: share(total(|r| r.found_in_gold), found),
        flag_rate: share(sentences - found, sentences),
        disagreement_rate: share(total(|r| r.disagreements), sentences),
        context_recall: mean(&records.iter().map(|r| r.context_recall).collect::<Vec<_>>()),
        chunks: mean(&records.iter().map(|r| r.chunks as f64).collect::<Vec<_>>()),
        prompt_tokens: mean(&prompt_tokens),
        median_first_token_seconds: median(&first_token),
        mean_first_token_seconds: mean(&first_token),
    }
}

/// The median of sorted values (0 when there are none).
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

impl AnswerEvalReport {
    /// One table, a row per policy: what `scar eval --answers` prints and `answers.md` leads
    /// with.
    #[must_use]
    pub fn summary_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} questions of {}, answered by {} (at most {} tokens each) from contexts of {}, k = {}, {} first stage\n",
            self.questions,
            self.benchmark,
            self.llm,
            self.max_tokens,
            self.model,
            self.k,
            self.first_stage
        );
        out.push_str(
            "| context | chunks | recall | prompt tokens | first token (median s) | cites | sentences | in gold evidence | not found | citation disagrees |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in &self.summaries {
            let _ = writeln!(
                out,
                "| {} | {:.2} | {:.3} | {:.0} | {:.2} | {:.0}% | {} | {:.0}% | {:.0}% | {:.0}% |",
                s.policy,
                s.chunks,
                s.context_recall,
                s.prompt_tokens,
                s.median_first_token_seconds,
                100.0 * s.cite_rate,
                s.sentences,
                100.0 * s.gold_attribution_rate,
                100.0 * s.flag_rate,
                100.0 * s.disagreement_rate,
            );
        }
        out
    }

    /// The summary, what its columns mean, and every answer.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("# Answers on questions with known evidence\n\n");
        out.push_str(&self.summary_markdown());
        out.push_str(
            "\nrecall: share of the gold chunks in the context. cites: answers with at least one \
             `[n]` naming a source of the prompt. sentences: sentences claiming something, each \
             traced to the source supporting it best. in gold evidence: of the sentences found \
             in a source, the share whose source overlaps the gold evidence. not found: share of \
             the sentences flagged \"not found in the sources\". citation disagrees: share of \
             the sentences citing a source other than the one found.\n",
        );
        for problem in &self.problems {
            let _ = writeln!(out, "\n- left out: {problem}");
        }
        out.push_str("\n## Every answer\n");
        for r in &self.records {
            let _ = writeln!(
                out,
                "\n### {} · {} ({})\n\n{} chunks, recall {:.2}, {} prompt tokens, first token {:.2} s, \
                 {} of {} sentences found ({} in gold evidence){}\n\n> {}",
                r.test,
                r.policy,
                r.group.label(),
                r.chunks,
                r.context_recall,
                r.prompt_tokens
                    .map_or_else(|| "?".to_owned(), |t| t.to_string()),
                r.first_token_seconds,
                r.found,
                r.sentences,
                r.found_in_gold,
                if r.cites { ", cites" } else { "" },
                r.text.trim().replace('\n', "\n> "),
            );
        }
        out
    }

    /// Writes `answers.json` and `answers.md` into `dir` (created if needed); returns their
    /// paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        fs_err::create_dir_all(dir)?;
        let paths = vec![dir.join("answers.json"), dir.join("answers.md")];
        fs_err::write(&paths[0], serde_json::to_string_pretty(self)? + "\n")?;
        fs_err::write(&paths[1], self.to_markdown())?;
        Ok(paths)
    }
}

#[cfg(test)]
// Shares of a few sentences and the medians of halves are exact in binary.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    fn answer(policy: &str, sentences: usize, found: usize, in_gold: usize) -> AnswerRecord {
        AnswerRecord {
            test: "t".to_owned(),
            group: Group::Atomic,
            policy: policy.to_owned(),
            chunks: 3,
            context_recall: 1.0,
            prompt_tokens: Some(100),
            first_token_seconds: sentences as f64,
            generated_tokens: 10,
            text: String::new(),
            cites: found > 0,
            sentences,
            found,
            found_in_gold: in_gold,
            disagreements: 0,
        }
    }

    #[test]
    fn rates_pool_the_sentences_of_every_answer() {
        let records = [
            answer("p", 4, 2, 1),
            answer("p", 2, 2, 2),
            answer("p", 0, 0, 0),
        ];
        let refs: Vec<&AnswerRecord> = records.iter().collect();
        let summary = summarize("p".to_owned(), &refs);
        assert_eq!(summary.sentences, 6);
        // 4 of 6 sentences found, 3 of those 4 in gold chunks.
        assert!((summary.flag_rate - 2.0 / 6.0).abs() < 1e-12);
        assert!((summary.gold_attribution_rate - 0.75).abs() < 1e-12);
        assert!((summary.cite_rate - 2.0 / 3.0).abs() < 1e-12);
        // First-token seconds 4, 2 and 0: median 2, mean 2.
        assert_eq!(summary.median_first_token_seconds, 2.0);
        assert_eq!(records[0].flagged(), 2);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_middle_pair_s_mean() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[1.0, 3.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
    }
}
