//! Which language a document is written in, told from its text when it is indexed.

/// Characters read to tell a document's language: enough for a confident guess, cheap on a
/// book.
const SAMPLE_CHARS: usize = 10_000;

/// The language `text` is mostly written in, as its ISO 639-3 code (`eng`, `hin`, `jpn`), or
/// `None` when the text is too short or too mixed to tell reliably.
#[must_use]
pub fn detect_language(text: &str) -> Option<&'static str> {
    let end = text
        .char_indices()
        .nth(SAMPLE_CHARS)
        .map_or(text.len(), |(at, _)| at);
    whatlang::detect(&text[..end])
        .filter(whatlang::Info::is_reliable)
        .map(|info| info.lang().code())
}

/// The English name of the language whose ISO 639-3 code is `code` (`hin`: `Hindi`), for the
/// languages [`detect_language`] tells.
#[must_use]
pub fn language_name(code: &str) -> Option<&'static str> {
    whatlang::Lang::from_code(code).map(whatlang::Lang::eng_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_hindi_and_japanese_are_told_apart() {
        assert_eq!(
            detect_language(
                "Either party may end this agreement by giving thirty days' written notice to \
                 the other party at its registered office."
            ),
            Some("eng")
        );
        assert_eq!(
            detect_language(
                "किसी भी पक्ष को अनुबंध समाप्त करने से तीस दिन पहले लिखित सूचना देनी होगी। \
                 बकाया शुल्क का भुगतान समाप्ति के दस दिनों के भीतर किया जाएगा।"
            ),
            Some("hin")
        );
        assert_eq!(
            detect_language(
                "各当事者は、契約を終了する三十日前までに書面で通知しなければなりません。\
                 未払いの料金は、終了日から十日以内に精算されます。"
            ),
            Some("jpn")
        );
        assert_eq!(language_name("hin"), Some("Hindi"));
    }

    #[test]
    fn too_little_text_tells_nothing() {
        assert_eq!(detect_language(""), None);
        assert_eq!(detect_language("42"), None);
    }
}
