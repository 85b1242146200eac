//! Every loader on arbitrary bytes: the first byte picks the format by extension (the last one
//! leaves it to sniffing), the rest is the file. Loading may fail; it must not panic, and what it
//! returns must hold what the chunker relies on.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use scar_index::{LoadOptions, load_bytes};

/// Indexed by the first byte; scripts/fuzz seeds each format with its index.
const NAMES: [&str; 14] = [
    "doc.txt", "doc.md", "doc.html", "doc.pdf", "doc.docx", "doc.odt", "doc.pptx", "doc.xlsx",
    "doc.ods", "doc.csv", "doc.epub", "doc.rtf", "doc.eml", "doc",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let name = NAMES[usize::from(pick) % NAMES.len()];
    let options = LoadOptions {
        max_file_bytes: 1024 * 1024,
        ..LoadOptions::default()
    };
    if let Ok(document) = load_bytes(Path::new(name), bytes, &options) {
        assert!(!document.text.trim().is_empty());
        for heading in &document.headings {
            assert!(document.text.is_char_boundary(heading.offset));
        }
    }
});
