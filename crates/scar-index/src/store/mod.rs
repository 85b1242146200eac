//! The index folder: its on-disk format, the read side ([`Index`]) and the writer.
//!
//! ```text
//! manifest.json          model, chunker, vector encoding, format version (written once)
//! text/                  tantivy: BM25 over chunk text, keyed by (document slot, ordinal)
//! vectors.<gen>.bin      one embedding per row, f32 or f16, rows of a document contiguous
//! chunks.<gen>.bin       one fixed-size record per row (position, ranges, continuity, ...)
//! strings.<gen>.bin      chunk texts and heading paths, UTF-8, addressed from the records
//! ```
//!
//! The three data files are append-only. The single commit point is a tantivy commit whose
//! payload is the [`Catalog`]: which documents exist, which rows they own, and how long each
//! data file is. A crash before that commit leaves bytes past the committed lengths, which the
//! next writer truncates; a crash after it loses nothing. Rows owned by no document (from
//! replaced or deleted files) are compacted into a new generation of files by the writer.

mod format;
mod reader;
mod text_dir;
mod writer;

pub use format::{Catalog, DocumentEntry, Manifest, VectorEncoding, document_name, is_index};
pub(crate) use format::{
    ChunkRecord, FORMAT_VERSION, RECORD_BYTES, TextFields, data_files, file_stamp,
    read_any_manifest, read_catalog_of,
};
pub use reader::{ChunkView, Index};
pub(crate) use text_dir::read_error;
pub(crate) use writer::{NewDocument, Writer};
