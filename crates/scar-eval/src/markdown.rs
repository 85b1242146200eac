//! `report.md` and the summary `scar eval` prints: the evaluation's report as markdown tables.

use std::fmt::Write as _;

use scar_index::{ChunkUnit, ChunkerConfig};
use scar_policy::Policy;

use crate::metrics::{Group, GroupMetrics};
use crate::options::{EVIDENCE, SCAR_1, STATIC_1, Scope};
use crate::plot::LEGEND;
use crate::report::{EvalReport, StageResult};
use crate::seeds::SeedReport;
use crate::signals::{Quartiles, SignalReport, summarize};

impl EvalReport {
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
            let _ = writeln!(out, "\n## First stage: {}", stage.label());
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
            if let Some(signals) = summarize(&stage.neighbours) {
                let _ = writeln!(
                    out,
                    "\n## Neighbour signals, first stage {} (`neighbours.jsonl`, `roc.png`)\n",
                    stage.first_stage
                );
                out.push_str(&signals_section(&signals));
            }
            if let Some(seeds) = &stage.seed_signals {
                let _ = writeln!(
                    out,
                    "\n## Which seeds hold evidence, first stage {} (`seeds.jsonl`)\n",
                    stage.first_stage
                );
                out.push_str(&seeds_section(seeds));
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
            LEGEND
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
        ChunkUnit::Tokens => "tokens",
        ChunkUnit::Characters => "characters",
    }
}

fn policy_table(out: &mut String, stage: &StageResult, group: Group) {
    let Some(n) = stage.tests_in(group) else {
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
            .policy(key)
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
    let _ = writeln!(
        out,
        "\n## Sweep: SCAR ±{window}, first stage {} (recall / mean chunks)",
        stage.label()
    );
    if let (Some(reference), Some(scar)) = (
        boundary_means(stage, STATIC_1),
        boundary_means(stage, SCAR_1),
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
        first.window,
        stage.label()
    );
    if let (Some(fixed), Some(evidence)) = (
        boundary_means(stage, STATIC_1),
        boundary_means(stage, EVIDENCE),
    ) {
        let _ = writeln!(
            out,
            "For reference, boundary-fragmented: static ±1 {:.1}% / {:.2}, evidence ±2 at depth {}×k {:.1}% / {:.2}.\n",
            100.0 * fixed.recall,
            fixed.mean_chunks,
            Policy::DEFAULT_DEPTH,
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

/// The boundary-fragmented means of policy `key`, the reference the sweeps are read against.
fn boundary_means<'a>(stage: &'a StageResult, key: &str) -> Option<&'a GroupMetrics> {
    stage.policy(key)?.group(Group::Boundary)
}

/// `q1 / median / q3`, as the signal tables show them.
fn quartiles(q: &Quartiles) -> String {
    format!("{:.3} / {:.3} / {:.3}", q.q1, q.median, q.q3)
}

/// The seed signals' section for one stage.
fn seeds_section(report: &SeedReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} seeds, {} of them holding gold, {} with a neighbour one step away that holds gold \
         they do not.\n",
        report.seeds, report.holding, report.with_useful_neighbour
    );
    out += "| signal | AUC: holds gold | AUC: useful neighbour | holding: q1 / median / q3 | others: q1 / median / q3 |\n";
    out += "| --- | ---: | ---: | --- | --- |\n";
    for s in &report.signals {
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3} | {} | {} |",
            s.name,
            s.auc_holds_gold,
            s.auc_useful_neighbour,
            quartiles(&s.holding),
            quartiles(&s.other)
        );
    }
    if !report.times.is_empty() {
        out += "\n| judge | seconds per question: p50 | p95 |\n| --- | ---: | ---: |\n";
        for time in &report.times {
            let _ = writeln!(out, "| {} | {:.3} | {:.3} |", time.name, time.p50, time.p95);
        }
    }
    out
}

/// The neighbour signals' section for one stage.
fn signals_section(report: &SignalReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} neighbours decided on boundary-fragmented tests (distance 1, not seeds), {} of them \
         useful (they overlap gold their seed does not).\n",
        report.neighbours, report.useful
    );
    out += "| signal | ROC AUC | useful: q1 / median / q3 | others: q1 / median / q3 |\n";
    out += "| --- | ---: | --- | --- |\n";
    for s in &report.signals {
        let _ = writeln!(
            out,
            "| {} | {:.3} | {} | {} |",
            s.name,
            s.auc,
            quartiles(&s.useful),
            quartiles(&s.other)
        );
    }
    let (fpr, tpr) = report.paper_point;
    let _ = writeln!(
        out,
        "\nThe paper's rule (SCAR margin > 0) accepts {:.1}% of the useful neighbours and {:.1}% \
         of the others.",
        100.0 * tpr,
        100.0 * fpr
    );
    out
}
