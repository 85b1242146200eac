//! Generation with the real SmolLM2-135M-Instruct GGUF, locally and through a llama.cpp server.
#![allow(clippy::unwrap_used)]

mod common;
mod local;
mod server;
