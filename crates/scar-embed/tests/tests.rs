//! Integration tests of scar-embed, compiled as one binary.

mod common;
mod reference;
mod tiny_bert;
