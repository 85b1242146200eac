//! Indexing runs: bring an index up to date with a set of files, incrementally and crash-safely.
//! Files are loaded, cut and embedded here; the store's writer keeps the rows and commits them.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use scar_core::ErrorChain;
use scar_embed::Embedder;

use crate::chunk::{ChunkSpan, Chunker, ChunkerConfig};
use crate::hnsw::{self, HnswGraph, HnswInfo, HnswParams};
use crate::known::{Journal, Key, KnownVectors, key};
use crate::load::{LoadOptions, LoadedDocument, load_document};
use crate::skip_list::{self, Skipped};
use crate::store::{
    Catalog, DataFiles, DocumentEntry, Manifest, NewDocument, VectorEncoding, Writer, file_stamp,
};
use crate::walk::{discover, resolve_root};
use crate::watchdog::{Interrupted, Overrun, Quarantine, Stamped, Watchdog};
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
    /// Chunks waiting for their vectors, from one or several files, before the model is called;
    /// also the most one call embeds (a slow model gets fewer, so that a cancel or a commit
    /// never waits long).
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
    /// Chunks whose vectors were found instead of embedded: left by an interrupted run, or
    /// sound in the index being repaired.
    pub reused: usize,
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

/// How long one call to the model should take: cancelling waits for the call in progress, and
/// commits come between calls.
const SLICE_TIME: Duration = Duration::from_secs(1);

/// Chunks in the first call to the model, before its speed is known.
const FIRST_SLICE_CHUNKS: usize = 8;

/// One document of a file: the file's own text, or a file it carries (an attachment).
struct Part {
    /// The attachment's name; `None` for the file's own text.
    attachment: Option<String>,
    document: LoadedDocument,
    chunks: Vec<ChunkSpan>,
}

/// A file's documents loaded and cut, waiting for their vectors, which are stored together so
/// that no commit holds part of a file. Chunks are numbered across the parts, in order.
struct Pending {
    file: FileToLoad,
    parts: Vec<Part>,
    /// The key of what the model embeds for each chunk.
    keys: Vec<Key>,
    /// Each chunk's vector, once known, laid end to end.
    vectors: Vec<f32>,
    /// Which chunks' vectors are known.
    known: Vec<bool>,
    /// Each chunk's length in tokens, where the model's count of what it embedded gives it.
    token_counts: Vec<Option<usize>>,
    /// Chunks this run embedded whose vectors are not in the resume journal yet.
    unjournaled: Vec<usize>,
}

impl Pending {
    /// Chunk `c` (numbered across the parts) and the part that holds it.
    fn chunk(&self, mut c: usize) -> (&Part, &ChunkSpan) {
        for part in &self.parts {
            if c < part.chunks.len() {
                return (part, &part.chunks[c]);
            }
            c -= part.chunks.len();
        }
        unreachable!("chunk numbers come from the parts")
    }

    fn missing(&self) -> usize {
        self.known.iter().filter(|&&known| !known).count()
    }

    /// Share of its chunks whose vectors are known.
    fn fraction_known(&self) -> f64 {
        if self.known.is_empty() {
            return 1.0;
        }
        (self.known.len() - self.missing()) as f64 / self.known.len() as f64
    }
}

/// The embedding model to index with: the one `named` for this run (so that an existing index
/// built with another is an error, not a silent switch), else the one the `existing` index was
/// built with, else `default` for a new index.
#[must_use]
pub fn indexing_model<'a>(
    named: Option<&'a str>,
    existing: Option<&'a Manifest>,
    default: &'a str,
) -> &'a str {
    named
        .or_else(|| existing.map(|manifest| manifest.model.id.as_str()))
        .unwrap_or(default)
}

/// Indexes `roots` (files or folders) into the index folder `dir`, creating it if needed.
///
/// New and changed files are embedded; files gone from the roots are dropped; files that fail
/// to load are reported in [`IndexReport::skipped`] (and listed beside the index: see
/// [`skipped_files`](crate::skipped_files)) and an earlier version of them is kept.
/// Work is committed every [`IndexOptions::commit_every`]; setting `cancel` stops the run
/// within about a second, keeping what was committed. What a stopped or killed run embedded
/// for documents it had not committed is kept in the index's resume journal and not embedded
/// again by the next run.
pub fn index_paths(
    dir: &Path,
    roots: &[PathBuf],
    embedder: &Embedder,
    options: &IndexOptions,
    progress: &mut dyn FnMut(&IndexProgress),
    cancel: &AtomicBool,
) -> Result<IndexReport> {
    let known = KnownVectors::new(embedder.info().dimension);
    index_reusing(dir, roots, embedder, options, known, progress, cancel)
}

/// [`index_paths`], taking the vectors of chunks found in `known` instead of embedding them.
pub(crate) fn index_reusing(
    dir: &Path,
    roots: &[PathBuf],
    embedder: &Embedder,
    options: &IndexOptions,
    mut known: KnownVectors,
    progress: &mut dyn FnMut(&IndexProgress),
    cancel: &AtomicBool,
) -> Result<IndexReport> {
    let started = Instant::now();
    let writer = Writer::open(
        dir,
        Manifest::new(embedder.info().clone(), options.chunker, options.vectors),
    )?;
    known.add_journal(dir)?;
    let chunker = Arc::new(Chunker::new(
        &writer.manifest().chunker,
        embedder.tokenizer(),
    )?);
    let mut run = Run {
        dir,
        quarantine: Quarantine::open(dir)?,
        writer,
        embedder,
        options,
        known,
        journal: Journal::new(dir),
        queue: VecDeque::new(),
        bytes_finished: 0,
        slice_chunks: FIRST_SLICE_CHUNKS,
        report: IndexReport::default(),
        state: IndexProgress::default(),
        started,
        last_commit: Instant::now(),
        progress,
        cancel,
    };
    let todo = run.plan(dir, roots)?;
    for file in todo {
        if run.cancelled() {
            break;
        }
        if run.quarantine.is_suspect(&file.stamped()) {
            // A run died reading it: keep everything before it, should it end this one too.
            run.commit_now()?;
        }
        run.load(file, &chunker)?;
        let waiting: usize = run.queue.iter().map(Pending::missing).sum();
        if waiting >= options.embed_batch_chunks {
            run.embed_queue()?;
        } else {
            run.append_ready()?;
        }
        run.show_progress();
        run.commit_if_due()?;
    }
    if !run.cancelled() {
        run.embed_queue()?;
    }
    let mut finished = run.finish()?;
    let report = &finished.report;
    skip_list::record(dir, roots, &report.skipped, report.cancelled)?;
    finished.report.hnsw_rows_linked =
        update_hnsw(dir, options.hnsw, started, &mut finished, cancel)?;
    finished.report.elapsed = started.elapsed();
    Ok(finished.report)
}

/// A new or changed file to load.
struct FileToLoad {
    path: PathBuf,
    /// Its size and modification time (ns since the epoch) when it was found.
    size: u64,
    modified_ns: u64,
    /// The slots of the documents it replaces (its own and its attachments'), if it was
    /// indexed before.
    replaces: Vec<u32>,
    /// Where it was found through a link, when it lies outside the folder indexed.
    reached_from: Option<PathBuf>,
}

impl FileToLoad {
    fn stamped(&self) -> Stamped {
        Stamped {
            path: self.path.clone(),
            size: self.size,
            modified_ns: self.modified_ns,
        }
    }
}

/// One indexing run's state: the writer, the documents waiting for vectors, the report.
struct Run<'a> {
    dir: &'a Path,
    /// Files that stopped an earlier run, skipped until they change.
    quarantine: Quarantine,
    writer: Writer,
    embedder: &'a Embedder,
    options: &'a IndexOptions,
    /// Vectors that need not be embedded again.
    known: KnownVectors,
    journal: Journal,
    /// Documents loaded and cut, in order, waiting for their vectors.
    queue: VecDeque<Pending>,
    /// Bytes of the files done with (stored, unchanged or skipped).
    bytes_finished: u64,
    /// Chunks the next call to the model embeds: about [`SLICE_TIME`]'s worth.
    slice_chunks: usize,
    report: IndexReport,
    state: IndexProgress,
    started: Instant,
    last_commit: Instant,
    progress: &'a mut dyn FnMut(&IndexProgress),
    cancel: &'a AtomicBool,
}

impl<'a> Run<'a> {
    /// True once cancelled; the report says so.
    fn cancelled(&mut self) -> bool {
        if self.cancel.load(Ordering::Relaxed) {
            self.report.cancelled = true;
        }
        self.report.cancelled
    }

    /// Finds the files under `roots`, drops the documents whose files are gone, and lists
    /// the files to load: new ones, and known ones whose size or time changed, but for those
    /// that stopped an earlier run as they are.
    fn plan(&mut self, dir: &Path, roots: &[PathBuf]) -> Result<Vec<FileToLoad>> {
        let discovered = discover(roots, dir);
        self.report.skipped.extend(
            discovered
                .skipped
                .into_iter()
                .map(|(path, reason)| Skipped { path, reason }),
        );

        // A root that is gone still names its documents, which go with it.
        let roots: Vec<PathBuf> = roots.iter().map(|root| resolve_root(root)).collect();
        let present: std::collections::HashSet<&Path> =
            discovered.files.iter().map(PathBuf::as_path).collect();
        let gone: Vec<&DocumentEntry> = self
            .writer
            .documents()
            .iter()
            .filter(|d| {
                // A file a link led to from a root belongs to that root.
                let owned = |root: &PathBuf| {
                    d.path.starts_with(root)
                        || d.reached_from
                            .as_ref()
                            .is_some_and(|from| from.starts_with(root))
                };
                roots.iter().any(owned) && !present.contains(d.path.as_path())
            })
            .collect();
        // Files, not documents: a mail's attachments go with it.
        self.report.removed = gone.iter().filter(|d| d.attachment.is_none()).count();
        let gone: Vec<u32> = gone.iter().map(|d| d.slot).collect();
        for slot in gone {
            self.writer.remove(slot);
        }

        // Each file's documents: its own first, then its attachments', which share its stamp.
        let mut by_path: HashMap<&Path, Vec<&DocumentEntry>> = HashMap::new();
        for document in self.writer.documents() {
            by_path
                .entry(document.path.as_path())
                .or_default()
                .push(document);
        }
        let mut todo = Vec::new();
        for path in discovered.files {
            let Ok(metadata) = fs_err::metadata(&path) else {
                self.report.skipped.push(Skipped {
                    path,
                    reason: "cannot read its metadata".into(),
                });
                continue;
            };
            let known = by_path.get(path.as_path()).map_or(&[][..], Vec::as_slice);
            if known
                .first()
                .is_some_and(|entry| entry.is_current(&metadata))
            {
                self.report.unchanged += 1;
            } else {
                let (size, modified_ns) = file_stamp(&metadata);
                let replaces = known.iter().map(|entry| entry.slot).collect();
                todo.push(FileToLoad {
                    reached_from: discovered.reached_from.get(&path).cloned(),
                    path,
                    size,
                    modified_ns,
                    replaces,
                });
            }
        }

        // What the quarantine keeps under these roots: files it skips, and suspects.
        let mut still_held = Vec::new();
        let limits = &self.options.load;
        todo.retain(|file| {
            let stamped = file.stamped();
            if let Some(reason) = self.quarantine.reason_to_skip(&stamped, limits) {
                still_held.push(file.path.clone());
                self.report.skipped.push(Skipped {
                    path: file.path.clone(),
                    reason,
                });
                return false;
            }
            if self.quarantine.is_suspect(&stamped) {
                still_held.push(file.path.clone());
            }
            true
        });
        let still_held: Vec<&Path> = still_held.iter().map(PathBuf::as_path).collect();
        self.quarantine.retain_under(&roots, &still_held)?;
        // Files a run died reading come last, after everything else is committed.
        todo.sort_by_cached_key(|file| self.quarantine.is_suspect(&file.stamped()));

        self.state = IndexProgress {
            files_total: todo.len() + self.report.unchanged,
            files_done: self.report.unchanged,
            bytes_total: todo.iter().map(|f| f.size).sum(),
            ..IndexProgress::default()
        };
        Ok(todo)
    }

    /// Notes that `file` is not indexed, for `reason`.
    fn skip(&mut self, file: FileToLoad, reason: String) {
        self.bytes_finished += file.size;
        self.report.skipped.push(Skipped {
            path: file.path,
            reason,
        });
    }

    /// Deals with a file whose reading the watchdog stopped waiting for.
    fn interrupted(
        &mut self,
        file: FileToLoad,
        watchdog: Watchdog<'_>,
        how: Interrupted,
    ) -> Result<()> {
        match how {
            Interrupted::Cancelled => self.report.cancelled = true,
            Interrupted::Panicked(message) => {
                self.skip(file, format!("its reader failed: {message}"));
            }
            Interrupted::Overran(overrun) => {
                self.quarantine.add(file.stamped(), overrun)?;
                if let Overrun::Memory(_) = overrun {
                    watchdog.finish()?;
                    return Err(IndexError::RunawayFile {
                        path: file.path,
                        reason: overrun.reason(),
                    });
                }
                self.skip(file, overrun.reason());
            }
        }
        watchdog.finish()
    }

    /// Loads and cuts a file under the watchdog; queues it for its vectors, or notes why it is
    /// not indexed, or that it did not change after all.
    fn load(&mut self, file: FileToLoad, chunker: &Arc<Chunker>) -> Result<()> {
        self.state.files_done += 1;
        let options: &'a IndexOptions = self.options;
        let watchdog = Watchdog::start(self.dir, &file.stamped(), &options.load, self.cancel)?;
        let read = {
            let (path, load) = (file.path.clone(), options.load.clone());
            watchdog.watch(move || load_document(&path, &load))?
        };
        let mut document = match read {
            Ok(Ok(document)) => document,
            Ok(Err(error)) => {
                self.quarantine.clear(&file.path)?;
                self.skip(file, ErrorChain(&error).to_string());
                return watchdog.finish();
            }
            Err(how) => return self.interrupted(file, watchdog, how),
        };
        let unchanged = file.replaces.iter().any(|&slot| {
            self.writer
                .documents()
                .iter()
                .any(|d| d.slot == slot && d.hash == document.hash)
        });
        if unchanged {
            // Touched but identical: remember the new timestamp, embed nothing.
            for &slot in &file.replaces {
                self.writer.touch(slot, file.size, file.modified_ns);
            }
            self.bytes_finished += file.size;
            self.report.unchanged += 1;
            self.quarantine.clear(&file.path)?;
            return watchdog.finish();
        }
        let attachments = std::mem::take(&mut document.attachments);
        let mut parts = vec![(None, document)];
        parts.extend(
            attachments
                .into_iter()
                .map(|attachment| (Some(attachment.name), attachment.document)),
        );
        let chunker = Arc::clone(chunker);
        let parts_cut = watchdog.watch(move || {
            parts
                .into_iter()
                .map(|(attachment, document)| {
                    let chunks = chunker.chunk(&document);
                    (attachment, document, chunks)
                })
                .collect::<Vec<_>>()
        })?;
        let parts_cut = match parts_cut {
            Ok(parts_cut) => parts_cut,
            Err(how) => return self.interrupted(file, watchdog, how),
        };
        self.quarantine.clear(&file.path)?;
        watchdog.finish()?;
        let mut cut = Vec::with_capacity(parts_cut.len());
        for (attachment, document, chunks) in parts_cut {
            self.report
                .warnings
                .extend(document.warnings.iter().map(|w| Skipped {
                    path: file.path.clone(),
                    reason: match &attachment {
                        Some(name) => format!("attachment {name}: {w}"),
                        None => w.clone(),
                    },
                }));
            let chunks = chunks?;
            cut.push(Part {
                attachment,
                document,
                chunks,
            });
        }
        self.enqueue(file, cut);
        Ok(())
    }

    /// Queues a file's documents for their vectors, taking those already known.
    fn enqueue(&mut self, file: FileToLoad, parts: Vec<Part>) {
        let prepend = self.writer.manifest().chunker.prepend_headings;
        let dimension = self.known.dimension();
        let keys: Vec<Key> = parts
            .iter()
            .flat_map(|part| {
                part.chunks
                    .iter()
                    .map(|c| key(&c.embedding_text(&part.document.text, prepend)))
            })
            .collect();
        let mut vectors = vec![0.0; keys.len() * dimension];
        let mut known = vec![false; keys.len()];
        for (i, key) in keys.iter().enumerate() {
            if let Some(vector) = self.known.get(key) {
                vectors[i * dimension..(i + 1) * dimension].copy_from_slice(&vector);
                known[i] = true;
            }
        }
        self.report.reused += known.iter().filter(|&&k| k).count();
        self.queue.push_back(Pending {
            file,
            parts,
            token_counts: vec![None; keys.len()],
            keys,
            vectors,
            known,
            unjournaled: Vec::new(),
        });
    }

    /// Embeds the queued documents' missing vectors, storing each document once it has them
    /// all; commits on time and stops early when cancelled.
    fn embed_queue(&mut self) -> Result<()> {
        loop {
            self.append_ready()?;
            if self.queue.is_empty() || self.cancelled() {
                return Ok(());
            }
            self.commit_if_due()?;
            self.embed_slice()?;
        }
    }

    /// One call to the model: the next missing vectors, in document order.
    fn embed_slice(&mut self) -> Result<()> {
        let prepend = self.writer.manifest().chunker.prepend_headings;
        let picks: Vec<(usize, usize)> = self
            .queue
            .iter()
            .enumerate()
            .flat_map(|(d, p)| {
                p.known
                    .iter()
                    .enumerate()
                    .filter(|(_, known)| !**known)
                    .map(move |(c, _)| (d, c))
            })
            .take(self.slice_chunks)
            .collect();
        let texts: Vec<std::borrow::Cow<'_, str>> = picks
            .iter()
            .map(|&(d, c)| {
                let (part, chunk) = self.queue[d].chunk(c);
                chunk.embedding_text(&part.document.text, prepend)
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        // Borrowed: the model embeds the chunk's own text, whose length its count gives.
        let own_text: Vec<bool> = texts
            .iter()
            .map(|t| matches!(t, Cow::Borrowed(_)))
            .collect();
        let called = Instant::now();
        let (chunks_before, tokens_before) = (self.state.chunks, self.state.tokens);
        let (state, progress, started) = (&mut self.state, &mut self.progress, self.started);
        let embeddings = self
            .embedder
            .embed_passages(&refs, &mut |p| {
                state.chunks = chunks_before + p.done;
                state.tokens = tokens_before + p.tokens;
                state.elapsed = started.elapsed();
                progress(state);
            })
            .map_err(IndexError::Embed)?;
        drop(texts);
        let rate = picks.len() as f64 / called.elapsed().as_secs_f64().max(1e-6);
        self.slice_chunks =
            ((rate * SLICE_TIME.as_secs_f64()) as usize).clamp(1, self.options.embed_batch_chunks);
        self.report.chunks += embeddings.len();
        self.report.tokens += embeddings.token_counts.iter().sum::<usize>();
        self.report.truncated += embeddings.truncated;
        let dimension = embeddings.dimension;
        let embedder = self.embedder;
        for (row, &(d, c)) in picks.iter().enumerate() {
            let pending = &mut self.queue[d];
            pending.vectors[c * dimension..(c + 1) * dimension]
                .copy_from_slice(embeddings.row(row));
            pending.known[c] = true;
            pending.unjournaled.push(c);
            if own_text[row] {
                pending.token_counts[c] =
                    embedder.count_tokens_from_embedded(embeddings.token_counts[row]);
            }
        }
        self.show_progress();
        Ok(())
    }

    /// Stores the documents at the front of the queue whose vectors are all known (uncommitted).
    fn append_ready(&mut self) -> Result<()> {
        while self.queue.front().is_some_and(|p| p.missing() == 0) {
            let Some(p) = self.queue.pop_front() else {
                break;
            };
            self.bytes_finished += p.file.size;
            if p.keys.is_empty() {
                self.report.skipped.push(Skipped {
                    path: p.file.path,
                    reason: "no text to index".into(),
                });
                continue;
            }
            for &old in &p.file.replaces {
                self.writer.remove(old);
            }
            if p.file.replaces.is_empty() {
                self.report.added += 1;
            } else {
                self.report.updated += 1;
            }
            let dimension = self.known.dimension();
            let mut first_chunk = 0;
            // Every part carries the file's hash: that is what tells a changed file.
            let hash = &p.parts[0].document.hash;
            for part in p.parts.iter().filter(|part| !part.chunks.is_empty()) {
                let text = &part.document.text;
                let chunks = first_chunk..first_chunk + part.chunks.len();
                first_chunk = chunks.end;
                // Chunks whose vectors were found, or whose embedded text was not their own
                // or was truncated, are counted here.
                let token_counts = part
                    .chunks
                    .iter()
                    .zip(&p.token_counts[chunks.clone()])
                    .map(|(chunk, counted)| match counted {
                        Some(count) => Ok(*count),
                        None => self.embedder.count_tokens(&text[chunk.bytes.clone()]),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(IndexError::Embed)?;
                self.writer.append(&NewDocument {
                    path: &p.file.path,
                    attachment: part.attachment.as_deref(),
                    hash,
                    size: p.file.size,
                    modified_ns: p.file.modified_ns,
                    text,
                    pages: &part.document.pages,
                    chunks: &part.chunks,
                    vectors: &p.vectors[chunks.start * dimension..chunks.end * dimension],
                    token_counts: &token_counts,
                    reached_from: p.file.reached_from.as_deref(),
                })?;
            }
        }
        Ok(())
    }

    /// Reports progress: the bytes of files done, and of those waiting the share embedded.
    fn show_progress(&mut self) {
        let waiting: f64 = self
            .queue
            .iter()
            .map(|p| p.file.size as f64 * p.fraction_known())
            .sum();
        self.state.bytes_done = self.bytes_finished + waiting as u64;
        self.state.elapsed = self.started.elapsed();
        (self.progress)(&self.state);
    }

    /// Stores and commits everything loaded so far.
    fn commit_now(&mut self) -> Result<()> {
        self.embed_queue()?;
        self.keep_unstored()?;
        self.writer.commit()?;
        self.last_commit = Instant::now();
        Ok(())
    }

    fn commit_if_due(&mut self) -> Result<()> {
        if self.last_commit.elapsed() >= self.options.commit_every {
            self.keep_unstored()?;
            self.writer.commit()?;
            self.last_commit = Instant::now();
        }
        Ok(())
    }

    /// Writes the vectors embedded for documents not stored yet to the resume journal, so that
    /// a kill or a cancel does not lose them.
    fn keep_unstored(&mut self) -> Result<()> {
        let dimension = self.known.dimension();
        let entries: Vec<(&Key, &[f32])> = self
            .queue
            .iter()
            .flat_map(|p| {
                p.unjournaled
                    .iter()
                    .map(move |&c| (&p.keys[c], &p.vectors[c * dimension..(c + 1) * dimension]))
            })
            .collect();
        self.journal.append(entries)?;
        for pending in &mut self.queue {
            pending.unjournaled.clear();
        }
        Ok(())
    }

    /// Commits what was stored; a run that completed drops the resume journal, a cancelled one
    /// adds what it embedded for the documents it did not store.
    fn finish(mut self) -> Result<Finished<'a>> {
        if self.report.cancelled {
            self.keep_unstored()?;
        }
        let (manifest, catalog) = self.writer.finish()?;
        if !self.report.cancelled {
            self.journal.remove()?;
        }
        Ok(Finished {
            report: self.report,
            state: self.state,
            progress: self.progress,
            manifest,
            catalog,
        })
    }
}

/// What [`Run::finish`] gives back for the HNSW graph's turn: the report, the progress and its
/// callback, and what the writer committed.
struct Finished<'a> {
    report: IndexReport,
    state: IndexProgress,
    progress: &'a mut dyn FnMut(&IndexProgress),
    manifest: Manifest,
    catalog: Catalog,
}

/// Brings the HNSW graph in line with the rows the run committed as `setting` asks, reporting
/// its progress. Returns the rows linked.
fn update_hnsw(
    dir: &Path,
    setting: HnswSetting,
    started: Instant,
    finished: &mut Finished<'_>,
    cancel: &AtomicBool,
) -> Result<u32> {
    let saved = hnsw::read_info(dir)?;
    let params = match (setting, saved) {
        (HnswSetting::Remove, _) => return hnsw::remove(dir).map(|()| 0),
        (HnswSetting::Keep, None) => return Ok(0),
        (HnswSetting::Keep, Some(info)) => info.params,
        (HnswSetting::Build(params), _) => params,
    };
    let catalog = &finished.catalog;
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
    let dimension = finished.manifest.model.dimension;
    let mut graph = match HnswGraph::open(dir, catalog, dimension, true)? {
        Some(graph) if graph.params().same_links(&params) => graph,
        _ => HnswGraph::new(dimension, params)?,
    };
    graph.set_expansion_search(params.expansion_search);
    let before = graph.rows();
    let files = DataFiles::open_committed(dir, &finished.manifest, catalog)?;
    let (state, progress) = (&mut finished.state, &mut *finished.progress);
    graph.extend(
        files.matrix(),
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
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_model_wins_then_the_index_keeps_its_own_then_the_default() {
        let built_with = Manifest::new(
            scar_embed::ModelInfo {
                id: "built-with".into(),
                dimension: 2,
                pooling: scar_embed::Pooling::Mean,
                max_tokens: 8,
                query_prefix: String::new(),
                passage_prefix: String::new(),
            },
            ChunkerConfig::default(),
            VectorEncoding::F32,
        );
        let existing = Some(&built_with);
        assert_eq!(indexing_model(Some("named"), existing, "default"), "named");
        assert_eq!(indexing_model(None, existing, "default"), "built-with");
        assert_eq!(indexing_model(Some("named"), None, "default"), "named");
        assert_eq!(indexing_model(None, None, "default"), "default");
    }

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
