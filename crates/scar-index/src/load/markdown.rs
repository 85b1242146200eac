//! Markdown, kept as written: ATX and setext headings outside fenced code.

use super::{Heading, lines_with_offsets};

/// ATX (`## Title`) and single-line setext (`Title` over `===`) headings outside fenced code.
pub(super) fn headings(text: &str) -> Vec<Heading> {
    let mut headings = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut previous_blank = true;
    // A line that starts a paragraph, which a setext underline on the next line makes a heading.
    let mut paragraph_start: Option<(usize, &str)> = None;
    for (offset, line) in lines_with_offsets(text) {
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        let setext_title = paragraph_start.take();
        if let Some((marker, length)) = fence {
            if fence_marker(trimmed).is_some_and(|(m, n)| m == marker && n >= length)
                && trimmed.trim_start_matches(marker).is_empty()
            {
                fence = None;
            }
        } else if indent > 3 {
            // Indented code or a paragraph's continuation: never a heading.
        } else if let Some(opening) = fence_marker(trimmed) {
            fence = Some(opening);
        } else if let Some((level, title)) = atx_heading(trimmed) {
            headings.push(Heading {
                offset,
                level,
                title: title.to_owned(),
            });
        } else if let Some(level) = setext_level(trimmed) {
            if let Some((offset, title)) = setext_title {
                headings.push(Heading {
                    offset,
                    level,
                    title: title.to_owned(),
                });
            }
        } else if previous_blank && !trimmed.is_empty() {
            paragraph_start = Some((offset, trimmed));
        }
        previous_blank = trimmed.is_empty();
    }
    headings
}

/// A code fence: three or more backticks or tildes, giving the character and count.
fn fence_marker(trimmed: &str) -> Option<(char, usize)> {
    let marker = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let length = trimmed.len() - trimmed.trim_start_matches(marker).len();
    (length >= 3).then_some((marker, length))
}

fn atx_heading(trimmed: &str) -> Option<(u8, &str)> {
    let rest = trimmed.trim_start_matches('#');
    let level = trimmed.len() - rest.len();
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let title = rest.trim();
    // A closing run of `#` is decoration only when a space separates it, as in `# C#` it is not.
    let without_closing = title.trim_end_matches('#');
    let title = if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        title
    };
    (!title.is_empty()).then_some((level as u8, title))
}

fn setext_level(trimmed: &str) -> Option<u8> {
    match trimmed.chars().next()? {
        '=' if trimmed.bytes().all(|b| b == b'=') => Some(1),
        '-' if trimmed.bytes().all(|b| b == b'-') => Some(2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::load::Format;
    use crate::load::tests::{assert_offsets_match, load, titles};

    #[test]
    fn markdown_headings_skip_fenced_code() {
        let text = "\
# Title

Intro text.

```sh
# not a heading
~~~
## still code
```

## Usage ##

Setext Heading
--------------

~~~~
# code
~~~~

#hashtag is not a heading
### C#
";
        let document = load("README.md", text).unwrap();
        assert_eq!(document.format, Format::Markdown);
        assert_eq!(document.text, text);
        assert_eq!(
            titles(&document.headings),
            [(1, "Title"), (2, "Usage"), (2, "Setext Heading"), (3, "C#")]
        );
        assert_offsets_match(&document);
    }
}
