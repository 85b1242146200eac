//! `scar index PATH...`

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use scar_embed::{Embedder, ModelLocator};
use scar_index::{
    ChunkUnit, ChunkerConfig, FolderWatch, HnswParams, HnswSetting, IndexOptions, IndexProgress,
    IndexReport, LoadOptions, Salvage, VectorEncoding, finish_interrupted_swap, index_paths,
    indexing_model, rebuild_dir, replace_with_rebuild,
};

use crate::settings::Settings;
use crate::terminal::inert;
use crate::{display_path, index_exit};

// Each bool is an independent command-line flag.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, clap::Args)]
pub struct IndexArgs {
    /// Files and folders to index
    #[arg(required_unless_present_any = ["rebuild", "repair"])]
    paths: Vec<PathBuf>,
    /// Build the index again from the files it holds (and any PATHS), in this version's format,
    /// with its model and chunking unless flags say otherwise; the old index stays until the new
    /// one is complete, and every vector that needs no change is reused
    #[arg(long, conflicts_with = "repair")]
    rebuild: bool,
    /// Repair a damaged index: keep what is sound, re-embed only the chunks whose vectors were
    /// lost. It is built again from the files its catalog lists (and any PATHS; name the folders
    /// it indexed if its catalog is lost); the old index stays until the new one is complete
    #[arg(long)]
    repair: bool,
    /// Chunk capacity in model tokens (new indexes) [default: 160]
    #[arg(long, conflicts_with = "chunk_chars", allow_negative_numbers = true)]
    chunk_tokens: Option<usize>,
    /// Chunk capacity in characters instead of tokens (new indexes)
    #[arg(long, allow_negative_numbers = true)]
    chunk_chars: Option<usize>,
    /// Overlap between consecutive chunks, in the same unit (new indexes) [default: 0]
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    overlap: usize,
    /// Embed each chunk with its heading path in front (new indexes)
    #[arg(long)]
    prepend_headings: bool,
    /// Store vectors as f16: half the disk, same search quality to ~3 decimals (new indexes)
    #[arg(long)]
    f16: bool,
    #[command(flatten)]
    hnsw: HnswFlags,
    /// Skip files larger than this many MiB
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    max_file_mib: u64,
    /// Skip a file whose reading takes longer than this many seconds, in later runs too until
    /// it changes
    #[arg(long, default_value_t = 600, allow_negative_numbers = true)]
    max_file_seconds: u64,
    /// Stop the run when reading one file takes more than this many MiB of memory; later runs
    /// skip that file until it changes
    #[arg(long, default_value_t = 4096, allow_negative_numbers = true)]
    max_file_memory_mib: u64,
    /// Print the report as JSON instead of text (with --watch, one report per line)
    #[arg(long)]
    json: bool,
    /// After indexing, keep watching PATHS and index again whenever files are added, changed,
    /// renamed or removed; a burst of changes is one run (Ctrl-C stops)
    #[arg(long, conflicts_with_all = ["rebuild", "repair"])]
    watch: bool,
    /// With a store: when it is new, keep its chunks on this PostgreSQL database, one of two
    /// or more (repeat the flag), hash-partitioned by document through foreign tables; the
    /// store's own server keeps its files and documents and must reach each shard at its URL
    #[arg(long = "shard", value_name = "URL")]
    shards: Vec<String>,
}

/// How a run's report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReportStyle {
    Text,
    Json,
    /// One JSON report per line, for a watch's runs.
    JsonLines,
}

/// Whether this run builds, tunes or drops the HNSW graph.
#[derive(Debug, clap::Args)]
struct HnswFlags {
    /// Build an HNSW graph for approximate dense search (fast at a million chunks; later runs
    /// keep it current)
    #[arg(long, conflicts_with = "no_hnsw")]
    hnsw: bool,
    /// Candidates the HNSW search keeps [default: 256]: more finds more of exact search's hits,
    /// and takes longer. Builds the graph if there is none; an existing one is not relinked
    #[arg(long, value_name = "N", conflicts_with = "no_hnsw", allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    hnsw_expansion: Option<u32>,
    /// Delete the HNSW graph: dense search is exact again
    #[arg(long)]
    no_hnsw: bool,
}

impl HnswFlags {
    /// `current`: the parameters of the graph the index has, which a plain `--hnsw` keeps.
    fn setting(&self, current: Option<HnswParams>) -> HnswSetting {
        if self.no_hnsw {
            return HnswSetting::Remove;
        }
        if !self.hnsw && self.hnsw_expansion.is_none() {
            return HnswSetting::Keep;
        }
        let mut params = current.unwrap_or_default();
        if let Some(expansion) = self.hnsw_expansion {
            params.expansion_search = expansion as usize;
        }
        HnswSetting::Build(params)
    }
}

/// Why chunks of `chunker`'s capacity would be embedded truncated, if they would: the model's
/// limit counts its special tokens too.
fn capacity_warning(chunker: &ChunkerConfig, embedder: &Embedder) -> Option<String> {
    let room = embedder.text_token_limit();
    if chunker.unit != ChunkUnit::Tokens || chunker.capacity <= room {
        return None;
    }
    let info = embedder.info();
    Some(format!(
        "chunks of up to {} tokens pass {}'s limit of {} ({} of them special tokens), \
         so the end of a long chunk will not be embedded; --chunk-tokens {room} or less avoids this",
        chunker.capacity,
        info.id,
        info.max_tokens,
        info.max_tokens - room
    ))
}

#[allow(clippy::too_many_lines)] // set-up, run, report: one screen each
pub fn run(settings: &Settings, args: &IndexArgs) -> Result<ExitCode> {
    let dir = &settings.index.value;
    if let Some(finished) = finish_interrupted_swap(dir)? {
        eprintln!(
            "{}: an earlier rebuild was stopped; {finished}",
            dir.display()
        );
    }
    if !args.shards.is_empty() && settings.store.value.is_none() {
        anyhow::bail!(
            "--shard names where a PostgreSQL store keeps its chunks; name the store too (--store URL)"
        );
    }
    if args.rebuild || args.repair {
        return rebuild(settings, args);
    }
    let existing = scar_index::Index::open(dir).ok();
    let model = indexing_model(
        settings.named_model(),
        existing.as_ref().map(scar_index::Index::manifest),
        &settings.model.value,
    )
    .to_owned();
    let current_graph = existing
        .as_ref()
        .and_then(|index| index.hnsw().map(|info| info.params));
    let new_index = existing.is_none();
    drop(existing);
    let embedder = load_embedder(settings, &model)?;
    let chunker = args.chunker(ChunkerConfig::default());
    if new_index && let Some(warning) = capacity_warning(&chunker, &embedder) {
        eprintln!("warning: {warning}");
    }
    let options = IndexOptions {
        chunker,
        vectors: if args.f16 {
            VectorEncoding::F16
        } else {
            VectorEncoding::F32
        },
        load: args.load_options(),
        hnsw: args.hnsw.setting(current_graph),
        ..IndexOptions::default()
    };
    let cancel = cancel_on_interrupt()?;
    let style = match (args.json, args.watch) {
        (false, _) => ReportStyle::Text,
        (true, false) => ReportStyle::Json,
        (true, true) => ReportStyle::JsonLines,
    };
    // The watch starts before the first run, so that nothing changed during it is missed.
    let watch = args
        .watch
        .then(|| FolderWatch::new(&args.paths, dir))
        .transpose()?;
    // One run over the paths, publishing to the store when one is set.
    let run_with = |options: &IndexOptions| {
        // The store's HNSW index follows the same flags as the folder's graph.
        let publish = settings.store.value.as_deref().map(|url| Publish {
            url,
            roots: &args.paths,
            hnsw: options.hnsw,
            shards: &args.shards,
        });
        index_into(
            dir,
            &embedder,
            style,
            publish,
            &cancel,
            |progress, cancel| index_paths(dir, &args.paths, &embedder, options, progress, cancel),
        )
    };
    let report = run_with(&options)?;
    let Some(mut watch) = watch else {
        return Ok(index_exit(report.is_complete()));
    };
    if style == ReportStyle::Text {
        eprintln!("watching for changes (Ctrl-C stops)");
    }
    // Later runs keep the graph the first one left.
    let options = IndexOptions {
        hnsw: HnswSetting::Keep,
        ..options
    };
    while let Some(burst) = watch.next_burst(&cancel) {
        for root in &burst.gone {
            eprintln!(
                "{} is gone: its documents leave the index; watching for it to come back",
                inert(&root.display().to_string())
            );
        }
        for root in &burst.back {
            eprintln!(
                "{} is back: watching it again",
                inert(&root.display().to_string())
            );
        }
        if style == ReportStyle::Text {
            eprintln!("{} changed", plural(burst.paths.len(), "path"));
        }
        let run = run_with(&options);
        // One failed run (a file locked, a full disk) does not end the watch: the next burst
        // tries again.
        match run {
            Err(error) if crate::closed_pipe(&error) => break,
            Err(error) => eprint!("{}", crate::error_report(&error)),
            Ok(_) => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

impl IndexArgs {
    /// The limits on reading one file; a limit past what 64 bits can count is no limit.
    fn load_options(&self) -> LoadOptions {
        LoadOptions {
            max_file_bytes: self.max_file_mib.saturating_mul(1024 * 1024),
            max_read_time: std::time::Duration::from_secs(self.max_file_seconds),
            max_read_memory: self.max_file_memory_mib.saturating_mul(1024 * 1024),
        }
    }

    /// The chunker the flags ask for, `base` where they say nothing.
    fn chunker(&self, base: ChunkerConfig) -> ChunkerConfig {
        let unit = if self.chunk_chars.is_some() {
            ChunkUnit::Characters
        } else if self.chunk_tokens.is_some() {
            ChunkUnit::Tokens
        } else {
            base.unit
        };
        ChunkerConfig {
            unit,
            capacity: self
                .chunk_chars
                .or(self.chunk_tokens)
                .unwrap_or(base.capacity),
            overlap: if self.overlap > 0 {
                self.overlap
            } else {
                base.overlap
            },
            prepend_headings: self.prepend_headings || base.prepend_headings,
        }
    }
}

fn load_embedder(settings: &Settings, model: &str) -> Result<Embedder> {
    let files = ModelLocator::from_env(&settings.models_dir.value).locate(model)?;
    Ok(Embedder::load(&files, &settings.embed_options())?)
}

/// `scar index --rebuild` and `--repair`: the index's own files (and any new paths) indexed
/// afresh into a folder beside it, reusing what it salvages from the old one, which the new one
/// replaces only once complete.
#[allow(clippy::too_many_lines)] // what was salvaged, the settings it implies, the run, the swap
fn rebuild(settings: &Settings, args: &IndexArgs) -> Result<ExitCode> {
    let dir = &settings.index.value;
    let verb = if args.repair { "repair" } else { "rebuild" };
    let salvage = Salvage::read(dir)?;
    if !args.json {
        for damage in &salvage.damage {
            eprintln!("damaged: {}", inert(damage));
        }
        if args.repair && salvage.damage.is_empty() {
            eprintln!("{} has no damage; building it again anyway", dir.display());
        }
    }
    if salvage.manifest.is_none() && settings.named_model().is_none() {
        eprintln!(
            "the manifest is lost, so the model that built {} is unknown: building with {} \
             (--model chooses another)",
            dir.display(),
            settings.model.value
        );
    }
    let model = indexing_model(
        settings.named_model(),
        salvage.manifest.as_ref(),
        &settings.model.value,
    )
    .to_owned();
    let Some(mut paths) = salvage
        .documents
        .clone()
        .or_else(|| (!args.paths.is_empty()).then(Vec::new))
    else {
        anyhow::bail!(
            "the catalog of {dir} is lost, so which files it held is unknown; name the files and \
             folders it indexed: `scar --index {dir} index --{verb} PATH...`",
            dir = dir.display()
        );
    };
    paths.extend(args.paths.iter().cloned());
    let embedder = load_embedder(settings, &model)?;
    let fresh = rebuild_dir(dir);
    if fresh.exists() {
        fs_err::remove_dir_all(&fresh)?;
    }
    let base = salvage.manifest.as_ref();
    let options = IndexOptions {
        chunker: args.chunker(base.map_or_else(ChunkerConfig::default, |m| m.chunker)),
        vectors: if args.f16 {
            VectorEncoding::F16
        } else {
            base.map_or(VectorEncoding::F32, |m| m.vectors)
        },
        load: args.load_options(),
        hnsw: match args.hnsw.setting(salvage.hnsw) {
            // The old index's graph is built again for the new one.
            HnswSetting::Keep => salvage.hnsw.map_or(HnswSetting::Keep, HnswSetting::Build),
            setting => setting,
        },
        ..IndexOptions::default()
    };
    if !args.json {
        eprintln!(
            "{verb}ing {} from its {} files into {} ({} sound vectors to reuse)",
            dir.display(),
            paths.len(),
            fresh.display(),
            salvage.sound_vectors()
        );
    }
    let cancel = cancel_on_interrupt()?;
    let style = if args.json {
        ReportStyle::Json
    } else {
        ReportStyle::Text
    };
    let report = index_into(
        &fresh,
        &embedder,
        style,
        None,
        &cancel,
        |progress, cancel| {
            salvage.rebuild_into(&fresh, &paths, &embedder, &options, progress, cancel)
        },
    )?;
    if report.cancelled {
        anyhow::bail!(
            "the {verb} was stopped; {} is untouched (run the same command to start it again)",
            dir.display()
        );
    }
    replace_with_rebuild(dir)?;
    if !args.json {
        eprintln!(
            "{} {verb}ed; {} chunks reused",
            dir.display(),
            report.reused
        );
    }
    Ok(index_exit(report.is_complete()))
}

/// Where a run publishes the folder index it updated.
#[derive(Clone, Copy)]
struct Publish<'a> {
    /// The PostgreSQL store.
    url: &'a str,
    /// The paths indexed: the store's files under them that the index no longer holds leave it.
    roots: &'a [PathBuf],
    /// What becomes of the store's HNSW index.
    hnsw: HnswSetting,
    /// The servers a new store keeps its chunks on; none keeps them beside its documents.
    shards: &'a [String],
}

/// Runs `index` on the folder index in `dir` (a plain run or a rebuild), publishes it to a
/// PostgreSQL store when `publish` names one, and prints what came of both.
fn index_into(
    dir: &std::path::Path,
    embedder: &Embedder,
    style: ReportStyle,
    publish: Option<Publish<'_>>,
    cancel: &AtomicBool,
    index: impl FnOnce(&mut dyn FnMut(&IndexProgress), &AtomicBool) -> scar_index::Result<IndexReport>,
) -> Result<IndexReport> {
    let json = style != ReportStyle::Text;
    if !json {
        eprintln!(
            "indexing into {} with {} in {}",
            dir.display(),
            embedder.info().id,
            embedder.compute()
        );
    }
    let bar = progress_bar(json, "{bar:30} {percent:>3}% {msg}");
    let mut report = index(&mut |p| show_progress(&bar, p), cancel)?;
    bar.finish_and_clear();
    let published = match publish {
        Some(target) if !report.cancelled => Some(publish_to(dir, target, json, cancel)?),
        _ => None,
    };
    // A cancel while publishing cancels the run: the next one finishes both.
    if published
        .as_ref()
        .is_some_and(|published| published.cancelled)
    {
        report.cancelled = true;
    }

    if json {
        let mut value = serde_json::to_value(&report)?;
        if let (Some(published), Some(fields)) = (&published, value.as_object_mut()) {
            fields.insert("store".to_owned(), serde_json::to_value(published)?);
        }
        if style == ReportStyle::Json {
            outln!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            outln!("{}", serde_json::to_string(&value)?);
        }
    } else {
        for skipped in &report.skipped {
            eprintln!(
                "skipped {}: {}",
                inert(&display_path(&skipped.path)),
                inert(&skipped.reason)
            );
        }
        for warning in &report.warnings {
            eprintln!(
                "warning {}: {}",
                inert(&display_path(&warning.path)),
                inert(&warning.reason)
            );
        }
        let seconds = report.elapsed.as_secs_f64();
        outln!(
            "{} added, {} updated, {} removed, {} unchanged, {} skipped; {} chunks, {} tokens in {:.1} s ({:.0} tokens/s){}",
            report.added,
            report.updated,
            report.removed,
            report.unchanged,
            report.skipped.len(),
            report.chunks,
            report.tokens,
            seconds,
            report.tokens as f64 / seconds.max(1e-9),
            if report.cancelled {
                "; cancelled, the rest is left for the next run"
            } else {
                ""
            },
        );
        if report.hnsw_rows_linked > 0 {
            outln!(
                "{} chunks linked into the HNSW graph",
                report.hnsw_rows_linked
            );
        }
        if report.truncated > 0 {
            outln!(
                "{} chunks were longer than the model's limit and were truncated for embedding",
                report.truncated
            );
        }
        if let (Some(published), Some(target)) = (&published, publish) {
            print_published(target.url, published)?;
        }
    }
    Ok(report)
}

/// What publishing to the store at `url` did, for a person.
fn print_published(url: &str, published: &scar_postgres::PublishReport) -> Result<()> {
    for skipped in &published.skipped {
        eprintln!(
            "not published {}: {}",
            inert(&display_path(&skipped.path)),
            inert(&skipped.reason)
        );
    }
    outln!(
        "published to {}: {} files written ({} chunks), {} unchanged, {} removed{}",
        scar_postgres::redacted(url),
        published.published,
        published.chunks,
        published.unchanged,
        published.removed,
        if published.cancelled {
            "; cancelled, the rest is left for the next run"
        } else {
            ""
        },
    );
    if let Some(params) = published.hnsw {
        outln!(
            "the store's dense search runs on its HNSW index ({} links per chunk, {} candidates)",
            params.connectivity,
            params.expansion_search
        );
    }
    Ok(())
}

/// Publishes the index in `dir` to `target`, with a progress bar of files.
fn publish_to(
    dir: &std::path::Path,
    target: Publish<'_>,
    json: bool,
    cancel: &AtomicBool,
) -> Result<scar_postgres::PublishReport> {
    let Publish {
        url,
        roots,
        hnsw,
        shards,
    } = target;
    let index = scar_index::Index::open(dir)?;
    if !shards.is_empty() {
        let manifest = index.manifest();
        scar_postgres::create_sharded(url, shards, &manifest.model, &manifest.chunker)?;
    }
    // The roots as the index names the files under them, gone ones too.
    let roots: Vec<PathBuf> = roots
        .iter()
        .map(|root| scar_index::resolve_root(root))
        .collect();
    let bar = progress_bar(json, "{bar:30} {pos}/{len} files {msg}");
    bar.set_message(format!("publishing to {}", scar_postgres::redacted(url)));
    let report = scar_postgres::publish(
        &index,
        url,
        &roots,
        hnsw,
        &mut |done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
        cancel,
    )?;
    bar.finish_and_clear();
    Ok(report)
}

/// A flag that the first Ctrl-C, SIGTERM or SIGHUP sets (indexing stops after the current batch,
/// keeping what was committed); a second one quits at once.
pub(crate) fn cancel_on_interrupt() -> Result<Arc<AtomicBool>> {
    let cancel = Arc::new(AtomicBool::new(false));
    let handler_flag = Arc::clone(&cancel);
    ctrlc::set_handler(move || {
        if handler_flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping after the current batch (Ctrl-C again to quit now)");
    })
    .context("installing the Ctrl-C and SIGTERM handler")?;
    Ok(cancel)
}

/// A progress bar drawn with `template`, or a hidden one (for `--json`).
pub(crate) fn progress_bar(hidden: bool, template: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Shows an indexing run's progress, in thousandths.
pub(crate) fn show_progress(bar: &ProgressBar, progress: &IndexProgress) {
    bar.set_length(1000);
    bar.set_position((progress.fraction() * 1000.0) as u64);
    bar.set_message(progress.status());
}
