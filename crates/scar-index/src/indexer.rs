//! Indexing runs: bring an index up to date with a set of files, incrementally and crash-safely.
//! Files are loaded, cut and embedded here; the store's writer keeps the rows and commits them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use scar_core::ErrorChain;
use scar_embed::Embedder;

use crate::chunk::{ChunkSpan, Chunker, ChunkerConfig};
use crate::hnsw::{self, HnswGraph, HnswInfo, HnswParams};
use crate::load::{LoadOptions, LoadedDocument, load_document};
use crate::store::{
    DocumentEntry, Index, Manifest, NewDocument, VectorEncoding, Writer, file_stamp,
};
use crate::walk::discover;
use crate::{IndexError, Result};

/// How to build an index. The chunker and vector encoding apply when the index is created; an
/// existing index keeps its own.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexOptions {
    /// How documents are cut.
    pub chunker: ChunkerConfig,
    /// How vectors are stored.
    pub vectors: VectorEncoding,
    /// Limits on input files.
    pub load: LoadOptions,
    /// Work is committed at least this often, so a crash loses at most this much.
    pub commit_every: Duration,
    /// Chunks gathered from several small files before one embedding call.
    pub embed_batch_chunks: usize,
    /// What to do with the HNSW graph for approximate dense search.
    pub hnsw: HnswSetting,
}

/// What an indexing run does with the HNSW graph (approximate dense search).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HnswSetting {
    /// Keep a graph the index has current (link new rows, rebuild after a compaction); build
    /// none if it has none.
    #[default]
    Keep,
    /// Build a graph with these parameters, or keep the one the index has current. A graph
    /// with the same links but another search breadth is kept, with the new breadth.
    Build(HnswParams),
    /// Delete the graph: dense search is exact again.
    Remove,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            chunker: ChunkerConfig::default(),
            vectors: VectorEncoding::default(),
            load: LoadOptions::default(),
            commit_every: Duration::from_secs(5),
            embed_batch_chunks: 256,
            hnsw: HnswSetting::Keep,
        }
    }
}

/// Where an indexing run stands, reported after each file and each embedded batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexProgress {
    /// Files looked at so far (indexed, unchanged or skipped).
    pub files_done: usize,
    /// Files found under the roots.
    pub files_total: usize,
    /// Bytes of new or changed files embedded so far.
    pub bytes_done: u64,
    /// Bytes of new or changed files to embed in this run.
    pub bytes_total: u64,
    /// Chunks embedded so far.
    pub chunks: usize,
    /// Tokens embedded so far.
    pub tokens: usize,
    /// Rows linked into the HNSW graph so far, once embedding is done.
    pub graph_rows_done: u32,
    /// Rows to link into the graph in this run (0 when there is nothing to link).
    pub graph_rows_total: u32,
    /// Time since the run started.
    pub elapsed: Duration,
}

impl IndexProgress {
    /// Embedding throughput so far.
    #[must_use]
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Share of the run done: bytes embedded, then rows linked into the HNSW graph.
    #[must_use]
    pub fn fraction(&self) -> f64 {
        if self.graph_rows_total > 0 {
            f64::from(self.graph_rows_done) / f64::from(self.graph_rows_total)
        } else {
            self.bytes_done as f64 / self.bytes_total.max(1) as f64
        }
    }

    /// One line for a person: files, chunks, throughput and time left while embedding, then
    /// the graph's linking.
    #[must_use]
    pub fn status(&self) -> String {
        if self.graph_rows_total > 0 {
            return format!(
                "linking {}/{} chunks into the HNSW graph",
                self.graph_rows_done, self.graph_rows_total
            );
        }
        let eta = self
            .eta()
            .map_or_else(String::new, |eta| format!(" · {} left", humanize(eta)));
        format!(
            "{}/{} files · {} chunks · {:.0} tokens/s{eta}",
            self.files_done,
            self.files_total,
            self.chunks,
            self.tokens_per_second()
        )
    }

    /// Time left, extrapolated from the bytes embedded so far.
    #[must_use]
    pub fn eta(&self) -> Option<Duration> {
        (self.bytes_done > 0).then(|| {
            let rate = self.bytes_done as f64 / self.elapsed.as_secs_f64().max(1e-9);
            Duration::from_secs_f64(self.bytes_total.saturating_sub(self.bytes_done) as f64 / rate)
        })
    }
}

/// A duration in its largest useful unit: `42s`, `2m05s`, `3h07m`.
fn humanize(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds >= 3600 {
        format!("{}h{:02}m", seconds / 3600, seconds % 3600 / 60)
    } else if seconds >= 60 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{seconds}s")
    }
}

/// A file that was not indexed, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The file. Serialized for display: a name that is not UTF-8 is shown with U+FFFD.
    #[serde(serialize_with = "lossy_path")]
    pub path: PathBuf,
    /// Why, for a person.
    pub reason: String,
}

fn lossy_path<S: serde::Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

/// What an indexing run did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IndexReport {
    /// Files indexed for the first time.
    pub added: usize,
    /// Files whose content changed and were re-indexed.
    pub updated: usize,
    /// Files no longer present, dropped from the index.
    pub removed: usize,
    /// Files already indexed as they are.
    pub unchanged: usize,
    /// Files that could not be indexed (an earlier version, if any, is kept).
    pub skipped: Vec<Skipped>,
    /// Files indexed with a caveat (e.g. invalid UTF-8 replaced).
    pub warnings: Vec<Skipped>,
    /// Chunks embedded.
    pub chunks: usize,
    /// Tokens embedded.
    pub tokens: usize,
    /// Chunks longer than the model's limit, truncated for embedding.
    pub truncated: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Rows linked into the HNSW graph.
    pub hnsw_rows_linked: u32,
    /// The run was cancelled; what was done before is committed.
    pub cancelled: bool,
}

impl IndexReport {
    /// True when every file was indexed and the run was not cancelled.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.skipped.is_empty() && !self.cancelled
    }
}

/// A document loaded and cut, waiting for its embeddings.
struct Pending {
    path: PathBuf,
    size: u64,
    modified_ns: u64,
    document: LoadedDocument,
    chunks: Vec<ChunkSpan>,
    replaces: Option<u32>,
}

/// Indexes `roots` (files or folders) into the index folder `dir`, creating it if needed.
///
/// New and changed files are embedded; files gone from the roots are dropped; files that fail
/// to load are reported in [`IndexReport::skipped`] and an earlier version of them is kept.
/// Work is committed every [`IndexOptions::commit_every`]; setting `cancel` stops the run
/// after the current batch, keeping what was committed.
#[allow(clippy::too_many_lines)] // one pass over the files, read top to bottom
pub fn index_paths(
    dir: &Path,
    roots: &[PathBuf],
    embedder: &Embedder,
    options: &IndexOptions,
    progress: &mut dyn FnMut(&IndexProgress),
    cancel: &AtomicBool,
) -> Result<IndexReport> {
    let started = Instant::now();
    let mut writer = Writer::open(
        dir,
        Manifest::new(embedder.info().clone(), options.chunker, options.vectors),
    )?;
    let chunker = Chunker::new(&writer.manifest().chunker, embedder.tokenizer())?;
    let mut report = IndexReport::default();
    let discovered = discover(roots, dir);
    report.skipped.extend(
        discovered
            .skipped
            .into_iter()
            .map(|(path, reason)| Skipped { path, reason }),
    );

    let roots: Vec<PathBuf> = roots.iter().filter_map(|r| r.canonicalize().ok()).collect();
    let present: std::collections::HashSet<&Path> =
        discovered.files.iter().map(PathBuf::as_path).collect();
    let gone: Vec<u32> = writer
        .documents()
        .iter()
        .filter(|d| {
            roots.iter().any(|r| d.path.starts_with(r)) && !present.contains(d.path.as_path())
        })
        .map(|d| d.slot)
        .collect();
    report.removed = gone.len();
    for slot in gone {
        writer.remove(slot);
    }

    let by_path: HashMap<&Path, &DocumentEntry> = writer
        .documents()
        .iter()
        .map(|d| (d.path.as_path(), d))
        .collect();
    let mut todo = Vec::new();
    for path in discovered.files {
        let Ok(metadata) = fs_err::metadata(&path) else {
            report.skipped.push(Skipped {
                path,
                reason: "cannot read its metadata".into(),
            });
            continue;
        };
        let known = by_path.get(path.as_path()).copied();
        if known.is_some_and(|entry| entry.is_current(&metadata)) {
            report.unchanged += 1;
        } else {
            let (size, modified_ns) = file_stamp(&metadata);
            todo.push((path, size, modified_ns, known.map(|entry| entry.slot)));
        }
    }

    let mut state = IndexProgress {
        files_total: todo.len() + report.unchanged,
        files_done: report.unchanged,
        bytes_total: todo.iter().map(|t| t.1).sum(),
        ..IndexProgress::default()
    };
    let mut pending: Vec<Pending> = Vec::new();
    let mut last_commit = Instant::now();
    for (path, size, modified_ns, replaces) in todo {
        if cancel.load(Ordering::Relaxed) {
            report.cancelled = true;
            break;
        }
        state.files_done += 1;
        match load_document(&path, &options.load) {
            Err(error) => {
                state.bytes_done += size;
                report.skipped.push(Skipped {
                    path,
                    reason: ErrorChain(&error).to_string(),
                });
            }
            Ok(document) => {
                let unchanged = replaces.filter(|&slot| {
                    writer
                        .documents()
                        .iter()
                        .any(|d| d.slot == slot && d.hash == document.hash)
                });
                if let Some(slot) = unchanged {
                    // Touched but identical: remember the new timestamp, embed nothing.
                    writer.touch(slot, size, modified_ns);
                    state.bytes_done += size;
                    report.unchanged += 1;
                } else {
                    report
                        .warnings
                        .extend(document.warnings.iter().map(|w| Skipped {
                            path: path.clone(),
                            reason: w.clone(),
                        }));
                    let chunks = chunker.chunk(&document)?;
                    pending.push(Pending {
                        path,
                        size,
                        modified_ns,
                        document,
                        chunks,
                        replaces,
                    });
                }
            }
        }
        let pending_chunks: usize = pending.iter().map(|p| p.chunks.len()).sum();
        if pending_chunks >= options.embed_batch_chunks {
            write(
                &mut writer,
                embedder,
                std::mem::take(&mut pending),
                &mut report,
                &mut state,
                started,
                progress,
            )?;
        }
        state.elapsed = started.elapsed();
        progress(&state);
        if last_commit.elapsed() >= options.commit_every {
            writer.commit()?;
            last_commit = Instant::now();
        }
    }
    if !report.cancelled {
        write(
            &mut writer,
            embedder,
            pending,
            &mut report,
            &mut state,
            started,
            progress,
        )?;
    }
    writer.finish()?;
    report.hnsw_rows_linked =
        update_hnsw(dir, options.hnsw, started, &mut state, progress, cancel)?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Brings the HNSW graph in line with the committed rows as `setting` asks, reporting its
/// progress in `state`. Returns the rows linked.
fn update_hnsw(
    dir: &Path,
    setting: HnswSetting,
    started: Instant,
    state: &mut IndexProgress,
    progress: &mut dyn FnMut(&IndexProgress),
    cancel: &AtomicBool,
) -> Result<u32> {
    let saved = hnsw::read_info(dir)?;
    let params = match (setting, saved) {
        (HnswSetting::Remove, _) => return hnsw::remove(dir).map(|()| 0),
        (HnswSetting::Keep, None) => return Ok(0),
        (HnswSetting::Keep, Some(info)) => info.params,
        (HnswSetting::Build(params), _) => params,
    };
    let index = Index::open(dir)?;
    let catalog = index.catalog();
    let wanted = HnswInfo {
        generation: catalog.generation,
        rows: catalog.rows,
        params,
    };
    if let Some(saved) = saved
        && (saved.generation, saved.rows) == (wanted.generation, wanted.rows)
        && saved.params.same_links(&params)
    {
        // The links are current. The search breadth, if it changed, lives only in the stamp.
        if saved != wanted {
            hnsw::write_info(dir, &wanted)?;
        }
        return Ok(0);
    }
    let dimension = index.manifest().model.dimension;
    let mut graph = match HnswGraph::open(dir, catalog, dimension, true)? {
        Some(graph) if graph.params().same_links(&params) => graph,
        _ => HnswGraph::new(dimension, params)?,
    };
    graph.set_expansion_search(params.expansion_search);
    let before = graph.rows();
    graph.extend(
        index.matrix(),
        &mut |done, total| {
            state.graph_rows_done = done;
            state.graph_rows_total = total;
            state.elapsed = started.elapsed();
            progress(state);
        },
        cancel,
    )?;
    graph.save(dir, catalog.generation)?;
    Ok(graph.rows() - before)
}
/// Embeds the pending documents together and appends them to the index (uncommitted).
fn write(
    writer: &mut Writer,
    embedder: &Embedder,
    pending: Vec<Pending>,
    report: &mut IndexReport,
    state: &mut IndexProgress,
    started: Instant,
    progress: &mut dyn FnMut(&IndexProgress),
) -> Result<()> {
    let prepend = writer.manifest().chunker.prepend_headings;
    let texts: Vec<std::borrow::Cow<'_, str>> = pending
        .iter()
        .flat_map(|p| {
            p.chunks
                .iter()
                .map(|c| c.embedding_text(&p.document.text, prepend))
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    let (chunks_before, tokens_before) = (state.chunks, state.tokens);
    let embeddings = embedder
        .embed_passages(&refs, &mut |p| {
            state.chunks = chunks_before + p.done;
            state.tokens = tokens_before + p.tokens;
            state.elapsed = started.elapsed();
            progress(state);
        })
        .map_err(IndexError::Embed)?;
    report.chunks += embeddings.len();
    report.tokens += embeddings.token_counts.iter().sum::<usize>();
    report.truncated += embeddings.truncated;

    let dimension = embeddings.dimension;
    let mut row = 0;
    for p in pending {
        state.bytes_done += p.size;
        if p.chunks.is_empty() {
            report.skipped.push(Skipped {
                path: p.path,
                reason: "no text to index".into(),
            });
            continue;
        }
        let rows = row..row + p.chunks.len();
        row = rows.end;
        if let Some(old) = p.replaces {
            writer.remove(old);
            report.updated += 1;
        } else {
            report.added += 1;
        }
        let text = &p.document.text;
        let token_counts = p
            .chunks
            .iter()
            .map(|chunk| embedder.count_tokens(&text[chunk.bytes.clone()]))
            .collect::<Result<Vec<_>, _>>()
            .map_err(IndexError::Embed)?;
        writer.append(&NewDocument {
            path: &p.path,
            hash: &p.document.hash,
            size: p.size,
            modified_ns: p.modified_ns,
            text,
            chunks: &p.chunks,
            vectors: &embeddings.data[rows.start * dimension..rows.end * dimension],
            token_counts: &token_counts,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_largest_useful_unit() {
        assert_eq!(humanize(Duration::from_secs(42)), "42s");
        assert_eq!(humanize(Duration::from_secs(125)), "2m05s");
        assert_eq!(humanize(Duration::from_mins(3 * 60 + 7)), "3h07m");
    }

    #[test]
    fn progress_moves_from_embedding_to_linking() {
        let mut progress = IndexProgress {
            files_done: 1,
            files_total: 4,
            bytes_done: 250,
            bytes_total: 1000,
            chunks: 12,
            tokens: 600,
            elapsed: Duration::from_secs(2),
            ..IndexProgress::default()
        };
        assert!((progress.fraction() - 0.25).abs() < 1e-9);
        assert_eq!(
            progress.status(),
            "1/4 files · 12 chunks · 300 tokens/s · 6s left"
        );
        progress.graph_rows_done = 30;
        progress.graph_rows_total = 40;
        assert!((progress.fraction() - 0.75).abs() < 1e-9);
        assert_eq!(
            progress.status(),
            "linking 30/40 chunks into the HNSW graph"
        );
    }
}
