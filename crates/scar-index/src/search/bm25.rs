//! BM25 over chunk text, through tantivy.

use std::path::Path;

use scar_core::ChunkId;

use crate::store::{Index, TextFields, read_error};
use crate::{Analyzer, Result};

/// The text part of an open index: tantivy's index, a reader on it, the schema's fields and
/// how its text is cut.
pub(crate) struct TextIndex {
    index: tantivy::Index,
    reader: tantivy::IndexReader,
    fields: TextFields,
    analyzer: Analyzer,
}

impl TextIndex {
    /// A reader on `index`, the text index of the index folder `dir`, whose text `analyzer`
    /// cut.
    pub(crate) fn new(dir: &Path, index: tantivy::Index, analyzer: Analyzer) -> Result<Self> {
        // The catalog is read once, at open: the text index stays at the same commit.
        let reader = index
            .reader_builder()
            .reload_policy(tantivy::ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| read_error(dir, e))?;
        let (_, fields) = TextFields::schema(analyzer);
        Ok(Self {
            index,
            reader,
            fields,
            analyzer,
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
            analyzer,
        } = self.text();
        let searcher = reader.searcher();
        let parser = tantivy::query::QueryParser::for_index(index, vec![fields.text]);
        // Questions are prose, not query syntax: a stray quote or colon must not fail the search.
        let (query, _) = parser.parse_query_lenient(&analyzer.for_parser(query));
        let top = searcher
            .search(
                &query,
                &tantivy::collector::TopDocs::with_limit(k.max(1)).order_by_score(),
            )
            .map_err(|e| read_error(self.dir(), e))?;
        let first_rows: std::collections::HashMap<u64, u32> = self
            .documents()
            .iter()
            .map(|d| (u64::from(d.slot), d.first_row))
            .collect();
        // Damaged data met while searching is a damaged file of the index, named with the
        // command that repairs it.
        let text_error = |e| read_error(self.dir(), e);
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let columns = searcher.segment_reader(address.segment_ord).fast_fields();
            let number = |name| -> Result<Option<u64>> {
                Ok(columns.u64(name).map_err(text_error)?.first(address.doc_id))
            };
            let (Some(slot), Some(ordinal)) = (number("slot")?, number("ordinal")?) else {
                continue;
            };
            if let Some(first_row) = first_rows.get(&slot) {
                hits.push((ChunkId(first_row + ordinal as u32), score));
            }
        }
        Ok(hits)
    }

    /// How many live chunks hold each distinct word of `query`, as BM25 reads it, in the order
    /// the words first come.
    pub fn word_counts(&self, query: &str) -> Result<Vec<u64>> {
        let TextIndex {
            reader,
            fields,
            analyzer,
            ..
        } = self.text();
        let searcher = reader.searcher();
        let mut words = analyzer.words(query);
        let mut seen = std::collections::HashSet::new();
        words.retain(|word| seen.insert(word.clone()));
        // Counted by a search, which skips the chunks of removed documents that the term
        // dictionary still counts until its segments merge.
        words
            .iter()
            .map(|word| {
                let term = tantivy::Term::from_field_text(fields.text, word);
                let query =
                    tantivy::query::TermQuery::new(term, tantivy::schema::IndexRecordOption::Basic);
                searcher
                    .search(&query, &tantivy::collector::Count)
                    .map(|count| count as u64)
                    .map_err(|e| read_error(self.dir(), e))
            })
            .collect()
    }

    /// [`bm25_search`](Self::bm25_search) among the chunks in `rows` only.
    pub fn bm25_search_among(
        &self,
        query: &str,
        rows: &[u32],
        k: usize,
    ) -> Result<Vec<(ChunkId, f32)>> {
        let wanted: std::collections::HashSet<u32> = rows.iter().copied().collect();
        let mut hits = self.bm25_search(query, self.len())?;
        hits.retain(|(id, _)| wanted.contains(&id.0));
        hits.truncate(k);
        Ok(hits)
    }
}
