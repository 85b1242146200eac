//! The read side: an open index, as of its last commit.

use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use scar_core::{ChunkId, Position, SeamKind, Side, cosine};

use super::data::{DataFiles, MappedFiles, StringsProblem};
use super::format::{Catalog, ChunkRecord, DocumentEntry, Manifest, RowsChecksum, read_manifest};
use super::text_dir::{Access, check_text, open_text, read_catalog};
use crate::folder::IndexFile;
use crate::hnsw::{HnswGraph, HnswInfo};
use crate::search::TextIndex;
use crate::{IndexError, Result};

/// A chunk as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkView<'a> {
    /// Its id (row).
    pub id: ChunkId,
    /// Its document.
    pub document: &'a DocumentEntry,
    /// Its ordinal within the document.
    pub ordinal: u32,
    /// Byte range in the document's text.
    pub bytes: Range<usize>,
    /// Character range in the document's text.
    pub chars: Range<usize>,
    /// Tokens of the embedding model's tokenizer, without special tokens.
    pub token_count: usize,
    /// Innermost enclosing heading's index, if the document has headings.
    pub section: Option<u32>,
    /// The page the chunk starts on (numbered from 1), for a document of pages (PDF).
    pub page: Option<u32>,
    /// Headings enclosing the chunk, joined by " > ".
    pub heading_path: &'a str,
    /// The chunk's own text.
    pub text: &'a str,
}

/// What is wrong with a document's rows, and in which file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// The damaged file.
    pub file: PathBuf,
    /// What is wrong, for a person.
    pub reason: String,
}

/// An open index, for reading.
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    catalog: Catalog,
    files: DataFiles,
    /// For each row, the index of its document in `catalog.documents` (`u32::MAX`: dead row).
    row_documents: Vec<u32>,
    /// The chunk texts, for BM25.
    text: TextIndex,
    /// The HNSW graph, when the index has a current one (`scar index --hnsw`).
    hnsw: Option<HnswGraph>,
    /// The files tantivy and usearch map (the data files hold their own).
    mapped: MappedFiles,
    /// The commit this index was opened at, as the catalog file's stamp.
    commit: Option<CommitStamp>,
}

/// The size and modification time of the file that holds the catalog: a new commit replaces it.
type CommitStamp = (u64, Option<std::time::SystemTime>);

fn commit_stamp(dir: &Path) -> Option<CommitStamp> {
    let metadata = fs_err::metadata(IndexFile::Catalog.path(dir)).ok()?;
    Some((metadata.len(), metadata.modified().ok()))
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("chunks", &self.len())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// Opens the index in `dir` as of its last commit, after checking what it reads: the
    /// manifest, the catalog against the data files' lengths, every live chunk's record against
    /// the files it points into, its text as UTF-8, the text index's checksums, and the HNSW
    /// graph's. Anything damaged is an [`IndexError::Damaged`] naming the file.
    ///
    /// A writer may commit while the index is opened: the parts read before and after the
    /// commit then disagree, or files of the older commit are gone, which is no damage. An open
    /// that fails while a commit landed is tried again after a pause that grows, for as long as
    /// commits keep landing (at most 20 times); one that fails with no commit in between is
    /// reported.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        const ATTEMPTS: u32 = 20;
        let dir = dir.as_ref();
        if let Some(error) = crate::swap::interrupted_swap_error(dir) {
            return Err(error);
        }
        let mut attempt = 1;
        // The commit's bytes, not its file's length and time: two commits can land within one
        // tick of the file-system clock with metadata of the same length.
        let commit = || fs_err::read(IndexFile::Catalog.path(dir)).ok();
        loop {
            let before = commit();
            match Self::open_once(dir) {
                Err(_) if attempt < ATTEMPTS && commit() != before => {
                    std::thread::sleep(std::time::Duration::from_millis(10 * u64::from(attempt)));
                    attempt += 1;
                }
                opened => return opened,
            }
        }
    }

    fn open_once(dir: &Path) -> Result<Self> {
        let dir = dir.to_owned();
        let manifest = read_manifest(&dir)?;
        // Before the catalog is read: a commit in between makes the index look stale, never
        // current.
        let commit = commit_stamp(&dir);
        let text = open_text(&dir, Access::Read)?;
        let catalog = read_catalog(&dir, &text)?;
        if let Some((i, problem)) = catalog.problems().into_iter().next() {
            let path = catalog.documents[i].path.display();
            return Err(IndexError::damaged(
                &dir,
                &IndexFile::Catalog.path(&dir),
                format!("{path}: {problem}"),
            ));
        }
        let files = DataFiles::open_committed(&dir, &manifest, &catalog)?;
        let mut row_documents = vec![u32::MAX; catalog.rows as usize];
        for (i, document) in catalog.documents.iter().enumerate() {
            for row in document.rows() {
                row_documents[row as usize] = i as u32;
            }
        }
        let mut mapped = MappedFiles::default();
        check_text(&dir, &text, manifest.analyzer, &mut mapped)?;
        let text = TextIndex::new(&dir, text, manifest.analyzer)?;
        let hnsw = HnswGraph::open(&dir, &catalog, manifest.model.dimension, false)?;
        if hnsw.is_some() {
            mapped.hold_whole(&IndexFile::HnswGraph.path(&dir))?;
        }
        let index = Self {
            dir,
            manifest,
            catalog,
            files,
            row_documents,
            text,
            hnsw,
            mapped,
            commit,
        };
        let damage = index
            .catalog
            .documents
            .par_iter()
            .find_map_first(|document| Some((document, index.document_damage(document)?)));
        if let Some((document, Damage { file, reason })) = damage {
            let reason = format!("{}, {reason}", document.path.display());
            return Err(IndexError::damaged(&index.dir, &file, reason));
        }
        let live = index.text.live_chunks();
        if live != index.len() as u64 {
            return Err(IndexError::damaged(
                &index.dir,
                &IndexFile::Catalog.path(&index.dir),
                format!(
                    "the text index holds {live} chunks, the catalog {}",
                    index.len()
                ),
            ));
        }
        Ok(index)
    }

    /// The first thing wrong with the rows of `document` that would stop a reader: a record
    /// that is missing, belongs elsewhere or points past the strings, text that is not UTF-8, a
    /// vector that is missing. Values (vectors, continuity) are [`Index::verify`]'s to check.
    pub(crate) fn document_damage(&self, document: &DocumentEntry) -> Option<Damage> {
        let [vectors, records, strings] = self.data_files();
        let damage = |file: &PathBuf, row: u32, reason: String| {
            Some(Damage {
                file: file.clone(),
                reason: format!("chunk {row}: {reason}"),
            })
        };
        let dimension = self.manifest.model.dimension;
        for (ordinal, row) in (0u32..).zip(document.rows()) {
            let Some(record) = self.files.record(row as usize) else {
                return damage(&records, row, "its record is missing".into());
            };
            if (record.slot, record.ordinal) != (document.slot, ordinal) {
                return damage(
                    &records,
                    row,
                    format!(
                        "its record says slot {} ordinal {}, the catalog slot {} ordinal {ordinal}",
                        record.slot, record.ordinal, document.slot
                    ),
                );
            }
            if record.bytes.0 > record.bytes.1 || record.chars.0 > record.chars.1 {
                return damage(&records, row, "its ranges run backwards".into());
            }
            match self.files.strings_of(&record) {
                Err(StringsProblem::OutOfRange) => {
                    return damage(&records, row, "its text lies past the strings".into());
                }
                Err(StringsProblem::NotUtf8) => {
                    return damage(&strings, row, "its text is not UTF-8".into());
                }
                Ok(_) => {}
            }
            if self.matrix().len() / dimension <= row as usize {
                return damage(&vectors, row, "its vector is missing".into());
            }
        }
        None
    }

    /// What the HNSW graph covers, when the index has a current one (dense search then uses it).
    #[must_use]
    pub fn hnsw(&self) -> Option<HnswInfo> {
        self.hnsw.as_ref().map(|graph| HnswInfo {
            generation: self.catalog.generation,
            rows: graph.rows(),
            params: graph.params(),
        })
    }

    pub(crate) fn hnsw_graph(&self) -> Option<&HnswGraph> {
        self.hnsw.as_ref()
    }

    pub(crate) fn text(&self) -> &TextIndex {
        &self.text
    }

    /// True for a row that belongs to a live document.
    pub(crate) fn is_live(&self, row: u32) -> bool {
        self.row_documents
            .get(row as usize)
            .is_some_and(|&document| document != u32::MAX)
    }

    /// Checks that no file the index maps (its data files, the text index's segments, the HNSW
    /// graph) was cut short on disk since it was opened: reading a mapped page past a file's
    /// end would kill the process. For readers that stay open (a server), before each search;
    /// the check is one `fstat` per file.
    pub fn check_files(&self) -> Result<()> {
        match self.files.cut_short().or_else(|| self.mapped.cut_short()) {
            Some(path) => Err(IndexError::damaged(
                &self.dir,
                path,
                "it was cut short on disk while the index was open",
            )),
            None => Ok(()),
        }
    }

    /// True while the folder's last commit is the one this index was opened at; false once a
    /// writer has committed since (open it again to see what that added).
    #[must_use]
    pub fn is_current(&self) -> bool {
        commit_stamp(&self.dir) == self.commit
    }

    /// The folder this index lives in.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The data files it reads: the vectors, the chunk records and the strings.
    #[must_use]
    pub fn data_files(&self) -> [PathBuf; 3] {
        IndexFile::data_paths(&self.dir, self.catalog.generation)
    }

    /// What the index was built with.
    #[must_use]
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The indexed documents, in row order.
    #[must_use]
    pub fn documents(&self) -> &[DocumentEntry] {
        &self.catalog.documents
    }

    /// The languages its documents are written in, with how many documents each, most first
    /// (`Unknown` for those whose language could not be told).
    #[must_use]
    pub fn languages(&self) -> Vec<LanguageCount> {
        let mut counts: Vec<LanguageCount> = Vec::new();
        for document in &self.catalog.documents {
            let name = document
                .language
                .as_deref()
                .and_then(crate::language_name)
                .unwrap_or("Unknown");
            match counts.iter_mut().find(|known| known.name == name) {
                Some(known) => known.documents += 1,
                None => counts.push(LanguageCount { name, documents: 1 }),
            }
        }
        counts.sort_by(|a, b| b.documents.cmp(&a.documents).then(a.name.cmp(b.name)));
        counts
    }

    /// The committed catalog.
    #[must_use]
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Number of live chunks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.catalog
            .documents
            .iter()
            .map(|d| d.chunk_count as usize)
            .sum()
    }

    /// True when nothing is indexed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Iterates over every live chunk id, in row order.
    pub fn chunk_ids(&self) -> impl Iterator<Item = ChunkId> + '_ {
        self.catalog
            .documents
            .iter()
            .flat_map(|d| d.rows().map(ChunkId))
    }

    fn document_of(&self, id: ChunkId) -> Option<&DocumentEntry> {
        let slot = *self.row_documents.get(id.index())?;
        self.catalog.documents.get(slot as usize)
    }

    /// True when `id` is a live chunk of this index.
    #[must_use]
    pub fn contains(&self, id: ChunkId) -> bool {
        self.document_of(id).is_some()
    }

    /// Everything about a live chunk; `None` for an id this index does not hold.
    #[must_use]
    pub fn chunk(&self, id: ChunkId) -> Option<ChunkView<'_>> {
        let document = self.document_of(id)?;
        let record = self.files.record(id.index())?;
        // Checked when the index was opened.
        let (text, heading_path) = self.files.strings_of(&record).ok()?;
        Some(ChunkView {
            id,
            document,
            ordinal: record.ordinal,
            bytes: record.bytes.0 as usize..record.bytes.1 as usize,
            chars: record.chars.0 as usize..record.chars.1 as usize,
            token_count: record.token_count as usize,
            section: record.section,
            page: document.page_at(record.bytes.0 as usize),
            heading_path,
            text,
        })
    }

    /// The chunk's embedding (unit length); empty for an id past the stored rows.
    #[must_use]
    pub fn embedding(&self, id: ChunkId) -> &[f32] {
        let dimension = self.manifest.model.dimension;
        let start = id.index().saturating_mul(dimension);
        self.matrix()
            .get(start..start.saturating_add(dimension))
            .unwrap_or_default()
    }

    /// Every stored row, dead ones included, laid end to end.
    pub(crate) fn matrix(&self) -> &[f32] {
        self.files.matrix()
    }

    /// The chunk's (document, ordinal); for an id this index does not hold, a position in no
    /// document (`u32::MAX`).
    #[must_use]
    pub fn position(&self, id: ChunkId) -> Position {
        self.files.record(id.index()).map_or(
            Position {
                document: u32::MAX,
                ordinal: u32::MAX,
            },
            |record| Position {
                document: record.slot,
                ordinal: record.ordinal,
            },
        )
    }

    /// The adjacent chunk on `side` in the same document, or `None` at the document's edge.
    #[must_use]
    pub fn neighbour(&self, id: ChunkId, side: Side) -> Option<ChunkId> {
        let rows = self.document_of(id)?.rows();
        let candidate = match side {
            Side::Previous => id.0.checked_sub(1)?,
            Side::Next => id.0.checked_add(1)?,
        };
        rows.contains(&candidate).then_some(ChunkId(candidate))
    }

    /// The stored cos(chunk, next chunk in its document), computed at indexing time.
    #[must_use]
    pub fn continuity_next(&self, id: ChunkId) -> Option<f32> {
        self.neighbour(id, Side::Next)?;
        self.files
            .record(id.index())
            .map(|record| record.continuity_next)
    }

    /// Where the cut between the chunk and its neighbour on `side` fell, as the chunker saw it;
    /// `None` at the document's edge.
    #[must_use]
    pub fn seam(&self, id: ChunkId, side: Side) -> Option<SeamKind> {
        let left = match side {
            Side::Previous => self.neighbour(id, Side::Previous)?,
            Side::Next => id,
        };
        self.neighbour(left, Side::Next)?;
        self.files.record(left.index())?.seam_next
    }

    /// The live rows of the documents in `slots`, in row order.
    #[must_use]
    pub fn rows_of(&self, slots: &[u32]) -> Vec<u32> {
        self.catalog
            .documents
            .iter()
            .filter(|d| slots.contains(&d.slot))
            .flat_map(DocumentEntry::rows)
            .collect()
    }

    /// Checks what a crash must never break: every live chunk has its record, its vector (unit
    /// length, finite) and its text; ordinals are contiguous; stored continuity equals the
    /// recomputed cosine; tantivy holds exactly the live documents. And what damage may change:
    /// each document's rows as stored match the checksum written when it was indexed. Returns
    /// the problems found, each naming its document.
    pub fn verify(&self) -> Result<Vec<String>> {
        Ok(self
            .problems()
            .into_iter()
            .map(|(_, problem)| problem)
            .collect())
    }

    /// What [`Index::verify`] finds, each with the rows of the document it concerns (none for
    /// a problem of the whole index).
    pub(crate) fn problems(&self) -> Vec<(Option<Range<u32>>, String)> {
        let mut problems: Vec<_> = self
            .catalog
            .documents
            .par_iter()
            .flat_map_iter(|document| {
                self.document_problems(document)
                    .into_iter()
                    .map(move |problem| {
                        let line = format!("{}: {problem}", document.path.display());
                        (Some(document.rows()), line)
                    })
            })
            .collect();
        let live_docs = self.text.live_chunks();
        if live_docs != self.len() as u64 {
            let line = format!(
                "text index holds {live_docs} chunks, catalog {}",
                self.len()
            );
            problems.push((None, line));
        }
        problems
    }

    /// What is wrong with the rows of `document`: damage a reader would stop at, or values
    /// (vectors, continuity, text) that are not what indexing wrote.
    pub(crate) fn document_problems(&self, document: &DocumentEntry) -> Vec<String> {
        if let Some(damage) = self.document_damage(document) {
            return vec![damage.reason];
        }
        let mut problems = Vec::new();
        let names = self.data_files().map(|path| {
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into())
        });
        let [vectors, records, strings] = &names;
        for row in document.rows() {
            let id = ChunkId(row);
            let vector = self.embedding(id);
            let length: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            if !vector.iter().all(|x| x.is_finite()) || (length - 1.0).abs() > 1e-2 {
                problems.push(format!(
                    "chunk {id}: its vector in {vectors} is not a finite unit vector"
                ));
            }
            if let (Some(next), Some(stored)) =
                (self.neighbour(id, Side::Next), self.continuity_next(id))
            {
                let expected = cosine(vector, self.embedding(next));
                if (expected - stored).abs() > 1e-3 || stored.is_nan() {
                    problems.push(format!(
                        "chunk {id}: the continuity in {records} is {stored}, the cosine of the \
                         vectors in {vectors} {expected}"
                    ));
                }
            }
            if self.chunk(id).is_none_or(|c| c.text.is_empty()) {
                problems.push(format!("chunk {id}: its text in {strings} is empty"));
            }
        }
        // Damage the checks above do not see: a flipped sign, a changed letter or section.
        if problems.is_empty()
            && document
                .checksum
                .is_some_and(|stored| self.rows_checksum(document) != Some(stored))
        {
            problems.push(format!(
                "its chunks as stored (in {vectors}, {records} and {strings}) differ from what \
                 was indexed"
            ));
        }
        problems
    }

    /// The [`RowsChecksum`] of `document`'s rows as they are stored now.
    fn rows_checksum(&self, document: &DocumentEntry) -> Option<u64> {
        let dimension = self.manifest.model.dimension;
        let mut checksum = RowsChecksum::new();
        for row in document.rows() {
            let row = row as usize;
            let record = self.files.stored_record(row)?;
            let (text, heading) = self.files.strings_of(&ChunkRecord::decode(record)).ok()?;
            let vector = self.files.stored_vector(row, dimension)?;
            checksum.add(vector, record, text.as_bytes(), heading.as_bytes());
        }
        Some(checksum.finish())
    }
}

/// A language and how many of an index's documents are written in it; shown as `Hindi 2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanguageCount {
    /// The language's English name (`Hindi`), or `Unknown`.
    pub name: &'static str,
    /// Documents written in it.
    pub documents: usize,
}

impl std::fmt::Display for LanguageCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.documents)
    }
}
