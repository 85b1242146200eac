//! Integration tests of scar-serve, as one binary.
#![allow(clippy::unwrap_used)]

mod common;
mod http;
mod mcp;
mod store;
