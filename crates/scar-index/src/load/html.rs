//! HTML, turned into plain text with its `<h1>`–`<h6>` headings.

use super::{Heading, collapse_whitespace};

/// Turns HTML into readable text with a single loop over the markup (no recursion, so any depth
/// of nesting is safe). Hidden elements and comments are dropped, block elements become line
/// breaks, whitespace collapses outside `<pre>`, and `<h1>`–`<h6>` become headings.
///
/// `<head>` needs no special case: its only text-bearing children are `<title>`, which is kept as
/// the first paragraph, and `<script>`/`<style>`, which are hidden.
pub(super) fn to_text(html: &str) -> (String, Vec<Heading>) {
    // ASCII lowercasing keeps byte offsets, so positions found in `lower` index `html` too.
    let lower = html.to_ascii_lowercase();
    let mut out = TextWriter::default();
    let mut pos = 0;
    while let Some(found) = html[pos..].find('<') {
        let start = pos + found;
        out.push_text(&html[pos..start]);
        pos = out.markup(html, &lower, start);
    }
    out.push_text(&html[pos..]);
    (out.text, out.headings)
}

/// Elements whose content is never shown as text.
const HIDDEN_ELEMENTS: &[&str] = &["script", "style", "noscript", "template"];

/// Accumulates visible text, deferring whitespace and line breaks until the next visible
/// character so that runs of them collapse and none trail at the end.
#[derive(Default)]
struct TextWriter {
    text: String,
    headings: Vec<Heading>,
    pending_space: bool,
    pending_newlines: usize,
    preformatted_depth: usize,
    /// The open `<hN>`'s level and where its text starts, once it has some.
    open_heading: Option<(u8, Option<usize>)>,
}

impl TextWriter {
    /// Handles the markup that starts at `html[start] == '<'`; returns where text resumes.
    fn markup(&mut self, html: &str, lower: &str, start: usize) -> usize {
        let after = start + 1;
        if lower[after..].starts_with("!--") {
            return find_after(lower, after, "-->");
        }
        if lower[after..].starts_with(['!', '?']) {
            return find_after(lower, after, ">");
        }
        let closing = lower[after..].starts_with('/');
        let name_start = after + usize::from(closing);
        if !lower[name_start..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            self.push_char('<');
            return after;
        }
        let name_len = lower[name_start..]
            .bytes()
            .take_while(u8::is_ascii_alphanumeric)
            .count();
        let name = &lower[name_start..name_start + name_len];
        let end = tag_end(html, name_start + name_len);
        if closing {
            self.end_tag(name);
        } else if HIDDEN_ELEMENTS.contains(&name) {
            return find_after(lower, find_after(lower, end, &format!("</{name}")), ">");
        } else {
            self.start_tag(name);
        }
        end
    }

    fn start_tag(&mut self, name: &str) {
        if let Some(level) = heading_level(name) {
            self.finish_heading();
            self.open_heading = Some((level, None));
        }
        if name == "pre" {
            self.preformatted_depth += 1;
        }
        self.separate(name);
    }

    fn end_tag(&mut self, name: &str) {
        if heading_level(name).is_some() {
            self.finish_heading();
        }
        if name == "pre" {
            self.preformatted_depth = self.preformatted_depth.saturating_sub(1);
        }
        self.separate(name);
    }

    /// The break an element puts between its content and what surrounds it.
    fn separate(&mut self, name: &str) {
        match name {
            "br" | "li" | "tr" | "dt" | "dd" | "option" | "caption" => self.break_lines(1),
            "td" | "th" => self.pending_space = true,
            "p" | "div" | "title" | "section" | "article" | "header" | "footer" | "nav"
            | "main" | "aside" | "blockquote" | "pre" | "table" | "ul" | "ol" | "dl" | "hr"
            | "figure" | "figcaption" | "form" | "fieldset" | "details" | "summary" | "address"
            | "body" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => self.break_lines(2),
            _ => {}
        }
    }

    fn break_lines(&mut self, count: usize) {
        self.pending_newlines = self.pending_newlines.max(count);
    }

    fn finish_heading(&mut self) {
        if let Some((level, Some(offset))) = self.open_heading.take() {
            let title = collapse_whitespace(&self.text[offset..]);
            self.headings.push(Heading {
                offset,
                level,
                title,
            });
        }
    }

    /// Pushes text between tags, decoding character references.
    fn push_text(&mut self, mut text: &str) {
        while let Some(amp) = text.find('&') {
            text[..amp].chars().for_each(|c| self.push_char(c));
            text = &text[amp + 1..];
            match decode_entity(text) {
                Some((c, len)) => {
                    self.push_char(c);
                    text = &text[len..];
                }
                None => self.push_char('&'),
            }
        }
        text.chars().for_each(|c| self.push_char(c));
    }

    fn push_char(&mut self, c: char) {
        if c.is_whitespace() && self.preformatted_depth == 0 {
            self.pending_space = true;
            return;
        }
        if !self.text.is_empty() {
            if self.pending_newlines > 0 {
                self.text
                    .extend(std::iter::repeat_n('\n', self.pending_newlines));
            } else if self.pending_space {
                self.text.push(' ');
            }
        }
        self.pending_newlines = 0;
        self.pending_space = false;
        if let Some((_, start @ None)) = &mut self.open_heading {
            *start = Some(self.text.len());
        }
        self.text.push(c);
    }
}

fn heading_level(name: &str) -> Option<u8> {
    match name.as_bytes() {
        [b'h', digit @ b'1'..=b'6'] => Some(digit - b'0'),
        _ => None,
    }
}

/// The position just past the first `needle` at or after `from`, or the end of `haystack`.
fn find_after(haystack: &str, from: usize, needle: &str) -> usize {
    haystack[from..]
        .find(needle)
        .map_or(haystack.len(), |i| from + i + needle.len())
}

/// The position just past the `>` that closes a tag, skipping `>` inside quoted attributes.
fn tag_end(html: &str, from: usize) -> usize {
    let mut quote = None;
    for (i, byte) in html.bytes().enumerate().skip(from) {
        match (quote, byte) {
            (None, b'>') => return i + 1,
            (None, b'"' | b'\'') => quote = Some(byte),
            (Some(open), _) if open == byte => quote = None,
            _ => {}
        }
    }
    html.len()
}

/// Decodes the character reference at the start of `text` (just after its `&`), returning the
/// character and the length consumed, `;` included.
fn decode_entity(text: &str) -> Option<(char, usize)> {
    let end = text.bytes().take(32).position(|b| b == b';')?;
    let name = &text[..end];
    let c = if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        char::from_u32(code)
            .filter(|&c| c != '\0')
            .unwrap_or(char::REPLACEMENT_CHARACTER)
    } else {
        named_entity(name)?
    };
    Some((c, end + 1))
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "sect" => '§',
        "para" => '¶',
        "deg" => '°',
        "times" => '×',
        "euro" => '€',
        "pound" => '£',
        "hellip" => '…',
        "ndash" => '–',
        "mdash" => '—',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "bull" => '•',
        "middot" => '·',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::load::Format;
    use crate::load::tests::{assert_offsets_match, load, titles};

    #[test]
    fn html_becomes_readable_text_with_headings() {
        let html = "<!DOCTYPE html><html><head><title>Guide</title>\
            <style>body { color: red }</style><script>if (a < b) { x = '</p>' }</script></head>\
            <body><!-- a comment <p>hidden</p> -->\
            <h1 class=\"x>y\">Caf&bogus;s &amp; Bars</h1>\
            <p>Fish   &lt;&gt; chips&nbsp;&#39;n&#x27; &quot;peas&quot;\n and more</p>\
            <ul><li>one</li><li>two<br>three</li></ul>\
            <H2>Prices &#8364;</H2><table><tr><td>a</td><td>b</td></tr></table>\
            <pre>keep   this\n  layout</pre>1 < 2</body></html>";
        let document = load("guide.html", html).unwrap();
        assert_eq!(document.format, Format::Html);
        assert_eq!(
            document.text,
            "Guide\n\nCaf&bogus;s & Bars\n\nFish <> chips 'n' \"peas\" and more\n\n\
             one\ntwo\nthree\n\nPrices €\n\na b\n\nkeep   this\n  layout\n\n1 < 2"
        );
        assert_eq!(
            titles(&document.headings),
            [(1, "Caf&bogus;s & Bars"), (2, "Prices €")]
        );
        assert_offsets_match(&document);
    }

    #[test]
    fn deeply_nested_html_loads_quickly() {
        let depth = 100_000;
        let html = format!(
            "{}deep text{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let started = Instant::now();
        let document = load("deep.htm", html).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(document.text, "deep text");
    }
}
