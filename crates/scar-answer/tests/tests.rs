//! Generation with the real SmolLM2-135M-Instruct, Gemma 3 270M and Qwen2.5-Coder-0.5B GGUF
//! files, locally and through a llama.cpp server.
#![allow(clippy::unwrap_used)]

mod common;
mod gemma;
mod local;
mod qwen;
mod server;
