//! The store: its on-disk format, the read side ([`Index`]) and the writer, over the files
//! that [`crate::folder`] names: the manifest, tantivy's folder (BM25 over chunk text, keyed by
//! document slot and ordinal) and three data files per generation (vectors, chunk records,
//! strings), which `data.rs` reads row by row.
//!
//! The three data files are append-only. The single commit point is a tantivy commit whose
//! payload is the [`Catalog`]: which documents exist, which rows they own, and how long each
//! data file is. A crash before that commit leaves bytes past the committed lengths, which the
//! next writer truncates; a crash after it loses nothing. Rows owned by no document (from
//! replaced or deleted files) are compacted into a new generation of files by the writer.

mod data;
mod format;
mod reader;
mod text_dir;
mod writer;

pub(crate) use data::{DataFiles, widen};
pub use format::{Catalog, DocumentEntry, Manifest, VectorEncoding, document_name};
pub(crate) use format::{FORMAT_VERSION, TextFields, file_stamp, read_any_manifest, stored_path};
pub use reader::{ChunkView, Index, LanguageCount};
pub(crate) use text_dir::{read_catalog_of, read_error};
pub(crate) use writer::{NewDocument, Writer};
