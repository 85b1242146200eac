//! Integration tests of scar-eval, as one binary.
#![allow(clippy::unwrap_used)]

mod answers;
mod benchmarks;
