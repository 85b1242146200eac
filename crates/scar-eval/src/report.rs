//! The evaluation's result as data ([`EvalReport`], schema [`SCHEMA_VERSION`]) and as markdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use scar_index::ChunkerConfig;
use scar_retrieve::FirstStage;
use serde::{Deserialize, Serialize};

use crate::metrics::{Group, GroupMetrics, TestScore};
use crate::run::{EVIDENCE, NamedPolicy, SCAR_1, STATIC_1, Scope};
use crate::stats::PairedBootstrap;

/// Version of the JSON layout of [`EvalReport`]; bumped on any incompatible change.
pub const SCHEMA_VERSION: &str = "scar.eval/2";

/// Everything one evaluation run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// [`SCHEMA_VERSION`].
    pub schema: String,
    /// How the run was set up.
    pub settings: EvalSettings,
    /// What was evaluated and what was left out.
    pub data: DataSummary,
    /// One result per first stage.
    pub stages: Vec<StageResult>,
}

/// How a run was set up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSettings {
    /// The benchmark file.
    pub benchmark: String,
    /// The corpus folder its paths are relative to.
    pub corpus: String,
    /// The index folder.
    pub index: String,
    /// The embedding model the index was built with.
    pub model: String,
    /// Its dimension.
    pub dimension: usize,
    /// How the index cut documents.
    pub chunker: ChunkerConfig,
    /// Seeds per question.
    pub k: usize,
    /// The first stages evaluated.
    pub first_stages: Vec<FirstStage>,
    /// The policies evaluated.
    pub policies: Vec<NamedPolicy>,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// Where the first stage looked for seeds.
    pub scope: Scope,
    /// Whether only a quick subset of the tests ran.
    pub quick: bool,
}

/// What was evaluated and what was left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataSummary {
    /// Tests in the benchmark file.
    pub tests_in_file: usize,
    /// Tests chosen (all, or the quick subset) whose snippets resolved.
    pub tests_chosen: usize,
    /// Tests scored: their spans cover at least one indexed chunk.
    pub tests_scored: usize,
    /// Scored boundary-fragmented tests (gold spans over 2 or more chunks).
    pub boundary: usize,
    /// Scored atomic tests (gold spans inside 1 chunk).
    pub atomic: usize,
    /// Scored tests per `kind` label and group, when the benchmark has kinds.
    pub kinds: BTreeMap<String, BTreeMap<Group, usize>>,
    /// Documents the chosen tests refer to.
    pub documents: usize,
    /// Documents in the index (retrieval searches all of them).
    pub index_documents: usize,
    /// Chunks in the index.
    pub index_chunks: usize,
    /// Snippet paths found only by their file name.
    pub path_fallbacks: usize,
    /// One such fallback, `written → found`.
    pub path_fallback_example: Option<String>,
    /// Snippets and tests left out, one line each.
    pub problems: Vec<String>,
}

/// The results for one first stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageResult {
    /// How the seeds were found.
    pub first_stage: FirstStage,
    /// Per policy, the means per group.
    pub policies: Vec<PolicyResult>,
    /// Paired bootstraps, per comparison, group and metric.
    pub comparisons: Vec<Comparison>,
    /// SCAR over the λ × γ grid, on the same seeds.
    pub sweep: Vec<SweepPoint>,
    /// The evidence walk over its depths, on the same seeds.
    pub depth_sweep: Vec<DepthPoint>,
    /// Per test: its gold chunks, seeds and per-policy scores.
    pub tests: Vec<TestRecord>,
    /// Every neighbour of every seed with its signals, when asked for.
    #[serde(skip)]
    pub neighbours: Vec<crate::NeighbourRow>,
}

/// One policy's means per group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// Stable key.
    pub key: String,
    /// Label.
    pub label: String,
    /// The policy.
    pub policy: scar_policy::Policy,
    /// Means per group (groups without tests are absent).
    pub groups: Vec<GroupMetrics>,
}

impl PolicyResult {
    /// The means over `group`, if it has tests.
    #[must_use]
    pub fn group(&self, group: Group) -> Option<&GroupMetrics> {
        self.groups.iter().find(|m| m.group == group)
    }
}

/// A paired bootstrap of `candidate − baseline` on one per-test metric over one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The candidate policy's key.
    pub candidate: String,
    /// The baseline policy's key.
    pub baseline: String,
    /// The tests compared.
    pub group: Group,
    /// `recall`, `chunks` or `tokens`.
    pub metric: String,
    /// The result.
    pub result: PairedBootstrap,
}

/// SCAR with one λ and γ, over the same seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// λ.
    pub lambda: f32,
    /// γ.
    pub gamma: f32,
    /// The window.
    pub window: u32,
    /// Means per group.
    pub groups: Vec<GroupMetrics>,
}

impl SweepPoint {
    /// The means over `group`, if it has tests.
    #[must_use]
    pub fn group(&self, group: Group) -> Option<&GroupMetrics> {
        self.groups.iter().find(|m| m.group == group)
    }
}

/// The evidence walk at one depth, over the same seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepthPoint {
    /// The depth, as a multiple of the number of seeds.
    pub depth: u32,
    /// The window.
    pub window: u32,
    /// Means per group.
    pub groups: Vec<GroupMetrics>,
}

impl DepthPoint {
    /// The means over `group`, if it has tests.
    #[must_use]
    pub fn group(&self, group: Group) -> Option<&GroupMetrics> {
        self.groups.iter().find(|m| m.group == group)
    }
}

/// One test under every policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    /// The test's id.
    pub id: String,
    /// Its kind label, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its group.
    pub group: Group,
    /// Its gold chunk ids.
    pub gold_chunks: Vec<u32>,
    /// The first stage's seeds, best first.
    pub seeds: Vec<u32>,
    /// Scores per policy key.
    pub scores: BTreeMap<String, TestScore>,
}

impl EvalReport {
    /// The policy result `key` of first stage `stage`.
    #[must_use]
    pub fn policy(&self, stage: FirstStage, key: &str) -> Option<&PolicyResult> {
        self.stage(stage)?.policies.iter().find(|p| p.key == key)
    }

    /// The results of first stage `stage`.
    #[must_use]
    pub fn stage(&self, stage: FirstStage) -> Option<&StageResult> {
        self.stages.iter().find(|s| s.first_stage == stage)
    }

    /// The summary printed by `scar eval`: per first stage, a table per group and the
    /// bootstraps.
    #[must_use]
    pub fn summary_markdown(&self) -> String {
        let mut out = String::new();
        let s = &self.settings;
        let d = &self.data;
        let _ = writeln!(
            out,
            "{} tests ({} boundary-fragmented, {} atomic) of {}; model {}, {} chunks of at most {} {}, k = {}{}{}",
            d.tests_scored,
            d.boundary,
            d.atomic,
            s.benchmark,
            s.model,
            d.index_chunks,
            s.chunker.capacity,
            unit(&s.chunker),
            s.k,
            scope_note(s.scope),
            if s.quick { " (quick subset)" } else { "" },
        );
        for stage in &self.stages {
            let _ = writeln!(out, "\n## First stage: {}", stage.first_stage);
            for group in Group::ALL {
                policy_table(&mut out, stage, group);
            }
            bootstrap_table(&mut out, stage);
        }
        out
    }

    /// The full report: settings, data, the summary tables, the sweep grids, the plot's
    /// legend and the problems met.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("# SCAR retrieval evaluation\n\n");
        self.settings_table(&mut out);
        let d = &self.data;
        if !d.kinds.is_empty() {
            let _ = writeln!(
                out,
                "\nTests by kind and group:\n\n| kind | boundary | atomic |\n|---|---:|---:|"
            );
            for (kind, groups) in &d.kinds {
                let n = |g| groups.get(&g).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "| {kind} | {} | {} |",
                    n(Group::Boundary),
                    n(Group::Atomic)
                );
            }
        }
        out.push_str(
            "\nDefinitions: a test is boundary-fragmented when its gold spans overlap 2 or more chunks, \
             atomic when they overlap 1. Recall = gold chunks retrieved / gold chunks, averaged over tests; \
             full = share of tests with every gold chunk; chunks = mean unique chunks in the context; \
             efficiency = recall / chunks; tokens = mean context tokens; span P / R = LegalBench-RAG \
             character precision and recall, averaged over tests. Bootstrap: paired, percentile 95% \
             interval, two-sided p = min(1, 2(c + 1)/(B + 1)) with c the resamples on the other side of 0; \
             d = Cohen's d for paired data (mean / sd of the differences).\n\n",
        );
        out.push_str(&self.summary_markdown());
        for stage in &self.stages {
            sweep_tables(&mut out, stage);
            depth_table(&mut out, stage);
            if let Some(signals) = crate::signals::summarize(&stage.neighbours) {
                let _ = writeln!(
                    out,
                    "\n## Neighbour signals, first stage {} (`neighbours.jsonl`, `roc.png`)\n",
                    stage.first_stage
                );
                out.push_str(&crate::signals::markdown(&signals));
            }
        }
        let _ = writeln!(
            out,
            "\n## Plot\n\n`recall_vs_chunks.png`: recall (y) against mean unique chunks (x), boundary-fragmented \
             tests on the left, atomic on the right, first stage {}. Policies: {}. Grey dots: the SCAR ±1 \
             sweep settings; the black ring marks SCAR ±1 itself; the dark line joins the evidence walk's \
             depths, the frontier it traces.",
            self.stages
                .first()
                .map_or_else(String::new, |s| s.first_stage.to_string()),
            crate::plot::LEGEND
                .iter()
                .map(|(key, colour)| format!("{} {colour}", self.label(key)))
                .collect::<Vec<_>>()
                .join(", "),
        );
        if d.path_fallbacks > 0 || !d.problems.is_empty() {
            out.push_str("\n## Problems\n\n");
            if let Some(example) = &d.path_fallback_example {
                let _ = writeln!(
                    out,
                    "- {} snippet paths were not found as written and were resolved by file name (e.g. {example}).",
                    d.path_fallbacks
                );
            }
            for problem in d.problems.iter().take(50) {
                let _ = writeln!(out, "- {problem}");
            }
            if d.problems.len() > 50 {
                let _ = writeln!(
                    out,
                    "- … and {} more (see report.json)",
                    d.problems.len() - 50
                );
            }
        }
        out
    }

    /// The table of settings and data at the top of the report.
    fn settings_table(&self, out: &mut String) {
        let s = &self.settings;
        let d = &self.data;
        let _ = writeln!(out, "| setting | value |\n|---|---|");
        let rows = [
            (
                "benchmark",
                format!(
                    "`{}`{}",
                    s.benchmark,
                    if s.quick { " (quick subset)" } else { "" }
                ),
            ),
            ("corpus", format!("`{}`", s.corpus)),
            (
                "index",
                format!(
                    "`{}`: {} documents, {} chunks",
                    s.index, d.index_documents, d.index_chunks
                ),
            ),
            ("model", format!("{} ({} dimensions)", s.model, s.dimension)),
            (
                "chunker",
                format!(
                    "at most {} {}, overlap {}, headings prepended: {}",
                    s.chunker.capacity,
                    unit(&s.chunker),
                    s.chunker.overlap,
                    s.chunker.prepend_headings
                ),
            ),
            ("seeds", format!("k = {}{}", s.k, scope_note(s.scope))),
            (
                "bootstrap",
                format!("B = {}, seed {:#x}", s.resamples, s.seed),
            ),
            (
                "tests",
                format!(
                    "{} scored of {} chosen, {} in the file: {} boundary-fragmented, {} atomic; {} documents",
                    d.tests_scored,
                    d.tests_chosen,
                    d.tests_in_file,
                    d.boundary,
                    d.atomic,
                    d.documents
                ),
            ),
        ];
        for (name, value) in rows {
            let _ = writeln!(out, "| {name} | {value} |");
        }
    }

    fn label(&self, key: &str) -> String {
        self.settings
            .policies
            .iter()
            .find(|p| p.key == key)
            .map_or_else(|| key.to_owned(), |p| p.label.clone())
    }
}

fn scope_note(scope: Scope) -> &'static str {
    match scope {
        Scope::Index => "",
        Scope::Document => ", seeds only from the documents holding each test's evidence",
    }
}

fn unit(chunker: &ChunkerConfig) -> &'static str {
    match chunker.unit {
        scar_index::ChunkUnit::Tokens => "tokens",
        scar_index::ChunkUnit::Characters => "characters",
    }
}

fn policy_table(out: &mut String, stage: &StageResult, group: Group) {
    let Some(n) = stage
        .policies
        .iter()
        .find_map(|p| p.group(group))
        .map(|m| m.n_tests)
    else {
        return;
    };
    let _ = writeln!(
        out,
        "\n### {} ({n} tests)\n\n| policy | recall | full | chunks | efficiency | tokens | span P | span R |\n|---|---:|---:|---:|---:|---:|---:|---:|",
        match group {
            Group::Boundary => "Boundary-fragmented",
            Group::Atomic => "Atomic",
            Group::All => "All",
        }
    );
    for policy in &stage.policies {
        if let Some(m) = policy.group(group) {
            let _ = writeln!(
                out,
                "| {} | {:.1}% | {:.1}% | {:.2} | {:.4} | {:.0} | {:.1}% | {:.1}% |",
                policy.label,
                100.0 * m.recall,
                100.0 * m.full_recall,
                m.mean_chunks,
                m.chunk_efficiency,
                m.mean_tokens,
                100.0 * m.span_precision,
                100.0 * m.span_recall,
            );
        }
    }
}

fn bootstrap_table(out: &mut String, stage: &StageResult) {
    if stage.comparisons.is_empty() {
        return;
    }
    let label = |key: &str| {
        stage
            .policies
            .iter()
            .find(|p| p.key == key)
            .map_or_else(|| key.to_owned(), |p| p.label.clone())
    };
    let _ = writeln!(
        out,
        "\n### Paired bootstrap (candidate − baseline)\n\n| candidate − baseline | group | metric | n | means | difference | 95% interval | p | d |\n|---|---|---|---:|---|---:|---|---:|---:|"
    );
    for c in &stage.comparisons {
        let r = &c.result;
        let (scale, digits, suffix) = if c.metric == "recall" {
            (100.0, 2, " pp")
        } else {
            (1.0, 2, "")
        };
        let relative = r
            .relative_diff
            .map_or_else(String::new, |x| format!(" ({:+.1}%)", 100.0 * x));
        let _ = writeln!(
            out,
            "| {} − {} | {} | {} | {} | {:.digits$} vs {:.digits$} | {:+.digits$}{suffix}{relative} | [{:+.digits$}, {:+.digits$}] | {} | {} |",
            label(&c.candidate),
            label(&c.baseline),
            c.group.label(),
            c.metric,
            r.n,
            scale * r.mean_candidate,
            scale * r.mean_baseline,
            scale * r.mean_diff,
            scale * r.ci_low,
            scale * r.ci_high,
            format_p(r.p_value, r.resamples),
            r.cohens_d
                .map_or_else(|| "n/a".to_owned(), |d| format!("{d:+.2}")),
        );
    }
}

/// `p`, or `< 2/(B+1)` at the smallest value the bootstrap can report.
fn format_p(p: f64, resamples: usize) -> String {
    let floor = 2.0 / (resamples + 1) as f64;
    if p <= floor * 1.000_001 {
        format!("< {:.4}", floor.max(1e-4))
    } else {
        format!("{p:.4}")
    }
}

fn sweep_tables(out: &mut String, stage: &StageResult) {
    if stage.sweep.is_empty() {
        return;
    }
    let mut lambdas: Vec<f32> = stage.sweep.iter().map(|p| p.lambda).collect();
    lambdas.sort_by(f32::total_cmp);
    lambdas.dedup();
    let mut gammas: Vec<f32> = stage.sweep.iter().map(|p| p.gamma).collect();
    gammas.sort_by(f32::total_cmp);
    gammas.dedup();
    let window = stage.sweep[0].window;
    let reference = stage
        .policies
        .iter()
        .find(|p| p.key == STATIC_1)
        .and_then(|p| p.group(Group::Boundary));
    let _ = writeln!(
        out,
        "\n## Sweep: SCAR ±{window}, first stage {} (recall / mean chunks)",
        stage.first_stage
    );
    if let (Some(reference), Some(scar)) = (
        reference,
        stage
            .policies
            .iter()
            .find(|p| p.key == SCAR_1)
            .and_then(|p| p.group(Group::Boundary)),
    ) {
        let _ = writeln!(
            out,
            "\nFor reference, boundary-fragmented: static ±1 {:.1}% / {:.2}, SCAR ±1 (λ 0.1, γ 0.8) {:.1}% / {:.2}.",
            100.0 * reference.recall,
            reference.mean_chunks,
            100.0 * scar.recall,
            scar.mean_chunks
        );
    }
    for group in [Group::Boundary, Group::Atomic] {
        if stage.sweep[0].group(group).is_none() {
            continue;
        }
        let _ = write!(out, "\n### {}\n\n| λ \\ γ |", group.label());
        for gamma in &gammas {
            let _ = write!(out, " {gamma:.2} |");
        }
        let _ = write!(out, "\n|---|");
        out.push_str(&"---:|".repeat(gammas.len()));
        out.push('\n');
        for lambda in &lambdas {
            let _ = write!(out, "| {lambda:.2} |");
            for gamma in &gammas {
                let cell = stage
                    .sweep
                    .iter()
                    .find(|p| (p.lambda - lambda).abs() < 1e-6 && (p.gamma - gamma).abs() < 1e-6)
                    .and_then(|p| p.group(group))
                    .map_or_else(
                        || "–".to_owned(),
                        |m| format!("{:.1}% / {:.2}", 100.0 * m.recall, m.mean_chunks),
                    );
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
    }
}

fn depth_table(out: &mut String, stage: &StageResult) {
    let Some(first) = stage.depth_sweep.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "\n## Sweep: evidence ±{}, first stage {} (recall / mean chunks; depth × k)\n",
        first.window, stage.first_stage
    );
    let reference = |key: &str| {
        stage
            .policies
            .iter()
            .find(|p| p.key == key)
            .and_then(|p| p.group(Group::Boundary))
    };
    if let (Some(fixed), Some(evidence)) = (reference(STATIC_1), reference(EVIDENCE)) {
        let _ = writeln!(
            out,
            "For reference, boundary-fragmented: static ±1 {:.1}% / {:.2}, evidence ±2 at depth {}×k {:.1}% / {:.2}.\n",
            100.0 * fixed.recall,
            fixed.mean_chunks,
            scar_policy::Policy::DEFAULT_DEPTH,
            100.0 * evidence.recall,
            evidence.mean_chunks
        );
    }
    out.push_str("| depth | boundary | atomic |\n|---:|---:|---:|\n");
    for point in &stage.depth_sweep {
        let cell = |group| {
            point.group(group).map_or_else(
                || "–".to_owned(),
                |m: &GroupMetrics| format!("{:.1}% / {:.2}", 100.0 * m.recall, m.mean_chunks),
            )
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            point.depth,
            cell(Group::Boundary),
            cell(Group::Atomic)
        );
    }
}
