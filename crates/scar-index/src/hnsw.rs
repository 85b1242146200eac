//! Approximate dense search: an HNSW graph over the index's vectors, through usearch.
//!
//! Exact search reads every row, which passes 100 ms at a million chunks on a laptop; the graph
//! visits a few thousand. The rows it finds are scored again from the stored vectors, so a hit
//! has the same score either way and only which rows are found can differ (recall@k against
//! exact search is measured by scar-retrieve's `hnsw_search` example).
//!
//! ```text
//! hnsw.usearch   the graph, in usearch's format (with its own copy of the vectors)
//! hnsw.json      the generation and the rows it covers, its parameters, the graph's blake3
//! ```
//!
//! usearch trusts the graph file: damaged links would make it read out of bounds. So the stamp
//! holds the graph's checksum, and a graph that does not match it is never handed to usearch
//! (stamps written before the checksum existed are taken as they are).
//!
//! The graph covers rows `0..rows` of one generation of data files. Rows are append-only within
//! a generation, so a graph stays valid as documents are added (new rows are linked in, and
//! rows not yet linked are searched exactly); a compaction starts a new generation and the
//! graph is rebuilt.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use scar_core::{ChunkId, dot};
use serde::{Deserialize, Serialize};

use crate::error::io_error;
use crate::folder::{IndexFile, temporary_path, write_replacing};
use crate::store::Catalog;
use crate::{IndexError, Result};

/// Rows linked between two progress reports and cancellation checks.
const ROWS_PER_BATCH: u32 = 2048;

/// How the graph is built and searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Links per node (usearch's `connectivity`, HNSW's M).
    pub connectivity: usize,
    /// Candidates kept while linking a new row (`ef_construction`).
    pub expansion_add: usize,
    /// Candidates kept while searching (`ef`).
    pub expansion_search: usize,
}

impl HnswParams {
    /// Whether a graph built with `self` has the links `other` asks for: only the search breadth
    /// may differ, and that can change without relinking.
    #[must_use]
    pub fn same_links(&self, other: &Self) -> bool {
        (self.connectivity, self.expansion_add) == (other.connectivity, other.expansion_add)
    }
}

impl Default for HnswParams {
    /// Measured with scar-retrieve's `hnsw_search` example (docs/PERFORMANCE.md): searching with
    /// 256 candidates, recall@10 against exact search is 1.000 at 100k synthetic chunks and 0.977
    /// at 1M (0.924 with 128), about 3 ms a query.
    fn default() -> Self {
        Self {
            connectivity: 16,
            expansion_add: 128,
            expansion_search: 256,
        }
    }
}

/// What a saved graph covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswInfo {
    /// The generation of data files whose rows it links.
    pub generation: u64,
    /// Rows `0..rows` are linked.
    pub rows: u32,
    /// How it was built.
    pub params: HnswParams,
}

/// What `hnsw.json` holds: what the graph covers, and the checksum of its file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stamp {
    #[serde(flatten)]
    info: HnswInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    blake3: Option<String>,
}

/// The blake3 of a file, in hex.
fn checksum(path: &Path) -> Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_mmap_rayon(path).map_err(io_error(path))?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// An HNSW graph over rows of a row-major matrix of unit vectors.
pub struct HnswGraph {
    graph: usearch::Index,
    dimension: usize,
    params: HnswParams,
    rows: u32,
}

impl std::fmt::Debug for HnswGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HnswGraph")
            .field("dimension", &self.dimension)
            .field("params", &self.params)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

fn graph_error(error: impl std::error::Error + Send + Sync + 'static) -> IndexError {
    IndexError::Hnsw(Box::new(error))
}

impl HnswGraph {
    /// An empty graph for vectors of `dimension`.
    pub fn new(dimension: usize, params: HnswParams) -> Result<Self> {
        let options = usearch::IndexOptions {
            dimensions: dimension,
            // Inner product: the vectors are unit length, so it ranks as cosine does.
            metric: usearch::MetricKind::IP,
            quantization: usearch::ScalarKind::F32,
            connectivity: params.connectivity,
            expansion_add: params.expansion_add,
            expansion_search: params.expansion_search,
            multi: false,
        };
        let graph = usearch::Index::new(&options).map_err(graph_error)?;
        Ok(Self {
            graph,
            dimension,
            params,
            rows: 0,
        })
    }

    /// Rows `0..rows()` are linked.
    #[must_use]
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// How the graph was built.
    #[must_use]
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// Searches from now on keep `expansion` candidates (more: higher recall, slower queries).
    pub fn set_expansion_search(&mut self, expansion: usize) {
        self.graph.change_expansion_search(expansion);
        self.params.expansion_search = expansion;
    }

    /// Links the rows of `matrix` that are not linked yet, in parallel, reporting (rows linked,
    /// rows to link) after each batch. Stops after the current batch when `cancel` is set; the
    /// rows linked so far stay usable. Returns whether every row is linked.
    pub fn extend(
        &mut self,
        matrix: &[f32],
        progress: &mut dyn FnMut(u32, u32),
        cancel: &AtomicBool,
    ) -> Result<bool> {
        let total = (matrix.len() / self.dimension) as u32;
        let start = self.rows;
        if total <= start {
            return Ok(true);
        }
        self.graph.reserve(total as usize).map_err(graph_error)?;
        while self.rows < total {
            if cancel.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let batch = self.rows..(self.rows + ROWS_PER_BATCH).min(total);
            batch.clone().into_par_iter().try_for_each(|row| {
                let at = row as usize * self.dimension;
                self.graph
                    .add(u64::from(row), &matrix[at..at + self.dimension])
                    .map_err(graph_error)
            })?;
            self.rows = batch.end;
            progress(self.rows - start, total - start);
        }
        Ok(true)
    }

    /// The `k` linked rows nearest to `query` among those `live` accepts, best first, scored
    /// from `matrix` exactly as exact search scores them.
    pub fn search(
        &self,
        matrix: &[f32],
        query: &[f32],
        k: usize,
        live: impl Fn(u32) -> bool,
    ) -> Result<Vec<(ChunkId, f32)>> {
        if k == 0 || query.len() != self.dimension || self.rows == 0 {
            return Ok(Vec::new());
        }
        let rows = self.rows;
        let matches = self
            .graph
            .filtered_search(query, k, |key| {
                u32::try_from(key).is_ok_and(|row| row < rows && live(row))
            })
            .map_err(graph_error)?;
        let query_norm = scar_core::norm(query).max(f32::MIN_POSITIVE);
        let mut hits: Vec<(ChunkId, f32)> = matches
            .keys
            .iter()
            .map(|&key| {
                let at = key as usize * self.dimension;
                let score = dot(query, &matrix[at..at + self.dimension]) / query_norm;
                (ChunkId(key as u32), score)
            })
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(hits)
    }

    /// Writes the graph and then its stamp, each through a temporary file and a rename, so a
    /// crash leaves either the old pair or a stamp that no longer matches (and is rebuilt).
    pub(crate) fn save(&self, dir: &Path, generation: u64) -> Result<()> {
        let graph_path = IndexFile::HnswGraph.path(dir);
        let temporary = temporary_path(&graph_path);
        self.graph
            .save(&temporary.to_string_lossy())
            .map_err(graph_error)?;
        let blake3 = checksum(&temporary)?;
        fs_err::rename(&temporary, &graph_path).map_err(io_error(&graph_path))?;
        write_stamp(
            dir,
            &Stamp {
                info: HnswInfo {
                    generation,
                    rows: self.rows,
                    params: self.params,
                },
                blake3: Some(blake3),
            },
        )
    }

    /// The saved graph, if there is one for the committed generation: memory-mapped for
    /// searching (`editable` false) or read into memory to link more rows. A graph of another
    /// generation, or one covering rows the catalog does not have, is stale and not opened.
    pub(crate) fn open(
        dir: &Path,
        catalog: &Catalog,
        dimension: usize,
        editable: bool,
    ) -> Result<Option<Self>> {
        let Some(Stamp { info, blake3 }) = read_stamp(dir)? else {
            return Ok(None);
        };
        if info.generation != catalog.generation || info.rows > catalog.rows {
            return Ok(None);
        }
        let graph_path = IndexFile::HnswGraph.path(dir);
        if let Some(expected) = blake3
            && checksum(&graph_path)? != expected
        {
            return Err(IndexError::damaged(
                dir,
                &graph_path,
                format!(
                    "its checksum does not match the one in {}",
                    IndexFile::HnswStamp
                ),
            ));
        }
        let mut graph = Self::new(dimension, info.params)?;
        let path = graph_path.to_string_lossy();
        let opened = if editable {
            graph.graph.load(&path)
        } else {
            graph.graph.view(&path)
        };
        opened
            .map_err(|e| IndexError::unparsable(dir, &graph_path, "usearch cannot open it", e))?;
        if graph.graph.size() != info.rows as usize || graph.graph.dimensions() != dimension {
            return Err(IndexError::damaged(
                dir,
                &graph_path,
                format!(
                    "{} rows of {} dimensions, but the stamp says {} of {dimension}",
                    graph.graph.size(),
                    graph.graph.dimensions(),
                    info.rows
                ),
            ));
        }
        // The search breadth is not part of usearch's file: set it from the stamp.
        graph
            .graph
            .change_expansion_search(info.params.expansion_search);
        graph.rows = info.rows;
        Ok(Some(graph))
    }
}

/// What the saved graph covers, if the index has one (current or stale).
pub(crate) fn read_info(dir: &Path) -> Result<Option<HnswInfo>> {
    Ok(read_stamp(dir)?.map(|stamp| stamp.info))
}

fn read_stamp(dir: &Path) -> Result<Option<Stamp>> {
    let stamp_path = IndexFile::HnswStamp.path(dir);
    if !stamp_path.is_file() {
        return Ok(None);
    }
    let text = fs_err::read_to_string(&stamp_path).map_err(io_error(&stamp_path))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| IndexError::unparsable(dir, &stamp_path, "unreadable JSON", e))
}

/// Rewrites the stamp with `info`, keeping the graph's checksum: for a change that leaves the
/// links as they are (the search breadth).
pub(crate) fn write_info(dir: &Path, info: &HnswInfo) -> Result<()> {
    let blake3 = read_stamp(dir)?.and_then(|stamp| stamp.blake3);
    write_stamp(
        dir,
        &Stamp {
            info: *info,
            blake3,
        },
    )
}

/// Writes the stamp through a temporary file and a rename.
fn write_stamp(dir: &Path, stamp: &Stamp) -> Result<()> {
    let json = serde_json::to_string_pretty(stamp).map_err(IndexError::encode("the HNSW stamp"))?;
    write_replacing(&IndexFile::HnswStamp.path(dir), json)
}

/// Deletes the saved graph: stamp first, so a half-deleted graph is never read.
pub(crate) fn remove(dir: &Path) -> Result<()> {
    for path in [IndexFile::HnswStamp, IndexFile::HnswGraph].map(|file| file.path(dir)) {
        if path.exists() {
            fs_err::remove_file(&path).map_err(io_error(&path))?;
        }
    }
    Ok(())
}

/// The rows of `ranges` at or past `from`.
pub(crate) fn rows_from(ranges: &[Range<u32>], from: u32) -> Vec<Range<u32>> {
    ranges
        .iter()
        .filter(|r| r.end > from)
        .map(|r| r.start.max(from)..r.end)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unit rows on a circle: row i at angle i degrees.
    fn circle(rows: u32) -> Vec<f32> {
        (0..rows)
            .flat_map(|i| {
                let angle = (i as f32).to_radians();
                [angle.cos(), angle.sin()]
            })
            .collect()
    }

    /// A graph with every row of `matrix` linked.
    fn linked(matrix: &[f32]) -> Result<HnswGraph> {
        let mut graph = HnswGraph::new(2, HnswParams::default())?;
        graph.extend(matrix, &mut |_, _| {}, &AtomicBool::new(false))?;
        Ok(graph)
    }

    #[test]
    fn finds_the_nearest_rows_with_exact_scores() -> Result<()> {
        let matrix = circle(90);
        let mut graph = HnswGraph::new(2, HnswParams::default())?;
        assert!(graph.extend(&matrix, &mut |_, _| {}, &AtomicBool::new(false))?);
        assert_eq!(graph.rows(), 90);
        let query = [
            2.0 * 40f32.to_radians().cos(),
            2.0 * 40f32.to_radians().sin(),
        ];
        let hits = graph.search(&matrix, &query, 3, |_| true)?;
        let rows: Vec<u32> = hits.iter().map(|h| h.0.0).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], 40);
        assert!(rows[1..].iter().all(|r| *r == 39 || *r == 41));
        assert!(
            (hits[0].1 - 1.0).abs() < 1e-5,
            "cosine, not the raw dot product"
        );
        Ok(())
    }

    #[test]
    fn skips_rows_that_are_not_live() -> Result<()> {
        let matrix = circle(90);
        let graph = linked(&matrix)?;
        let query = [40f32.to_radians().cos(), 40f32.to_radians().sin()];
        let hits = graph.search(&matrix, &query, 1, |row| row != 40)?;
        assert!(hits[0].0.0 == 39 || hits[0].0.0 == 41);
        Ok(())
    }

    #[test]
    fn links_new_rows_and_stops_when_cancelled() -> Result<()> {
        let matrix = circle(5000);
        let mut graph = HnswGraph::new(2, HnswParams::default())?;
        let mut reports = Vec::new();
        graph.extend(
            &matrix[..2 * 3000],
            &mut |done, total| reports.push((done, total)),
            &AtomicBool::new(false),
        )?;
        assert_eq!(reports, vec![(2048, 3000), (3000, 3000)]);
        assert!(!graph.extend(&matrix, &mut |_, _| {}, &AtomicBool::new(true))?);
        assert_eq!(graph.rows(), 3000, "cancelled before the first batch");
        assert!(graph.extend(&matrix, &mut |_, _| {}, &AtomicBool::new(false))?);
        assert_eq!(graph.rows(), 5000);
        Ok(())
    }

    #[test]
    fn saved_graph_opens_only_for_its_generation() -> Result<()> {
        let dir = tempfile::tempdir().map_err(io_error(Path::new("tempdir")))?;
        let graph = linked(&circle(100))?;
        graph.save(dir.path(), 3)?;
        let catalog = |generation, rows| Catalog {
            generation,
            rows,
            ..Catalog::default()
        };
        let opened = HnswGraph::open(dir.path(), &catalog(3, 120), 2, false)?;
        let opened = opened.map(|g| g.rows());
        assert_eq!(opened, Some(100));
        assert!(HnswGraph::open(dir.path(), &catalog(4, 100), 2, false)?.is_none());
        assert!(HnswGraph::open(dir.path(), &catalog(3, 99), 2, false)?.is_none());
        remove(dir.path())?;
        assert!(read_info(dir.path())?.is_none());
        Ok(())
    }

    #[test]
    fn search_breadth_is_saved_with_the_graph() -> Result<()> {
        let dir = tempfile::tempdir().map_err(io_error(Path::new("tempdir")))?;
        let mut graph = linked(&circle(100))?;
        graph.set_expansion_search(300);
        assert!(graph.params().same_links(&HnswParams::default()));
        graph.save(dir.path(), 1)?;
        let catalog = Catalog {
            generation: 1,
            rows: 100,
            ..Catalog::default()
        };
        let opened = HnswGraph::open(dir.path(), &catalog, 2, false)?;
        assert_eq!(opened.map(|g| g.params().expansion_search), Some(300));
        let wider = HnswParams {
            connectivity: 32,
            ..HnswParams::default()
        };
        assert!(!wider.same_links(&HnswParams::default()));
        Ok(())
    }

    #[test]
    fn rows_from_keeps_the_tail_of_each_range() {
        assert_eq!(
            rows_from(&[0..10, 10..20, 25..30], 15),
            vec![15..20, 25..30]
        );
    }

    #[test]
    fn usearch_errors_keep_their_source() -> Result<()> {
        use std::error::Error;

        let dir = tempfile::tempdir().map_err(io_error(Path::new("tempdir")))?;
        let graph = linked(&circle(10))?;
        let Err(error) = graph.save(&dir.path().join("missing"), 1) else {
            panic!("saved a graph into a folder that does not exist");
        };
        assert!(matches!(error, IndexError::Hnsw(_)), "{error:?}");
        assert_eq!(error.to_string(), "the HNSW graph failed");
        assert!(error.source().is_some());
        Ok(())
    }
}
