//! Building an index again from its documents' files, reusing every vector that can be trusted:
//! for a damaged index (`scar index --repair`), or one of an older format or other settings
//! (`scar index --rebuild`).
//!
//! Whatever can be read is read, each part on its own: the manifest (which model), the catalog
//! (which files), the HNSW stamp (its parameters), and every sound row of the data files (a
//! record whose text reads, a finite unit vector), keyed by the text that was embedded. The new
//! index is then built by an ordinary indexing run, which embeds only the chunks whose vectors
//! were not found, so it is consistent by construction.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use scar_core::ErrorChain;
use scar_embed::Embedder;

use crate::folder::{IndexFile, is_index};
use crate::indexer::index_reusing;
use crate::known::KnownVectors;
use crate::store::{
    FORMAT_VERSION, Index, Manifest, VectorEncoding, read_any_manifest, read_catalog_of,
};
use crate::{HnswParams, IndexError, IndexOptions, IndexProgress, IndexReport, Result, hnsw};

/// What could be read from an index folder, damaged or not.
#[derive(Debug)]
pub struct Salvage {
    /// Its manifest, whatever its format version, if it reads.
    pub manifest: Option<Manifest>,
    /// The files its catalog lists, in row order, if the catalog reads.
    pub documents: Option<Vec<PathBuf>>,
    /// The parameters of its HNSW graph, if it has one whose stamp reads.
    pub hnsw: Option<HnswParams>,
    /// What is damaged, one line each, for a person; empty for a sound index.
    pub damage: Vec<String>,
    /// Vectors that can be reused: its sound rows and its resume journal (this format only).
    known: KnownVectors,
}

impl Salvage {
    /// Reads what can be read of the index in `dir`. Fails only when `dir` holds no index at
    /// all, or when a file cannot be read for a reason other than its content.
    pub fn read(dir: &Path) -> Result<Self> {
        if !is_index(dir) && !IndexFile::Text.path(dir).is_dir() {
            return Err(IndexError::NotAnIndex(dir.to_owned()));
        }
        let mut damage = Vec::new();
        // The rows of documents that fail a check (of the committed generation): their vectors
        // may be damaged in ways a row alone does not show, such as a flipped sign.
        let mut distrusted = None;
        match Index::open(dir) {
            Ok(index) => {
                let (rows, lines): (Vec<_>, Vec<_>) = index.problems().into_iter().unzip();
                damage.extend(lines);
                let rows: Vec<_> = rows.into_iter().flatten().collect();
                distrusted = Some((index.catalog().generation, rows));
            }
            // Not damage: `--rebuild` is how an index of another format is read again.
            Err(IndexError::OtherFormat { .. }) => {}
            Err(error) => damage.push(describe(&error)),
        }
        let manifest = read_any_manifest(dir).ok();
        let documents = read_catalog_of(dir).ok().map(|catalog| {
            // A mail's attachments are documents of the same file: the file once.
            let mut paths: Vec<PathBuf> = catalog.documents.into_iter().map(|d| d.path).collect();
            paths.dedup();
            paths
        });
        let hnsw = hnsw::read_info(dir).ok().flatten().map(|info| info.params);
        let mut known = KnownVectors::default();
        if let Some(manifest) = manifest
            .as_ref()
            .filter(|m| m.format_version == FORMAT_VERSION)
        {
            known = KnownVectors::new(manifest.model.dimension);
            let trusted = |generation: u64, row: u32| {
                distrusted.as_ref().is_none_or(|(committed, rows)| {
                    generation != *committed || !rows.iter().any(|r| r.contains(&row))
                })
            };
            let rows = known.add_rows(dir, manifest, &trusted);
            for added in [rows, known.add_journal(dir)] {
                if let Err(error) = added {
                    damage.push(describe(&error));
                }
            }
        }
        Ok(Self {
            manifest,
            documents,
            hnsw,
            damage,
            known,
        })
    }

    /// How many vectors can be reused (before checking that the model is the same).
    #[must_use]
    pub fn sound_vectors(&self) -> usize {
        self.known.len()
    }

    /// Indexes `paths` into the new index folder `into`, taking the salvaged vectors of every
    /// chunk whose embedded text is unchanged, when `embedder` runs the model that made them
    /// and `options` store them at the same precision or lower. See [`crate::index_paths`].
    pub fn rebuild_into(
        self,
        into: &Path,
        paths: &[PathBuf],
        embedder: &Embedder,
        options: &IndexOptions,
        progress: &mut dyn FnMut(&IndexProgress),
        cancel: &AtomicBool,
    ) -> Result<IndexReport> {
        let model = embedder.info();
        let reusable = self.manifest.as_ref().is_some_and(|m| {
            m.model.id == model.id
                && m.model.dimension == model.dimension
                && (m.vectors == options.vectors || m.vectors == VectorEncoding::F32)
        });
        let known = if reusable {
            self.known
        } else {
            KnownVectors::new(model.dimension)
        };
        index_reusing(into, paths, embedder, options, known, progress, cancel)
    }
}

/// One line for a damaged part: the file and what is wrong with it, without the advice to
/// repair (this is the repair).
fn describe(error: &IndexError) -> String {
    match error {
        IndexError::Damaged {
            path,
            reason,
            source,
            ..
        } => match source {
            Some(source) => format!("{}: {reason}: {source}", path.display()),
            None => format!("{}: {reason}", path.display()),
        },
        other => ErrorChain(other).to_string(),
    }
}
