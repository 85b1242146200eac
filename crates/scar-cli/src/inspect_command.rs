//! `scar inspect`: what an index holds, one chunk with its continuity, or a consistency check.

use std::process::ExitCode;

use anyhow::{Result, bail};
use scar_core::{ChunkId, Side};
use scar_index::{Index, Skipped};
use scar_retrieve::ChunkStore;

use crate::display_path;
use crate::settings::Settings;
use crate::terminal::inert;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Show this chunk, with its neighbours' continuity
    #[arg(long, allow_negative_numbers = true)]
    chunk: Option<u32>,
    /// Check that every chunk has its vector, text and continuity (exit 1 if not)
    #[arg(long)]
    verify: bool,
    /// Print as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(settings: &Settings, args: &InspectArgs) -> Result<ExitCode> {
    if let Some(url) = &settings.store.value {
        return inspect_store(url, args);
    }
    let index = Index::open(&settings.index.value)?;
    if args.verify {
        let problems = index.verify()?;
        let repair = format!("scar --index {} index --repair", index.dir().display());
        if args.json {
            outln!(
                "{}",
                serde_json::json!({
                    "consistent": problems.is_empty(), "problems": problems,
                    "repair": (!problems.is_empty()).then_some(&repair),
                })
            );
        } else if problems.is_empty() {
            outln!(
                "consistent: {} documents, {} chunks",
                index.documents().len(),
                index.len()
            );
        } else {
            for problem in &problems {
                outln!("{}", inert(problem));
            }
            outln!("the index is damaged; repair it with `{repair}`");
        }
        return Ok(if problems.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    if let Some(id) = args.chunk {
        let Some(chunk) = index.chunk(ChunkId(id)) else {
            bail!(
                "the index has no chunk {id} (it holds {} chunks)",
                index.len()
            );
        };
        let continuity_prev = index
            .neighbour(chunk.id, Side::Previous)
            .and_then(|p| index.continuity_next(p));
        let continuity_next = index.continuity_next(chunk.id);
        if args.json {
            outln!(
                "{}",
                serde_json::json!({
                    "id": chunk.id, "document": chunk.document.path.to_string_lossy(), "ordinal": chunk.ordinal,
                    "chars": [chunk.chars.start, chunk.chars.end], "tokens": chunk.token_count,
                    "heading_path": chunk.heading_path, "continuity_previous": continuity_prev,
                    "continuity_next": continuity_next, "text": chunk.text,
                })
            );
        } else {
            let fmt = |c: Option<f32>| {
                c.map_or_else(|| "document edge".to_owned(), |c| format!("{c:.3}"))
            };
            outln!(
                "chunk {} = {} ¶{} (chars {}..{}, {} tokens)\nheadings: {}\ncontinuity with previous: {}, with next: {}\n\n{}",
                chunk.id,
                inert(&display_path(&chunk.document.path)),
                chunk.ordinal,
                chunk.chars.start,
                chunk.chars.end,
                chunk.token_count,
                inert(chunk.heading_path),
                fmt(continuity_prev),
                fmt(continuity_next),
                inert(chunk.text)
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let manifest = index.manifest();
    let skipped = scar_index::skipped_files(index.dir())?;
    if args.json {
        outln!(
            "{}",
            serde_json::json!({
                "dir": index.dir().to_string_lossy(), "manifest": manifest, "chunks": index.len(),
                "documents": index.documents(), "hnsw": index.hnsw(), "skipped": skipped,
            })
        );
    } else {
        print_summary(&index, &skipped)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The index's settings, its dense search, its documents and the files it could not read.
fn print_summary(index: &Index, skipped: &[Skipped]) -> Result<()> {
    let manifest = index.manifest();
    outln!(
        "index {}\nmodel {} ({} dimensions, {:?} pooling), vectors {:?}\nchunker {:?}, capacity {}, overlap {}, headings prepended: {}; BM25 words: {}\n{} documents, {} chunks",
        index.dir().display(),
        inert(&manifest.model.id),
        manifest.model.dimension,
        manifest.model.pooling,
        manifest.vectors,
        manifest.chunker.unit,
        manifest.chunker.capacity,
        manifest.chunker.overlap,
        manifest.chunker.prepend_headings,
        manifest.analyzer.label(),
        index.documents().len(),
        index.len()
    );
    if let Some(graph) = index.hnsw() {
        outln!(
            "dense search: HNSW graph over {} chunks (connectivity {}, expansion {}/{}), the rest exact",
            graph.rows,
            graph.params.connectivity,
            graph.params.expansion_add,
            graph.params.expansion_search
        );
    } else {
        outln!("dense search: exact");
    }
    let languages: Vec<String> = index.languages().iter().map(ToString::to_string).collect();
    if !languages.is_empty() {
        outln!("languages: {}", languages.join(", "));
    }
    for document in index.documents() {
        let attachment = document
            .attachment
            .as_ref()
            .map(|name| format!(" › {}", inert(name)));
        let language = document
            .language
            .as_deref()
            .and_then(scar_index::language_name)
            .map(|name| format!("  ({name})"));
        outln!(
            "  {:>6} chunks  {}{}{}",
            document.chunk_count,
            inert(&display_path(&document.path)),
            attachment.unwrap_or_default(),
            language.unwrap_or_default()
        );
    }
    if !skipped.is_empty() {
        outln!("skipped ({}):", skipped.len());
        for file in skipped {
            outln!(
                "  {}: {}",
                inert(&display_path(&file.path)),
                inert(&file.reason)
            );
        }
    }
    Ok(())
}

/// `scar --store URL inspect`: what the PostgreSQL store holds, or one of its chunks.
fn inspect_store(url: &str, args: &InspectArgs) -> Result<ExitCode> {
    if args.verify {
        bail!(
            "--verify checks an index folder; a PostgreSQL store is kept whole by its \
             transactions (drop --store to verify the index folder)"
        );
    }
    let store = scar_postgres::PgStore::open(url)?;
    if let Some(id) = args.chunk {
        let Some(chunk) = store.chunk(ChunkId(id))? else {
            bail!("the store at {} has no chunk {id}", store.url());
        };
        if args.json {
            outln!(
                "{}",
                serde_json::json!({
                    "id": chunk.id, "document": chunk.document, "attachment": chunk.attachment,
                    "ordinal": chunk.ordinal, "chars": chunk.chars, "tokens": chunk.tokens,
                    "heading_path": chunk.heading_path, "page": chunk.page, "text": chunk.text,
                })
            );
        } else {
            outln!(
                "chunk {} · {} ¶{} · {} tokens",
                chunk.id,
                inert(&chunk.document),
                chunk.ordinal + 1,
                chunk.tokens
            );
            if !chunk.heading_path.is_empty() {
                outln!("{}", inert(&chunk.heading_path));
            }
            outln!("{}", inert(&chunk.text));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let summary = store.summary()?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        outln!("store: {}", summary.url);
        outln!(
            "model: {} ({} dimensions) · schema version {}",
            summary.model.id,
            summary.model.dimension,
            summary.schema_version
        );
        let chunker = summary.chunker;
        outln!(
            "chunker {:?}, capacity {}, overlap {}, headings prepended: {}; BM25 words: {}",
            chunker.unit,
            chunker.capacity,
            chunker.overlap,
            chunker.prepend_headings,
            summary.analyzer.label()
        );
        outln!(
            "{} files, {} documents, {} chunks",
            summary.files,
            summary.documents,
            summary.chunks
        );
        if !summary.shards.is_empty() {
            outln!(
                "chunks on {} shards: {}",
                summary.shards.len(),
                summary.shards.join(", ")
            );
        }
        if let Some(params) = summary.hnsw {
            outln!(
                "dense search: pgvector HNSW index (m {}, ef_construction {}, ef_search {})",
                params.connectivity,
                params.expansion_add,
                params.expansion_search
            );
        } else {
            outln!("dense search: exact");
        }
    }
    Ok(ExitCode::SUCCESS)
}
