//! End-to-end tests of the `scar` command, as one binary.
#![allow(clippy::unwrap_used)]

mod ask;
mod common;
mod corruption;
mod damaged;
mod errors;
mod eval;
mod formats;
mod hnsw;
mod index;
mod languages;
mod numbers;
mod rfc;
mod serve;
mod settings;
mod signals;
mod store;
mod terminal;
mod watch;
