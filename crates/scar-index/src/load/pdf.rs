//! PDF, read through its text layer; a reader that fails or panics makes a corrupt file, not a
//! crash.

use std::cell::Cell;
use std::panic::{self, UnwindSafe};
use std::sync::Once;

use super::LoadError;

/// The text of the PDF's text layer; a reader that fails or panics makes a corrupt PDF, and so
/// does an empty text layer when the pages cannot be read.
pub(super) fn text(bytes: &[u8]) -> Result<String, LoadError> {
    match catch_panic_quietly(|| pdf_extract::extract_text_from_mem(bytes)) {
        Ok(Ok(text)) if text.trim().is_empty() => Err(why_no_text(bytes)),
        Ok(Ok(text)) => Ok(text),
        Ok(Err(error)) => Err(LoadError::CorruptPdf(error.to_string())),
        Err(panic) => Err(LoadError::CorruptPdf(format!(
            "the PDF reader failed ({panic})"
        ))),
    }
}

/// Why a PDF gave no text: its pages draw none (scanned images), or they could not be read at
/// all (the text extractor reads a damaged file as one without text).
fn why_no_text(bytes: &[u8]) -> LoadError {
    let pages_readable = catch_panic_quietly(|| -> Result<(), String> {
        let document = pdf_extract::Document::load_mem(bytes).map_err(|e| e.to_string())?;
        let pages = document.get_pages();
        if pages.is_empty() {
            return Err("no page could be read".to_owned());
        }
        for (number, &page) in &pages {
            for content in document.get_page_contents(page) {
                document
                    .get_object(content)
                    .map_err(|e| format!("page {number}'s content: {e}"))?;
            }
        }
        Ok(())
    });
    match pages_readable {
        Ok(Ok(())) => LoadError::PdfNoText,
        Ok(Err(reason)) => LoadError::CorruptPdf(reason),
        Err(panic) => LoadError::CorruptPdf(format!("the PDF reader failed ({panic})")),
    }
}

thread_local! {
    static SILENCE_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic into `Err(message)` without printing it. PDF parsers panic on
/// malformed files, and a corrupt file should be a skipped file, not a crash or a stack trace.
///
/// The panic hook is process-wide, so instead of swapping it around each call (which races
/// when files load on several threads), one wrapper is installed that stays quiet only on
/// threads inside this function and otherwise defers to the hook it replaced.
fn catch_panic_quietly<T>(f: impl FnOnce() -> T + UnwindSafe) -> Result<T, String> {
    static INSTALL_HOOK: Once = Once::new();
    INSTALL_HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !SILENCE_PANICS.get() {
                previous(info);
            }
        }));
    });
    SILENCE_PANICS.set(true);
    let result = panic::catch_unwind(f);
    SILENCE_PANICS.set(false);
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned())
    })
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::*;
    use crate::load::tests::load;
    use crate::load::{Format, content_hash};

    /// A one-page PDF whose page draws `content` with Helvetica, with a correct xref table.
    fn pdf_with_page_content(content: &str) -> Vec<u8> {
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R \
             /Resources << /Font << /F1 5 0 R >> >> >>"
                .to_owned(),
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            ),
            "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
        ];
        let mut pdf = String::from("%PDF-1.4\n");
        let mut offsets = Vec::new();
        for (number, body) in (1..).zip(&objects) {
            offsets.push(pdf.len());
            writeln!(pdf, "{number} 0 obj\n{body}\nendobj").unwrap();
        }
        let xref_offset = pdf.len();
        let count = objects.len() + 1;
        writeln!(pdf, "xref\n0 {count}\n0000000000 65535 f ").unwrap();
        for offset in offsets {
            writeln!(pdf, "{offset:010} 00000 n ").unwrap();
        }
        writeln!(
            pdf,
            "trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref_offset}\n%%EOF"
        )
        .unwrap();
        pdf.into_bytes()
    }

    #[test]
    fn pdf_text_layer_is_extracted() {
        let pdf = pdf_with_page_content("BT /F1 12 Tf 72 720 Td (Hello PDF) Tj ET");
        let document = load("hello.pdf", &pdf).unwrap();
        assert_eq!(document.format, Format::Pdf);
        assert_eq!(document.text.trim(), "Hello PDF");
        assert_eq!(document.hash, content_hash(&pdf));
        // Sniffed by its header when the extension does not say.
        assert_eq!(load("hello", &pdf).unwrap().format, Format::Pdf);
    }

    #[test]
    fn pdf_without_text_is_refused() {
        let error = load("scan.pdf", pdf_with_page_content("")).unwrap_err();
        assert!(matches!(error, LoadError::PdfNoText), "{error:?}");
        assert_eq!(error.to_string(), "PDF has no text layer (scanned images?)");
    }

    #[test]
    fn corrupt_pdf_is_refused() {
        let garbage =
            b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R\n\xE2\xE3\xCF\xD3 garbage";
        let error = load("broken.pdf", garbage).unwrap_err();
        assert!(matches!(error, LoadError::CorruptPdf(_)), "{error:?}");
        assert!(error.to_string().starts_with("corrupt PDF: "));
    }

    #[test]
    fn a_pdf_whose_pages_cannot_be_read_is_corrupt_not_without_text() {
        let good = String::from_utf8(pdf_with_page_content(
            "BT /F1 12 Tf 72 720 Td (Hello PDF) Tj ET",
        ))
        .unwrap();
        // Every object's offset in the cross-reference table points into the header.
        let lost_objects = good
            .lines()
            .map(|line| {
                if line.ends_with(" 00000 n ") {
                    "0000000003 00000 n "
                } else {
                    line
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        // The page's content stream names an object the file does not hold.
        let lost_content = good.replace("/Contents 4 0 R", "/Contents 9 0 R");
        for (what, pdf) in [
            ("lost objects", lost_objects),
            ("lost content", lost_content),
        ] {
            let error = load("broken.pdf", pdf.as_bytes()).unwrap_err();
            assert!(
                matches!(error, LoadError::CorruptPdf(_)),
                "{what}: {error:?}"
            );
        }
    }

    #[test]
    fn panics_become_errors() {
        let result = catch_panic_quietly(|| -> u8 { panic!("bad xref") });
        assert_eq!(result, Err("bad xref".to_owned()));
        assert_eq!(catch_panic_quietly(|| 7), Ok(7));
        assert!(!SILENCE_PANICS.get());
    }
}
