//! The app driven through its UI with `egui_kittest`, on a small real index: assets/example
//! embedded with all-MiniLM-L6-v2 (installed by scripts/fetch-test-models), as a folder and,
//! published, as a PostgreSQL store.
#![allow(clippy::unwrap_used)]

mod app;
mod common;
mod store;
