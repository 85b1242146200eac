//! Generation with the real SmolLM2-135M-Instruct and Gemma 3 270M GGUF files, locally and
//! through a llama.cpp server.
#![allow(clippy::unwrap_used)]

mod common;
mod gemma;
mod local;
mod server;
