//! `scar`: index documents, search them with SCAR, and see why each neighbour was added or left.

/// `println!` that returns the write's error instead of panicking, so that a closed pipe
/// (`scar search … | head`) ends the command quietly; see `main`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)?;
    }};
}

mod ask_command;
mod eval_command;
mod index_command;
mod inspect_command;
mod models_command;
mod search_command;
mod serve_command;
mod settings;
mod terminal;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use scar_core::ErrorChain;
use settings::{AnswerFlags, SearchFlags, SettingFlags, Settings};

// Model inference allocates and frees large tensors at a high rate; glibc's malloc serves each
// through mmap/munmap and spends up to a third of embedding time in the kernel.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status when some files could not be indexed but the rest were.
const EXIT_PARTIAL: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "scar",
    version,
    about = "Local document search with SCAR: semantic continuity-aware retrieval"
)]
#[command(
    after_help = "Settings: flags beat SCAR_* environment variables, which beat the config \
    file (see `scar config`), which beats the defaults.\nExit status: 0 success, 1 error, 2 bad \
    usage, 3 indexed with some files skipped."
)]
struct Cli {
    #[command(flatten)]
    settings: SettingFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Index files and folders (incremental: only new or changed files are embedded)
    Index(index_command::IndexArgs),
    /// Search the index and show every expansion decision
    Search {
        /// The question
        query: String,
        #[command(flatten)]
        search: SearchFlags,
        /// Print the full report as JSON (schema scar.search/2, docs/JSON.md)
        #[arg(long)]
        json: bool,
        /// Print whole chunk texts instead of the first lines
        #[arg(long)]
        full: bool,
    },
    /// Answer a question from the indexed documents with a local model (or a server), citing chunks
    Ask {
        /// The question
        query: String,
        #[command(flatten)]
        search: SearchFlags,
        #[command(flatten)]
        answer: AnswerFlags,
        /// Print the search report and the answer as JSON (schema scar.answer/3, docs/JSON.md)
        #[arg(long)]
        json: bool,
    },
    /// Show what an index holds, one chunk, or check its consistency
    Inspect(inspect_command::InspectArgs),
    /// List the models (embedding, chat, and those Ollama and LM Studio downloaded), or fetch one
    Models {
        #[command(subcommand)]
        action: Option<models_command::ModelsAction>,
        /// Print the list as JSON
        #[arg(long)]
        json: bool,
    },
    /// Evaluate every policy on a LegalBench-RAG benchmark: recall, chunks, tokens, bootstrap
    Eval(eval_command::EvalArgs),
    /// Serve the indexes over HTTP: search and ask, with every decision (GET /v1/openapi.json)
    Serve(serve_command::ServeArgs),
    /// Serve the indexes to an AI assistant over the Model Context Protocol (stdio)
    Mcp(serve_command::McpArgs),
    /// Print the effective settings and where each one came from
    Config {
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // The reader went away (`scar search … | head`): what it wanted, it has.
        Err(error) if closed_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprint!("{}", error_report(&error));
            ExitCode::FAILURE
        }
    }
}

/// The `error:` line and its `caused by:` chain, as printed: each cause once (`ErrorChain`),
/// with control characters made inert, since messages may quote a document or a server's reply.
fn error_report(error: &anyhow::Error) -> String {
    let mut messages = ErrorChain(error.as_ref()).messages().into_iter();
    let mut report = format!(
        "error: {}\n",
        terminal::inert(&messages.next().unwrap_or_default())
    );
    for cause in messages {
        let _ = writeln!(report, "  caused by: {}", terminal::inert(&cause));
    }
    report
}

fn closed_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The kernels would read a cap they cannot parse as none; say so before any work starts.
    scar_embed::cpu::max_isa()?;
    let (search_flags, answer_flags) = match &cli.command {
        Command::Search { search, .. } => (search.clone(), AnswerFlags::default()),
        Command::Ask { search, answer, .. } => (search.clone(), answer.clone()),
        Command::Eval(args) => (args.search_flags(), args.answer.clone()),
        Command::Serve(args) => (
            args.rerank.clone().into(),
            AnswerFlags::llm(args.llm.clone()),
        ),
        Command::Mcp(args) => (
            args.rerank.clone().into(),
            AnswerFlags::llm(args.llm.clone()),
        ),
        _ => (SearchFlags::default(), AnswerFlags::default()),
    };
    let settings = Settings::resolve(&cli.settings, &search_flags, &answer_flags)?;
    match cli.command {
        Command::Index(args) => index_command::run(&settings, &args),
        Command::Search {
            query, json, full, ..
        } => search_command::run(&settings, &query, json, full),
        Command::Ask { query, json, .. } => ask_command::run(&settings, &query, json),
        Command::Inspect(args) => inspect_command::run(&settings, &args),
        Command::Models { action, json } => models_command::run(&settings, action.as_ref(), json),
        Command::Eval(args) => eval_command::run(&settings, &args),
        Command::Serve(args) => serve_command::serve(&settings, &args),
        Command::Mcp(args) => serve_command::mcp(&settings, &args),
        Command::Config { json } => {
            print_config(&settings, json)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_config(settings: &Settings, json: bool) -> anyhow::Result<()> {
    let rows = settings.rows();
    let file = settings
        .config_file
        .as_ref()
        .map(|p| p.display().to_string());
    if json {
        let values: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(name, value, source)| {
                (
                    name.to_string(),
                    serde_json::json!({ "value": value, "source": source }),
                )
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({ "config_file": file, "settings": values })
        );
    } else {
        let looked = std::env::var_os("SCAR_CONFIG")
            .map(PathBuf::from)
            .or_else(settings::config_path);
        match (&file, looked) {
            (Some(file), _) => outln!("# config file: {file}"),
            (None, Some(path)) => outln!("# config file: {} (not present)", path.display()),
            (None, None) => outln!("# config file: none"),
        }
        for (name, value, source) in rows {
            outln!("{name:<17} = {value:<40} # {source}");
        }
    }
    Ok(())
}

/// The exit status for an indexing report.
fn index_exit(complete: bool) -> ExitCode {
    if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PARTIAL)
    }
}

/// A path for display, relative to the current folder when it is below it.
fn display_path(path: &std::path::Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(|p| p.display().to_string()))
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        // ENOSPC, as a full disk reports it.
        let full = std::io::Error::from_raw_os_error(28);
        let error = anyhow::Error::new(scar_index::IndexError::Io {
            path: PathBuf::from("index/vectors.0.bin"),
            source: full,
        })
        .context("indexing into index");
        let report = error_report(&error);
        assert_eq!(
            report.matches("No space left on device").count(),
            1,
            "{report}"
        );
        assert!(
            report.starts_with(
                "error: indexing into index\n  caused by: cannot access index/vectors.0.bin\n"
            ),
            "{report}"
        );
    }
}
