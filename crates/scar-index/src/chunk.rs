//! Cutting a document into ordered chunks with text-splitter, each mapped back into its text.

use std::ops::Range;

use scar_core::SeamKind;
use serde::{Deserialize, Serialize};
use text_splitter::{Characters, ChunkConfig, ChunkSizer, MarkdownSplitter, TextSplitter};
use tokenizers::ModelWrapper;
use tokenizers::Tokenizer;

use crate::load::{Format, Heading, LoadedDocument};
use crate::seam::{seam_kind, trailing_lead_ins};
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
    /// Where the cut to the next chunk fell; `None` for the document's last chunk.
    pub seam_after: Option<SeamKind>,
}

impl ChunkSpan {
    /// What the model embeds for this chunk.
    #[must_use]
    pub fn embedding_text<'a>(
        &self,
        text: &'a str,
        prepend_headings: bool,
    ) -> std::borrow::Cow<'a, str> {
        embedding_text(
            &self.heading_path,
            &text[self.bytes.clone()],
            prepend_headings,
        )
    }
}

/// What the model embeds for a chunk of text `own` under the headings `heading_path`.
pub(crate) fn embedding_text<'a>(
    heading_path: &str,
    own: &'a str,
    prepend_headings: bool,
) -> std::borrow::Cow<'a, str> {
    if prepend_headings && !heading_path.is_empty() {
        format!("{heading_path}\n\n{own}").into()
    } else {
        own.into()
    }
}

/// Cuts documents according to a [`ChunkerConfig`].
pub struct Chunker {
    config: ChunkerConfig,
    /// The model's tokenizer with truncation off, so that a long text is not under-counted.
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for Chunker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Chunker {
    /// A chunker; token capacities are measured with `tokenizer`.
    pub fn new(config: &ChunkerConfig, tokenizer: &Tokenizer) -> Result<Self> {
        let mut tokenizer = tokenizer.clone();
        // Sizes are token spans of the text alone: padding would add spans that are not.
        tokenizer
            .with_truncation(None)
            .map_err(|e| IndexError::bad_chunker("the tokenizer cannot stop truncating", e))?
            .with_padding(None);
        let chunker = Self {
            config: *config,
            tokenizer,
        };
        chunker.chunk_config()?;
        Ok(chunker)
    }

    fn chunk_config(&self) -> Result<ChunkConfig<Characters>> {
        if self.config.capacity == 0 {
            return Err(IndexError::BadChunker {
                reason: "capacity must be at least 1".into(),
                source: None,
            });
        }
        ChunkConfig::new(self.config.capacity)
            .with_overlap(self.config.overlap)
            .map_err(|e| {
                let ChunkerConfig {
                    capacity, overlap, ..
                } = self.config;
                IndexError::bad_chunker(format!("overlap {overlap} with capacity {capacity}"), e)
            })
    }

    /// The document's chunks in order; markdown is split along its structure.
    ///
    /// # Panics
    ///
    /// Never: the settings are checked before the text is cut.
    pub fn chunk(&self, document: &LoadedDocument) -> Result<Vec<ChunkSpan>> {
        let text = document.text.as_str();
        let markdown = document.format == Format::Markdown;
        // Checked once here; each window of the text gets a copy.
        self.chunk_config()?;
        let config = || self.chunk_config().expect("checked above");
        let windows = Windows::for_capacity(self.config.capacity);
        let pieces = match self.config.unit {
            ChunkUnit::Characters => split(config, text, markdown, windows),
            ChunkUnit::Tokens => {
                let sizer = DocumentTokens::new(text, &self.tokenizer)?;
                let config = || config().with_sizer(&sizer);
                split(config, text, markdown, windows)
            }
        };
        let mut headings = HeadingTracker::new(&document.headings);
        let mut spans: Vec<ChunkSpan> = pieces
            .into_iter()
            .map(|(byte_start, char_start, piece)| {
                let (heading_path, section) = headings.at(byte_start);
                ChunkSpan {
                    bytes: byte_start..byte_start + piece.len(),
                    chars: char_start..char_start + piece.chars().count(),
                    heading_path,
                    section,
                    seam_after: None,
                }
            })
            .collect();
        for i in 1..spans.len() {
            let kind = seam_kind(
                text,
                &spans[i - 1].bytes,
                &spans[i].bytes,
                &document.headings,
            );
            spans[i - 1].seam_after = Some(kind);
        }
        Ok(spans)
    }
}

/// Bytes of a document text-splitter is given at a time. It looks over the whole rest of its
/// text for every chunk it cuts, which takes time quadratic in a document's length (minutes for
/// tens of megabytes); over windows of this size it is linear.
const SPLIT_WINDOW_BYTES: usize = 256 * 1024;

/// Bytes given to text-splitter after a chunk handed its lead-ins on: only the next few chunks
/// are kept before the next lead-in, so a smaller window costs less.
const LEAD_IN_WINDOW_BYTES: usize = 16 * 1024;

/// How much of the text text-splitter is given at a time: `full` to begin with, `after_lead_in`
/// once a chunk's lead-ins made it start again.
#[derive(Debug, Clone, Copy)]
struct Windows {
    full: usize,
    after_lead_in: usize,
}

impl Windows {
    /// Windows holding many chunks of `capacity` units, each up to a few bytes.
    fn for_capacity(capacity: usize) -> Self {
        let least = capacity.saturating_mul(64);
        Self {
            full: SPLIT_WINDOW_BYTES.max(least),
            after_lead_in: LEAD_IN_WINDOW_BYTES.max(least),
        }
    }
}

/// The document's pieces, as (byte offset, char offset, text), cut window by window.
///
/// The chunks that end in the last quarter of a window may have been cut where they are by the
/// window's end rather than by the text: those are cut again from the first of them, as the
/// start of the next window. A chunk's end depends on the text within a few chunk lengths of
/// its start, so the pieces are those of the whole document cut at once.
///
/// A chunk that ends in lead-ins (paragraphs ending in a colon: see [`trailing_lead_ins`])
/// hands them to the next chunk, as the start of the next window, unless chunks overlap (the
/// next one repeats them then) or nothing follows.
fn split<S: ChunkSizer>(
    config: impl Fn() -> ChunkConfig<S>,
    text: &str,
    markdown: bool,
    windows: Windows,
) -> Vec<(usize, usize, &str)> {
    let hand_on_lead_ins = config().overlap() == 0;
    let mut pieces = Vec::new();
    let (mut start, mut chars_before) = (0, 0);
    let mut window = windows.full;
    // Once the watchdog gave up on this document, nobody waits for its pieces.
    while start < text.len() && !crate::watchdog::given_up() {
        let mut end = start.saturating_add(window).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let cut = split_whole(config(), &text[start..end], markdown);
        let mut settled = if end == text.len() {
            cut.len()
        } else {
            let settled_end = end - start - window / 4;
            // At least one piece, so that every window moves on.
            cut.iter()
                .take_while(|(offset, _, piece)| offset + piece.len() <= settled_end)
                .count()
                .max(1)
        };
        let lead_in = hand_on_lead_ins
            .then(|| {
                cut.iter()
                    .take(settled)
                    .enumerate()
                    .find_map(|(i, &(offset, _, piece))| {
                        let rest = &text[start + offset + piece.len()..];
                        trailing_lead_ins(piece)
                            .filter(|_| !rest.trim_start().is_empty())
                            .map(|lead_in| (i, lead_in))
                    })
            })
            .flatten();
        if let Some((i, _)) = lead_in {
            settled = i + 1;
        }
        pieces.extend(
            cut.iter()
                .take(settled)
                .map(|&(offset, chars, piece)| (start + offset, chars_before + chars, piece)),
        );
        let next = if let Some((i, lead_in)) = lead_in {
            let piece = pieces.last_mut().expect("the piece with the lead-ins");
            piece.2 = piece.2[..lead_in].trim_end();
            window = windows.after_lead_in;
            start + cut[i].0 + lead_in
        } else {
            window = windows.full;
            match cut.get(settled) {
                Some(&(offset, _, _)) => start + offset,
                None => cut.last().map_or(end, |&(offset, _, piece)| {
                    (start + offset + piece.len()).max(start + 1)
                }),
            }
        };
        let mut next = next.max(start + 1).min(text.len());
        while !text.is_char_boundary(next) {
            next += 1;
        }
        chars_before += text[start..next].chars().count();
        start = next;
    }
    pieces
}

fn split_whole<S: ChunkSizer>(
    config: ChunkConfig<S>,
    text: &str,
    markdown: bool,
) -> Vec<(usize, usize, &str)> {
    if markdown {
        collect(MarkdownSplitter::new(config).chunk_char_indices(text))
    } else {
        collect(TextSplitter::new(config).chunk_char_indices(text))
    }
}

/// Bytes of text tokenized at a time, so that a long document never holds one huge encoding.
const TOKENIZE_SEGMENT_BYTES: usize = 64 * 1024;

/// Sizes candidate chunks of one document from a single tokenization of the whole document.
///
/// text-splitter asks for the size of many overlapping candidates, and encoding each anew took
/// about a fifth of indexing time. A candidate's size here is the number of the document's
/// tokens that lie inside it: the same as its own count whenever it starts and ends between
/// words, which is where text-splitter cuts (`WordPiece` and byte-level BPE split words apart
/// before anything else).
///
/// A word longer than `WordPiece` reads (`max_input_chars_per_word`: a hash, base64, a minified
/// line) becomes one unknown token however long it is; counted as one, a 5 MB word would be one
/// chunk. Such a word counts one token per character, as a character-level tokenizer would see
/// it, so that it is cut like any other text.
struct DocumentTokens<'t> {
    text: &'t str,
    /// Byte range of every token of the text, in order.
    spans: Vec<(usize, usize)>,
    /// Tokens counted before each token (one more entry than `spans`).
    counted_before: Vec<usize>,
    tokenizer: &'t Tokenizer,
}

impl<'t> DocumentTokens<'t> {
    fn new(text: &'t str, tokenizer: &'t Tokenizer) -> Result<Self> {
        let mut spans = Vec::new();
        let mut start = 0;
        while start < text.len() {
            // Segments end at whitespace, so no word is cut between two encodings.
            let mut end = (start + TOKENIZE_SEGMENT_BYTES).min(text.len());
            while end < text.len()
                && !(text.is_char_boundary(end) && text[end..].starts_with(char::is_whitespace))
            {
                end += 1;
            }
            let encoding = tokenizer
                .encode(&text[start..end], false)
                .map_err(|e| IndexError::bad_chunker("the tokenizer failed on the text", e))?;
            spans.extend(
                encoding
                    .get_offsets()
                    .iter()
                    .map(|&(s, e)| (start + s, start + e)),
            );
            start = end;
        }
        let longest_word = longest_readable_word(tokenizer);
        let mut counted_before = Vec::with_capacity(spans.len() + 1);
        let mut counted = 0;
        counted_before.push(counted);
        for &(s, e) in &spans {
            counted += Self::weight(&text[s..e], longest_word);
            counted_before.push(counted);
        }
        Ok(Self {
            text,
            spans,
            counted_before,
            tokenizer,
        })
    }

    /// Tokens a token's text counts for: one, or its characters for an unreadable long word.
    fn weight(token_text: &str, longest_word: Option<usize>) -> usize {
        let chars = token_text.chars().count();
        match longest_word {
            Some(limit) if chars > limit => chars,
            _ => 1,
        }
    }
}

/// The longest word the tokenizer reads; it turns a longer one into a single unknown token.
fn longest_readable_word(tokenizer: &Tokenizer) -> Option<usize> {
    match tokenizer.get_model() {
        ModelWrapper::WordPiece(model) => Some(model.max_input_chars_per_word),
        _ => None,
    }
}

impl ChunkSizer for DocumentTokens<'_> {
    fn size(&self, chunk: &str) -> usize {
        // text-splitter passes slices of the document: their address gives their offset.
        let start = (chunk.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        if start
            .checked_add(chunk.len())
            .is_none_or(|end| end > self.text.len())
        {
            return self.tokenizer.size(chunk);
        }
        let end = start + chunk.len();
        let first = self.spans.partition_point(|&(s, _)| s < start);
        let past_last = self.spans.partition_point(|&(_, e)| e <= end);
        let inside = self.counted_before[past_last.max(first)] - self.counted_before[first];
        // A long word cut by the chunk's edges counts the characters inside the chunk; a
        // normal token cut by them (never, where text-splitter cuts) counts nothing.
        let before = first.checked_sub(1).filter(|&i| i != past_last);
        let cut: usize = [Some(past_last), before]
            .into_iter()
            .flatten()
            .filter(|&i| {
                i < self.spans.len() && self.counted_before[i + 1] - self.counted_before[i] > 1
            })
            .map(|i| {
                let (s, e) = self.spans[i];
                self.text[s.clamp(start, end)..e.clamp(start, end)]
                    .chars()
                    .count()
            })
            .sum();
        inside + cut
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
            pages: Vec::new(),
            attachments: Vec::new(),
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

    /// About `bytes` of prose: paragraphs and sentences of many lengths, some words long.
    fn prose(bytes: usize) -> String {
        let words = [
            "tide",
            "harbour",
            "ferry",
            "kayak",
            "the",
            "of",
            "crane",
            "inspection",
        ];
        let mut state: u64 = 17;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) % n
        };
        let mut text = String::new();
        while text.len() < bytes {
            for _ in 0..=next(12) {
                for w in 0..3 + next(40) {
                    if w > 0 {
                        text.push(' ');
                    }
                    let word = words[next(words.len() as u64) as usize];
                    text.push_str(&word.repeat(1 + usize::from(next(50) == 0) * 30));
                }
                text.push_str(". ");
            }
            // Now and then an introduction, handed on to the next chunk.
            if next(30) == 0 {
                text.push_str("\n\nThe figures were:");
            }
            text.push_str(if next(5) == 0 { "\n" } else { "\n\n" });
        }
        text
    }

    /// The whole rest of the text at every cut.
    const WHOLE: Windows = Windows {
        full: usize::MAX,
        after_lead_in: usize::MAX,
    };

    fn windows(full: usize) -> Windows {
        Windows {
            full,
            after_lead_in: full / 4,
        }
    }

    #[test]
    fn cutting_window_by_window_gives_the_chunks_of_the_whole_text() {
        let text = prose(300_000);
        for (markdown, capacity, overlap) in [(false, 400, 0), (false, 1000, 120), (true, 600, 0)] {
            let config = || ChunkConfig::new(capacity).with_overlap(overlap).unwrap();
            let whole = split(config, &text, markdown, WHOLE);
            let windowed = split(config, &text, markdown, windows(16 * 1024));
            assert!(whole.len() > 300, "{}", whole.len());
            assert_eq!(windowed, whole, "markdown {markdown}, capacity {capacity}");
        }
    }

    #[test]
    fn japanese_and_hindi_are_cut_between_sentences() {
        let japanese = "各当事者は三十日前に書面で通知しなければなりません。通知は本社宛てに送ります。\
                        契約は通知の到着後に終了します！未払いの料金はどうなりますか？精算されます。";
        let hindi = "किसी भी पक्ष को तीस दिन पहले लिखित सूचना देनी होगी। सूचना मुख्य कार्यालय को भेजी जाएगी। \
                     सूचना मिलने के बाद अनुबंध समाप्त हो जाएगा॥ बकाया शुल्क का भुगतान किया जाएगा।";
        // Each capacity holds the longest sentence, never two.
        for (text, ends, capacity) in [
            (japanese, &['。', '！', '？'][..], 30),
            (hindi, &['।', '॥'][..], 60),
        ] {
            let doc = document(Format::Text, text, Vec::new());
            let chunks = characters(capacity).chunk(&doc).unwrap();
            assert!(chunks.len() >= 3, "{text}");
            for chunk in &chunks {
                let body = text[chunk.bytes.clone()].trim_end();
                assert!(body.ends_with(ends), "cut inside a sentence: {body:?}");
            }
        }
    }

    #[test]
    fn an_introduction_starts_the_chunk_of_what_it_introduces() {
        let text = "The trial ran for a year.\n\nOn the boundary queries SCAR achieved:\n\n\
                    92.8% recall against 96.7%.\n\nThe end.";
        let doc = document(Format::Text, text, Vec::new());
        let pieces = |chunker: Chunker| -> Vec<&str> {
            let chunks = chunker.chunk(&doc).unwrap();
            chunks.iter().map(|c| &text[c.bytes.clone()]).collect()
        };
        // text-splitter alone would end the first chunk with the introduction.
        let capacity = text.find("92.8").unwrap();
        let alone = split_whole(ChunkConfig::new(capacity), text, false);
        assert!(alone[0].2.ends_with("achieved:"), "{alone:?}");
        assert_eq!(
            pieces(characters(capacity)),
            [
                "The trial ran for a year.",
                "On the boundary queries SCAR achieved:\n\n92.8% recall against 96.7%.",
                "The end."
            ]
        );
        // Overlapping chunks repeat the end of each in the next: they are text-splitter's.
        let overlapping = Chunker::new(
            &ChunkerConfig {
                unit: ChunkUnit::Characters,
                capacity,
                overlap: 10,
                ..Default::default()
            },
            &Tokenizer::new(tokenizers::models::bpe::BPE::default()),
        )
        .unwrap();
        let theirs = split_whole(
            ChunkConfig::new(capacity).with_overlap(10).unwrap(),
            text,
            false,
        );
        let theirs: Vec<&str> = theirs.iter().map(|p| p.2).collect();
        assert_eq!(pieces(overlapping), theirs);
    }

    #[test]
    fn every_chunk_maps_back_into_the_text() {
        let text = "Ünïcode first sentence here. Second sentence follows it.\n\nA new paragraph — with dashes.";
        let doc = document(Format::Text, text, Vec::new());
        let chunks = characters(30).chunk(&doc).unwrap();
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
        let chunks = characters(20).chunk(&doc).unwrap();
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

    fn minilm_tokenizer() -> Tokenizer {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let tokenizer_file = root.join("models/all-MiniLM-L6-v2/tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_file).unwrap();
        // As the embedder hands it over: no truncation, no padding.
        tokenizer.with_truncation(None).unwrap();
        tokenizer.with_padding(None);
        tokenizer
    }

    /// The benchmark corpora (`../shared/data`) cut window by window, in token units, are cut
    /// as each whole document is: the evaluation's chunks do not depend on the window.
    #[test]
    fn the_corpora_cut_in_windows_as_whole_documents() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let Ok(entries) = std::fs::read_dir(root.join("../shared/data/corpora")) else {
            assert!(
                std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
                "SCAR_REQUIRE_TOOLS is set but ../shared/data/corpora is missing"
            );
            eprintln!("../shared/data/corpora is missing: skipped");
            return;
        };
        let tokenizer = minilm_tokenizer();
        let mut compared = 0;
        for path in entries.map(|entry| entry.unwrap().path()) {
            if path.extension().is_none_or(|e| e != "txt") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let sizer = DocumentTokens::new(&text, &tokenizer).unwrap();
            let config = || ChunkConfig::new(256).with_sizer(&sizer);
            let whole = split(config, &text, false, WHOLE);
            assert_eq!(
                split(config, &text, false, windows(24 * 1024)),
                whole,
                "{}",
                path.display()
            );
            compared += whole.len();
        }
        assert!(compared > 1000, "{compared} chunks compared");
    }

    /// The one-pass sizer cuts exactly where sizing every candidate with the tokenizer cuts.
    #[test]
    fn document_token_sizing_matches_encoding_each_candidate() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let tokenizer = minilm_tokenizer();
        let mut compared = 0;
        for entry in std::fs::read_dir(root.join("assets/example")).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap().repeat(3);
            let markdown = path.extension().is_some_and(|e| e == "md");
            let format = if markdown {
                Format::Markdown
            } else {
                Format::Text
            };
            for capacity in [24, 160] {
                let config = ChunkerConfig {
                    capacity,
                    ..ChunkerConfig::default()
                };
                let chunker = Chunker::new(&config, &tokenizer).unwrap();
                let ours: Vec<Range<usize>> = chunker
                    .chunk(&document(format, &text, Vec::new()))
                    .unwrap()
                    .into_iter()
                    .map(|c| c.bytes)
                    .collect();
                let reference = || ChunkConfig::new(capacity).with_sizer(&tokenizer);
                let theirs: Vec<Range<usize>> = split(reference, &text, markdown, WHOLE)
                    .into_iter()
                    .map(|(start, _, piece)| start..start + piece.len())
                    .collect();
                assert_eq!(ours, theirs, "{} at {capacity}", path.display());
                compared += ours.len();
            }
        }
        assert!(compared > 50, "{compared} chunks compared");
    }

    /// A word longer than the tokenizer reads is one unknown token to it, but is cut like text.
    #[test]
    fn words_too_long_for_the_tokenizer_are_cut_by_characters() {
        let word = "QmFzZTY0".repeat(2_500);
        let text = format!("A short sentence before it. {word} And one after it.");
        let config = ChunkerConfig {
            capacity: 64,
            ..ChunkerConfig::default()
        };
        let chunks = Chunker::new(&config, &minilm_tokenizer())
            .unwrap()
            .chunk(&document(Format::Text, &text, Vec::new()))
            .unwrap();
        assert!(chunks.len() >= word.len() / 64, "{} chunks", chunks.len());
        for chunk in &chunks {
            assert!(chunk.chars.len() <= 64, "{:?}", chunk.chars);
        }
        assert_eq!(chunks.first().unwrap().bytes.start, 0);
        assert_eq!(chunks.last().unwrap().bytes.end, text.len());
    }

    #[test]
    fn settings_text_splitter_refuses_keep_its_error() {
        use std::error::Error;

        let config = ChunkerConfig {
            unit: ChunkUnit::Characters,
            capacity: 10,
            overlap: 20,
            ..Default::default()
        };
        let tokenizer = Tokenizer::new(tokenizers::models::bpe::BPE::default());
        let error = Chunker::new(&config, &tokenizer).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid chunker settings: overlap 20 with capacity 10"
        );
        assert!(error.source().is_some());
        let empty = ChunkerConfig {
            capacity: 0,
            ..config
        };
        let error = Chunker::new(&empty, &tokenizer).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid chunker settings: capacity must be at least 1"
        );
        assert!(error.source().is_none());
    }
}
