//! Cutting a document into ordered chunks with text-splitter, each mapped back into its text.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use text_splitter::{Characters, ChunkConfig, MarkdownSplitter, TextSplitter};
use tokenizers::Tokenizer;

use crate::load::{Format, Heading, LoadedDocument};
use crate::{IndexError, Result};

/// What a chunk's capacity is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkUnit {
    /// Unicode characters.
    Characters,
    /// Tokens of the embedding model's tokenizer.
    Tokens,
}

/// How documents are cut. Default: at most 160 model tokens per chunk, no overlap (the paper's
/// fixed-length setting), headings not prepended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkerConfig {
    /// Unit of `capacity` and `overlap`.
    pub unit: ChunkUnit,
    /// Largest chunk.
    pub capacity: usize,
    /// How much consecutive chunks share; 0 keeps chunks disjoint.
    pub overlap: usize,
    /// Embed each chunk with its heading path in front ("contextual prepending"), while the
    /// stored text stays the chunk's own.
    pub prepend_headings: bool,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        Self {
            unit: ChunkUnit::Tokens,
            capacity: 160,
            overlap: 0,
            prepend_headings: false,
        }
    }
}

/// One chunk of a document, before embedding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkSpan {
    /// Byte range in the document's text.
    pub bytes: Range<usize>,
    /// Character (code point) range in the document's text.
    pub chars: Range<usize>,
    /// Headings enclosing the chunk's start, outermost first, joined by " > ".
    pub heading_path: String,
    /// Index of the innermost enclosing heading in the document, if any.
    pub section: Option<u32>,
}

impl ChunkSpan {
    /// What the model embeds for this chunk.
    #[must_use]
    pub fn embedding_text<'a>(
        &self,
        text: &'a str,
        prepend_headings: bool,
    ) -> std::borrow::Cow<'a, str> {
        let own = &text[self.bytes.clone()];
        if prepend_headings && !self.heading_path.is_empty() {
            format!("{}\n\n{own}", self.heading_path).into()
        } else {
            own.into()
        }
    }
}

enum Splitters {
    Characters(TextSplitter<Characters>, MarkdownSplitter<Characters>),
    // Boxed: a tokenizer makes this variant far larger than the other.
    Tokens(Box<(TextSplitter<Tokenizer>, MarkdownSplitter<Tokenizer>)>),
}

/// Cuts documents according to a [`ChunkerConfig`].
pub struct Chunker {
    splitters: Splitters,
}

impl std::fmt::Debug for Chunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Chunker")
    }
}

impl Chunker {
    /// A chunker; token capacities are measured with `tokenizer` (truncation switched off, so
    /// that a long text is not under-counted).
    pub fn new(config: &ChunkerConfig, tokenizer: &Tokenizer) -> Result<Self> {
        let bad = |e: &dyn std::fmt::Display| IndexError::BadChunker(e.to_string());
        if config.capacity == 0 {
            return Err(IndexError::BadChunker("capacity must be at least 1".into()));
        }
        let splitters = match config.unit {
            ChunkUnit::Characters => {
                let make = || ChunkConfig::new(config.capacity).with_overlap(config.overlap);
                Splitters::Characters(
                    TextSplitter::new(make().map_err(|e| bad(&e))?),
                    MarkdownSplitter::new(make().map_err(|e| bad(&e))?),
                )
            }
            ChunkUnit::Tokens => {
                let mut tokenizer = tokenizer.clone();
                tokenizer.with_truncation(None).map_err(|e| bad(&e))?;
                let make = || {
                    ChunkConfig::new(config.capacity)
                        .with_overlap(config.overlap)
                        .map(|c| c.with_sizer(tokenizer.clone()))
                };
                Splitters::Tokens(Box::new((
                    TextSplitter::new(make().map_err(|e| bad(&e))?),
                    MarkdownSplitter::new(make().map_err(|e| bad(&e))?),
                )))
            }
        };
        Ok(Self { splitters })
    }

    /// The document's chunks in order; markdown is split along its structure.
    #[must_use]
    pub fn chunk(&self, document: &LoadedDocument) -> Vec<ChunkSpan> {
        let text = document.text.as_str();
        let markdown = document.format == Format::Markdown;
        let pieces: Vec<(usize, usize, &str)> = match &self.splitters {
            Splitters::Characters(_, md) if markdown => collect(md.chunk_char_indices(text)),
            Splitters::Characters(plain, _) => collect(plain.chunk_char_indices(text)),
            Splitters::Tokens(pair) if markdown => collect(pair.1.chunk_char_indices(text)),
            Splitters::Tokens(pair) => collect(pair.0.chunk_char_indices(text)),
        };
        let mut headings = HeadingTracker::new(&document.headings);
        pieces
            .into_iter()
            .map(|(byte_start, char_start, piece)| {
                let (heading_path, section) = headings.at(byte_start);
                ChunkSpan {
                    bytes: byte_start..byte_start + piece.len(),
                    chars: char_start..char_start + piece.chars().count(),
                    heading_path,
                    section,
                }
            })
            .collect()
    }
}

fn collect<'t>(
    pieces: impl Iterator<Item = text_splitter::ChunkCharIndex<'t>>,
) -> Vec<(usize, usize, &'t str)> {
    pieces
        .map(|p| (p.byte_offset, p.char_offset, p.chunk))
        .collect()
}

/// Walks headings in document order, keeping the stack of those enclosing the current offset.
struct HeadingTracker<'a> {
    headings: &'a [Heading],
    next: usize,
    stack: Vec<&'a Heading>,
}

impl<'a> HeadingTracker<'a> {
    fn new(headings: &'a [Heading]) -> Self {
        Self {
            headings,
            next: 0,
            stack: Vec::new(),
        }
    }

    /// Heading path and section index at `offset`; offsets must not decrease between calls.
    fn at(&mut self, offset: usize) -> (String, Option<u32>) {
        while let Some(heading) = self.headings.get(self.next).filter(|h| h.offset <= offset) {
            self.stack.retain(|open| open.level < heading.level);
            self.stack.push(heading);
            self.next += 1;
        }
        let path = self
            .stack
            .iter()
            .map(|h| h.title.as_str())
            .collect::<Vec<_>>()
            .join(" > ");
        let section = self.next.checked_sub(1).map(|i| i as u32);
        (path, section)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(format: Format, text: &str, headings: Vec<Heading>) -> LoadedDocument {
        LoadedDocument {
            format,
            text: text.to_owned(),
            headings,
            warnings: Vec::new(),
            hash: String::new(),
        }
    }

    fn characters(capacity: usize) -> Chunker {
        let config = ChunkerConfig {
            unit: ChunkUnit::Characters,
            capacity,
            ..Default::default()
        };
        Chunker::new(
            &config,
            &Tokenizer::new(tokenizers::models::bpe::BPE::default()),
        )
        .unwrap()
    }

    #[test]
    fn every_chunk_maps_back_into_the_text() {
        let text = "Ünïcode first sentence here. Second sentence follows it.\n\nA new paragraph — with dashes.";
        let doc = document(Format::Text, text, Vec::new());
        let chunks = characters(30).chunk(&doc);
        assert!(chunks.len() > 2);
        let chars: Vec<char> = text.chars().collect();
        for chunk in &chunks {
            let by_chars: String = chars[chunk.chars.clone()].iter().collect();
            assert_eq!(by_chars, &text[chunk.bytes.clone()]);
            assert!(chunk.chars.len() <= 30);
        }
        assert!(
            chunks
                .windows(2)
                .all(|w| w[0].bytes.end <= w[1].bytes.start),
            "disjoint, ordered"
        );
    }

    #[test]
    fn chunks_carry_their_heading_path_and_section() {
        let text = "# Intro\nHello there.\n## Details\nMore words here.\n# Next\nLast part.";
        let headings = vec![
            Heading {
                offset: 0,
                level: 1,
                title: "Intro".into(),
            },
            Heading {
                offset: 21,
                level: 2,
                title: "Details".into(),
            },
            Heading {
                offset: 49,
                level: 1,
                title: "Next".into(),
            },
        ];
        let doc = document(Format::Markdown, text, headings);
        let chunks = characters(20).chunk(&doc);
        let details = chunks
            .iter()
            .find(|c| text[c.bytes.clone()].contains("More"))
            .unwrap();
        assert_eq!(details.heading_path, "Intro > Details");
        assert_eq!(details.section, Some(1));
        let last = chunks.last().unwrap();
        assert_eq!(last.heading_path, "Next");
        assert_eq!(last.section, Some(2));
        assert_eq!(
            last.embedding_text(text, true),
            format!("Next\n\n{}", &text[last.bytes.clone()])
        );
        assert_eq!(last.embedding_text(text, false), &text[last.bytes.clone()]);
    }

    #[test]
    fn zero_capacity_is_refused() {
        let config = ChunkerConfig {
            capacity: 0,
            ..Default::default()
        };
        let tokenizer = Tokenizer::new(tokenizers::models::bpe::BPE::default());
        assert!(Chunker::new(&config, &tokenizer).is_err());
    }
}
