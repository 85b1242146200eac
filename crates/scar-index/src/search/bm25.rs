//! BM25 over chunk text, through tantivy.

use std::path::Path;

use scar_core::ChunkId;
use tantivy::schema::Value;

use crate::store::{Index, TextFields};
use crate::{IndexError, Result};

/// The text part of an open index: tantivy's index, a reader on it, and the schema's fields.
pub(crate) struct TextIndex {
    index: tantivy::Index,
    reader: tantivy::IndexReader,
    fields: TextFields,
}

impl TextIndex {
    /// A reader on `index`, the text index of the index folder `dir`.
    pub(crate) fn new(dir: &Path, index: tantivy::Index) -> Result<Self> {
        let reader = index.reader().map_err(|e| IndexError::text(dir, e))?;
        let (_, fields) = TextFields::schema();
        Ok(Self {
            index,
            reader,
            fields,
        })
    }

    /// Chunks the text index holds, deleted ones left out.
    pub(crate) fn live_chunks(&self) -> u64 {
        self.reader
            .searcher()
            .segment_readers()
            .iter()
            .map(|r| u64::from(r.num_docs()))
            .sum()
    }
}

impl Index {
    /// BM25 over chunk text: up to `k` live chunks, best first, with their scores.
    pub fn bm25_search(&self, query: &str, k: usize) -> Result<Vec<(ChunkId, f32)>> {
        let TextIndex {
            index,
            reader,
            fields,
        } = self.text();
        let searcher = reader.searcher();
        let parser = tantivy::query::QueryParser::for_index(index, vec![fields.text]);
        // Questions are prose, not query syntax: a stray quote or colon must not fail the search.
        let (query, _) = parser.parse_query_lenient(query);
        let top = searcher
            .search(
                &query,
                &tantivy::collector::TopDocs::with_limit(k.max(1)).order_by_score(),
            )
            .map_err(|e| IndexError::text(self.dir(), e))?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let doc: tantivy::TantivyDocument = searcher
                .doc(address)
                .map_err(|e| IndexError::text(self.dir(), e))?;
            let number = |field| doc.get_first(field).and_then(|v| v.as_u64());
            let (Some(slot), Some(ordinal)) = (number(fields.slot), number(fields.ordinal)) else {
                continue;
            };
            if let Some(document) = self.documents().iter().find(|d| u64::from(d.slot) == slot) {
                hits.push((ChunkId(document.first_row + ordinal as u32), score));
            }
        }
        Ok(hits)
    }
}
