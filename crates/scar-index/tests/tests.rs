//! Integration tests of scar-index with the real all-MiniLM-L6-v2 model, as one binary.
#![allow(clippy::unwrap_used)]

mod analyzer;
mod bad_inputs;
mod common;
mod corpora;
mod crash;
mod damaged;
mod folders;
mod hnsw;
mod incremental;
mod resume;
mod tokens;
