//! `scar serve` (HTTP) and `scar mcp` (Model Context Protocol over stdio): the indexes served to
//! other tools.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use scar_serve::{Library, LibraryOptions, Source, http};

use crate::settings::{RerankFlags, Settings};

// The comments are the help text, where flags and variables read best unquoted.
#[allow(clippy::doc_markdown)]
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Index folders to serve, each named after its folder, beside the store when one is set
    /// (named after its database) [default: the --index folder, when no store is set]
    indexes: Vec<PathBuf>,
    /// Address to listen on; one other machines can reach needs --token
    #[arg(long, default_value = "127.0.0.1:8765")]
    bind: SocketAddr,
    /// Bearer token every request but /v1/health must carry
    #[arg(long, env = "SCAR_SERVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Connections open at once; past it, clients wait until one closes [default: the open-file
    /// limit less 64, from 8 to 1024]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Local chat model for /v1/ask, loaded on the first question [env: SCAR_LLM] [default: SmolLM2-135M-Instruct]
    #[arg(long)]
    pub llm: Option<String>,
    #[command(flatten)]
    pub rerank: RerankFlags,
}

#[allow(clippy::doc_markdown)]
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Index folders to serve, each named after its folder, beside the store when one is set
    /// (named after its database) [default: the --index folder, when no store is set]
    indexes: Vec<PathBuf>,
    /// Local chat model for the `ask` tool, loaded on the first question [env: SCAR_LLM] [default: SmolLM2-135M-Instruct]
    #[arg(long)]
    pub llm: Option<String>,
    #[command(flatten)]
    pub rerank: RerankFlags,
}

/// The library of the store (when one is set) and the index folders named, or else of the
/// `--index` folder.
fn open_library(settings: &Settings, indexes: &[PathBuf]) -> Result<Library> {
    let mut sources: Vec<Source> = indexes.iter().cloned().map(Source::Folder).collect();
    if let Some(url) = &settings.store.value {
        sources.insert(0, Source::Postgres(url.clone()));
    } else if sources.is_empty() {
        sources.push(Source::Folder(settings.index.value.clone()));
    }
    let options = LibraryOptions {
        models_dir: settings.models_dir.value.clone(),
        device: settings.device.value,
        precision: settings.precision.value,
        llm: settings.llm.value.clone(),
        rerank: settings.rerank.value,
        reranker: settings.reranker.value.clone(),
    };
    Ok(Library::open(&sources, options)?)
}

pub fn serve(settings: &Settings, args: &ServeArgs) -> Result<ExitCode> {
    http::check_reach(args.bind, args.token.as_deref())?;
    let library = Arc::new(open_library(settings, &args.indexes)?);
    for summary in library.summaries()? {
        eprintln!(
            "serving {} ({}: {} documents, {} chunks)",
            summary.name, summary.dir, summary.documents, summary.chunks
        );
    }
    let options = http::HttpOptions {
        token: args.token.clone(),
        ..http::HttpOptions::default()
    };
    let router = http::router(library, &options);
    let mut connections = http::Connections::default();
    if let Some(max) = args.max_connections {
        connections.max = max as usize;
    }
    http::run(args.bind, router, &connections, |address| {
        if !address.ip().is_loopback() {
            eprintln!(
                "warning: {address} can be reached from other machines; every request but \
                 /v1/health needs the token"
            );
        }
        eprintln!(
            "listening on http://{address}/v1 (GET /v1/openapi.json describes the API; Ctrl-C stops)"
        );
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn mcp(settings: &Settings, args: &McpArgs) -> Result<ExitCode> {
    let library = open_library(settings, &args.indexes)?;
    scar_serve::mcp::serve(&library, std::io::stdin().lock(), std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}
