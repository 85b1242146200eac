//! Integration tests of scar-embed, compiled as one binary.
#![allow(clippy::unwrap_used)]

mod common;
mod cross_encoder;
mod precision;
mod reference;
mod tiny_bert;
