//! `scar eval --corpus DIR --benchmark FILE`: every policy on the same seeds, with statistics;
//! with `--answers`, questions answered from the default policy's context and from static ±1's,
//! each answer checked against the gold evidence.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use scar_answer::Reranking;
use scar_embed::{Embedder, ModelLocator};
use scar_eval::{
    AnswerEvalOptions, Benchmark, EvalOptions, Resolved, Scope, SeedJudge, evaluate,
    evaluate_answers, resolve, write_report,
};
use scar_index::{Index, IndexOptions, index_paths, indexing_model};
use scar_retrieve::{ChunkStore, FirstStage, Retriever, baseline_options};

use crate::display_path;
use crate::settings::{AnswerFlags, RerankFlags, SearchFlags, Settings};
use crate::terminal::inert;

/// Tests in a `--quick` run, spread evenly over the benchmark.
const QUICK_TESTS: usize = 20;

// These doc comments are clap's help text, where backticks would print as they are.
#[allow(clippy::doc_markdown)]
#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Folder the benchmark's `file_path`s are relative to
    #[arg(long)]
    corpus: PathBuf,
    /// Benchmark in the LegalBench-RAG layout: {"tests": [{"query", "snippets": [{"file_path", "span"}]}]}
    #[arg(long)]
    benchmark: PathBuf,
    /// Folder for report.md, report.json and recall_vs_chunks.png
    #[arg(long, default_value = "eval-out")]
    out: PathBuf,
    /// Evaluate only 20 tests spread evenly over the benchmark (for CI)
    #[arg(long)]
    quick: bool,
    /// First stages to evaluate, comma-separated: dense, bm25, hybrid [default: the first_stage setting]
    #[arg(long, value_delimiter = ',')]
    first_stages: Vec<FirstStage>,
    /// Where seeds come from: the whole index, or only the documents holding each test's
    /// evidence (isolates expansion from finding the document)
    #[arg(long, default_value = "index")]
    scope: Scope,
    /// Seeds per question [env: SCAR_K] [default: 5]
    #[arg(long, short, allow_negative_numbers = true)]
    k: Option<usize>,
    /// Also write neighbours.jsonl: every neighbour of every seed (±3) with its signals and
    /// whether it held evidence; and seeds.jsonl: every seed with its signals and whether it
    /// held evidence
    #[arg(long)]
    neighbours: bool,
    /// Judges that score every seed in seeds.jsonl, comma-separated: sentence (the seed's
    /// sentence closest to the question, with the index's model), llm (the chat model's
    /// probability of "yes": --llm), likelihood (how much likelier the chat model finds the
    /// question after the seed: --llm), cross-encoder (--reranker)
    #[arg(long, value_delimiter = ',', requires = "neighbours")]
    judges: Vec<Reranking>,
    /// With a reranker (--rerank, or the rerank setting), each first stage is evaluated twice:
    /// its own seeds, and the seeds the reranker takes from its best 30 candidates
    #[command(flatten)]
    rerank: RerankFlags,
    /// Instead of the retrieval report, answer N questions (default 40, spread over the
    /// benchmark) with the chat model, from the policy setting's context and from static ±1's,
    /// and measure the citations and traced sentences against the evidence (answers.md, .json)
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "40",
          conflicts_with_all = ["quick", "neighbours"])]
    answers: Option<usize>,
    /// Print the whole report as JSON (schema scar.eval/2, or scar.answers/1 with --answers)
    /// instead of the summary tables
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub answer: AnswerFlags,
}

impl EvalArgs {
    /// The search settings this command takes from the command line.
    pub fn search_flags(&self) -> SearchFlags {
        SearchFlags {
            k: self.k,
            rerank: self.rerank.clone(),
            ..SearchFlags::default()
        }
    }
}

pub fn run(settings: &Settings, args: &EvalArgs) -> Result<ExitCode> {
    let benchmark = Benchmark::load(&args.benchmark)?;
    if let Some(questions) = args.answers {
        return run_answers(settings, args, &benchmark, questions);
    }
    let subset = args.quick.then(|| benchmark.spread(QUICK_TESTS));
    let resolved = resolve(&benchmark, &args.benchmark, &args.corpus, subset.as_deref())?;
    if resolved.fallbacks > 0 {
        eprintln!(
            "note: {} snippet paths were found by file name only (e.g. {})",
            resolved.fallbacks,
            inert(resolved.fallback_example.as_deref().unwrap_or_default())
        );
    }
    let retriever = retriever(settings, &resolved, args.json)?;
    let first_stages = if args.first_stages.is_empty() {
        vec![settings.first_stage.value]
    } else {
        args.first_stages.clone()
    };
    let options = EvalOptions {
        k: settings.k.value,
        first_stages,
        scope: args.scope,
        quick: args.quick,
        neighbour_table: args.neighbours,
        seed_judges: seed_judges(settings, args, &retriever)?,
        reranker: settings
            .reranker(retriever.shared_embedder())?
            .map(|judge| SeedJudge {
                name: settings.rerank.value.to_string(),
                judge,
            }),
        ..EvalOptions::default()
    };
    if !args.json {
        eprintln!(
            "evaluating {} of {} tests with {} ({}{}), k = {}, seeds from the {}",
            resolved.tests.len(),
            resolved.tests_in_file,
            retriever.store().model().id,
            options
                .first_stages
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            options
                .reranker
                .as_ref()
                .map_or_else(String::new, |judge| format!(
                    "; each also reranked by {}",
                    judge.name
                )),
            options.k,
            if args.scope == Scope::Index {
                "whole index"
            } else {
                "tests' own documents"
            },
        );
    }
    let bar = crate::index_command::progress_bar(
        args.json,
        "{bar:30} {percent:>3}% {pos}/{len} questions, {elapsed} (ETA {eta})",
    );
    let report = evaluate(&retriever, &resolved, &options, &mut |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
    })?;
    bar.finish_and_clear();
    let paths = write_report(&report, &args.out)?;

    let data = &report.data;
    if !data.problems.is_empty() {
        eprintln!(
            "warning: {} snippets or tests were left out:",
            data.problems.len()
        );
        for problem in data.problems.iter().take(5) {
            eprintln!("  {}", inert(problem));
        }
        if data.problems.len() > 5 {
            eprintln!("  … (all of them in {})", display_path(&paths[1]));
        }
    }
    let others = data.index_documents.saturating_sub(data.documents);
    if others > 0 {
        eprintln!(
            "note: the index holds {others} documents the tests do not refer to; retrieval searches them too"
        );
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        outln!("{}", report.summary_markdown());
        eprintln!("wrote {}", listed(&paths));
    }
    Ok(ExitCode::SUCCESS)
}

/// The judges `--judges` names, loaded.
fn seed_judges(
    settings: &Settings,
    args: &EvalArgs,
    retriever: &Retriever<Box<dyn ChunkStore>>,
) -> Result<Vec<SeedJudge>> {
    args.judges
        .iter()
        .map(|&choice| {
            let Some(judge) = settings.open_reranker(choice, retriever.shared_embedder())? else {
                bail!(
                    "--judges none judges nothing; name sentence, llm, likelihood or cross-encoder"
                );
            };
            Ok(SeedJudge {
                name: choice.to_string(),
                judge,
            })
        })
        .collect()
}

/// `scar eval --answers N`: N questions answered from two contexts of the same seeds.
fn run_answers(
    settings: &Settings,
    args: &EvalArgs,
    benchmark: &Benchmark,
    questions: usize,
) -> Result<ExitCode> {
    if questions == 0 {
        bail!("--answers takes a number of questions of at least 1");
    }
    let first_stage = match args.first_stages.as_slice() {
        [] => settings.first_stage.value,
        [stage] => *stage,
        _ => bail!("--answers answers from one first stage; name one in --first-stages"),
    };
    if settings.rerank.value != Reranking::None {
        bail!(
            "--answers answers from the first stage's own seeds; leave the reranker out \
             (--rerank none; it is {} from the {})",
            settings.rerank.value,
            settings.rerank.source
        );
    }
    let policies = vec![settings.policy()?, baseline_options()?];
    // The chat model first: a bad server URL or model file is reported before any indexing.
    let mut generator = crate::ask_command::open_generator(settings)?;
    let subset = benchmark.spread(questions);
    let resolved = resolve(benchmark, &args.benchmark, &args.corpus, Some(&subset))?;
    let retriever = retriever(settings, &resolved, args.json)?;
    let options = AnswerEvalOptions {
        k: settings.k.value,
        first_stage,
        scope: args.scope,
        policies,
        params: settings.generation_params(),
    };
    if !args.json {
        eprintln!(
            "answering {} of {} questions with {}, from the contexts of {}, k = {}, {} first stage",
            resolved.tests.len(),
            resolved.tests_in_file,
            generator.name(),
            options
                .policies
                .iter()
                .map(|p| p.policy().to_string())
                .collect::<Vec<_>>()
                .join(" and "),
            options.k,
            first_stage,
        );
    }
    let bar = crate::index_command::progress_bar(
        args.json,
        "{bar:30} {percent:>3}% {pos}/{len} answers, {elapsed} (ETA {eta})",
    );
    let report = evaluate_answers(
        &retriever,
        &resolved,
        generator.as_mut(),
        &options,
        &mut |p| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        },
    )?;
    bar.finish_and_clear();
    let paths = report.write(&args.out)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for problem in &report.problems {
            eprintln!("left out: {}", inert(problem));
        }
        outln!("{}", report.summary_markdown());
        eprintln!("wrote {}", listed(&paths));
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens the store with its model: a PostgreSQL store as it is (its writers publish the
/// benchmark's documents), or the index folder, first indexing the benchmark's documents that
/// it lacks or that changed (incrementally: only those files, so other documents stay).
fn retriever(
    settings: &Settings,
    resolved: &Resolved,
    quiet: bool,
) -> Result<Retriever<Box<dyn ChunkStore>>> {
    if let Some(url) = &settings.store.value {
        let store = scar_postgres::PgStore::open(url)?;
        let stored: HashSet<PathBuf> = store
            .documents()?
            .into_iter()
            .map(|document| document.path)
            .collect();
        let missing = resolved
            .documents
            .iter()
            .filter(|path| !stored.contains(*path))
            .count();
        if missing > 0 && !quiet {
            eprintln!(
                "note: {} of the benchmark's {} documents are not in {}; publish them with \
                 `scar --store URL index {}`",
                missing,
                resolved.documents.len(),
                store.url(),
                display_path(&resolved.corpus)
            );
        }
        let locator = ModelLocator::from_env(&settings.models_dir.value);
        let store: Box<dyn ChunkStore> = Box::new(store);
        return Ok(Retriever::open_store(
            store,
            &locator,
            &settings.embed_options(),
        )?);
    }
    let dir = &settings.index.value;
    let existing = Index::open(dir).ok();
    let model = indexing_model(
        settings.named_model(),
        existing.as_ref().map(Index::manifest),
        &settings.model.value,
    );
    let files = ModelLocator::from_env(&settings.models_dir.value).locate(model)?;
    let options = existing.as_ref().map_or_else(
        || settings.embed_options(),
        |index| {
            settings
                .embed_options()
                .with_instructions_of(&index.manifest().model)
        },
    );
    let embedder = Embedder::load(&files, &options)?;
    let missing = resolved
        .documents
        .iter()
        .filter(|path| !is_current(existing.as_ref(), path))
        .count();
    drop(existing);
    if missing > 0 {
        if !quiet {
            eprintln!(
                "indexing {missing} of the benchmark's {} documents into {} with {} on {} in {}",
                resolved.documents.len(),
                dir.display(),
                embedder.info().id,
                embedder.device_name(),
                embedder.precision()
            );
        }
        let cancel = crate::index_command::cancel_on_interrupt()?;
        let bar =
            crate::index_command::progress_bar(quiet, "{bar:30} {percent:>3}% indexing: {msg}");
        let report = index_paths(
            dir,
            &resolved.documents,
            &embedder,
            &IndexOptions::default(),
            &mut |p| crate::index_command::show_progress(&bar, p),
            &cancel,
        )?;
        bar.finish_and_clear();
        if report.cancelled {
            bail!("indexing was cancelled; run the same command again to continue");
        }
        for skipped in &report.skipped {
            eprintln!(
                "skipped {}: {}",
                inert(&display_path(&skipped.path)),
                inert(&skipped.reason)
            );
        }
    }
    let index =
        Index::open(dir).with_context(|| format!("opening the index in {}", dir.display()))?;
    let index: Box<dyn ChunkStore> = Box::new(index);
    Ok(Retriever::with_store(Arc::new(embedder), index)?)
}

/// Whether `path` is in the index with the size and modification time it has now.
fn is_current(index: Option<&Index>, path: &Path) -> bool {
    let Some(entry) = index.and_then(|index| index.documents().iter().find(|d| d.path == path))
    else {
        return false;
    };
    std::fs::metadata(path).is_ok_and(|metadata| entry.is_current(&metadata))
}

/// Paths for a person, comma-separated.
fn listed(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| display_path(p))
        .collect::<Vec<_>>()
        .join(", ")
}
