//! Text that others wrote (documents, their file names, answers, servers' replies) made safe to
//! print on a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character a terminal would act on shown as an escape instead: the C0
/// controls but line feed and tab (`\x1b`, `\x07`, a carriage return not ending a line as
/// `\x0d`), DEL (`\x7f`) and the C1 controls (`\u{9b}`). Escape sequences in a document (a
/// window title, a cleared screen, hidden text, a hyperlink) then print as the text they are.
pub fn inert(text: &str) -> Cow<'_, str> {
    let acts = |at: usize, c: char| {
        c.is_control() && c != '\n' && c != '\t' && !(c == '\r' && text[at..].starts_with("\r\n"))
    };
    if !text.char_indices().any(|(at, c)| acts(at, c)) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for (at, c) in text.char_indices() {
        if !acts(at, c) {
            shown.push(c);
        } else if c.is_ascii() {
            let _ = write!(shown, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_and_text_is_kept() {
        assert!(matches!(
            inert("plain\ttext\nand lines\r\n"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            inert("\u{1b}]0;title\u{7}a\u{1b}[2Jb\u{7f}c\u{9b}31md\re\u{0}"),
            r"\x1b]0;title\x07a\x1b[2Jb\x7fc\u{9b}31md\x0de\x00"
        );
        assert_eq!(inert("é ≠ \u{85}"), r"é ≠ \u{85}");
    }
}
