//! PDF, read through its text layer; a reader that fails or panics makes a corrupt file, not a
//! crash, and a file whose streams inflate past the size limit is refused before it is read.

use std::io::Read;

use flate2::read::ZlibDecoder;

use super::{LoadError, ocr};
use crate::error::catch_panic_quietly;

/// The text of the PDF's text layer, page by page, and the byte offset in it where each page
/// starts; pages without one (scanned pages bound in with typed ones) are read by OCR. A reader
/// that fails or panics makes a corrupt PDF, and so does an empty text layer when the pages
/// cannot be read.
pub(super) fn text(
    bytes: &[u8],
    limit: u64,
    warnings: &mut Vec<String>,
) -> Result<(String, Vec<usize>), LoadError> {
    if inflated_size(bytes, limit) > limit {
        return Err(LoadError::PdfInflatesTooLarge { limit });
    }
    match catch_panic_quietly(|| page_texts(bytes)) {
        Ok(Ok(pages)) if pages.iter().all(|page| page.trim().is_empty()) => {
            match why_no_text(bytes) {
                LoadError::PdfNoText => scanned_text(bytes, warnings),
                damaged => Err(damaged),
            }
        }
        Ok(Ok(pages)) => Ok(joined(&with_scanned_pages(bytes, pages, warnings))),
        Ok(Err(error)) => Err(LoadError::CorruptPdf(Box::new(error))),
        // The panic's message is the reader's only word on the file.
        Err(panic) => Err(LoadError::CorruptPdf(
            format!("the PDF reader failed ({panic})").into(),
        )),
    }
}

/// The text layer of each page, in page order.
fn page_texts(bytes: &[u8]) -> Result<Vec<String>, pdf_extract::OutputError> {
    let mut document = pdf_extract::Document::load_mem(bytes)?;
    if document.is_encrypted() {
        // Encrypted only to restrict printing or copying: the empty password opens it, as it
        // does in every viewer.
        document.decrypt("")?;
    }
    let numbers: Vec<u32> = document.get_pages().into_keys().collect();
    numbers
        .into_iter()
        .map(|number| {
            if crate::watchdog::given_up() {
                return Err(crate::watchdog::stopped().into());
            }
            let mut text = String::new();
            let mut output = pdf_extract::PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&document, &mut output, number)?;
            Ok(text)
        })
        .collect()
}

/// The pages laid end to end, and the offset where each starts.
fn joined(pages: &[String]) -> (String, Vec<usize>) {
    let mut text = String::with_capacity(pages.iter().map(String::len).sum());
    let mut starts = Vec::with_capacity(pages.len());
    for page in pages {
        starts.push(text.len());
        text.push_str(page);
    }
    (text, starts)
}

/// A page read by OCR, set apart from its neighbours as a page of the text layer is.
fn ocr_page(text: &str) -> String {
    format!("\n\n{}\n\n", text.trim())
}

/// The pages, those without a text layer read by OCR where it is installed; a warning names
/// the pages read that way, or left out.
fn with_scanned_pages(
    bytes: &[u8],
    mut pages: Vec<String>,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let empty: Vec<usize> = (1..=pages.len())
        .filter(|&number| pages[number - 1].trim().is_empty())
        .collect();
    if !empty.is_empty() {
        let numbers = empty
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        match ocr::pdf_pages_text(bytes, &empty, &ocr::OcrTools::default()) {
            Ok(texts) => {
                let read: Vec<String> = empty
                    .iter()
                    .zip(texts)
                    .filter(|(_, text)| !text.trim().is_empty())
                    .map(|(&number, text)| {
                        pages[number - 1] = ocr_page(&text);
                        number.to_string()
                    })
                    .collect();
                if !read.is_empty() {
                    warnings.push(format!(
                        "page(s) {} had no text layer: read by OCR (tesseract)",
                        read.join(", ")
                    ));
                }
            }
            Err(LoadError::PdfNeedsOcr) => warnings.push(format!(
                "page(s) {numbers} have no text layer and were left out; to read them, \
                 install tesseract-ocr and poppler-utils"
            )),
            Err(error) => warnings.push(format!(
                "page(s) {numbers} have no text layer, and OCR failed on them: {error}"
            )),
        }
    }
    pages
}

/// The text of a PDF whose pages are images, by OCR, with a warning that says so.
fn scanned_text(
    bytes: &[u8],
    warnings: &mut Vec<String>,
) -> Result<(String, Vec<usize>), LoadError> {
    let pages = ocr::pdf_text(bytes, &ocr::OcrTools::default())?;
    if pages.iter().all(|page| page.trim().is_empty()) {
        return Err(LoadError::PdfNoText);
    }
    warnings.push(format!(
        "no text layer: the text of its {} page(s) was read by OCR (tesseract)",
        pages.len()
    ));
    let pages: Vec<String> = pages.iter().map(|page| ocr_page(page)).collect();
    Ok(joined(&pages))
}

/// What the PDF's zlib-compressed streams inflate to, in total, counted up to just past `limit`
/// with a fixed buffer: the PDF reader holds every inflated stream, so a 2 MB file whose streams
/// inflate to 2 GB would take 2 GB. The scan finds streams by their keywords, as a PDF reader
/// recovering a damaged file does, so it needs no parse; streams that are not zlib data (images,
/// or bytes that merely look like a stream) stop inflating at their first error.
fn inflated_size(bytes: &[u8], limit: u64) -> u64 {
    let mut total = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut rest = bytes;
    while let Some(data) = next_stream(&mut rest) {
        let mut decoder = ZlibDecoder::new(data);
        while let Ok(read @ 1..) = decoder.read(&mut buffer) {
            total += read as u64;
            if total > limit {
                return total;
            }
        }
    }
    total
}

/// The data of the next `stream … endstream` in `rest`, advancing `rest` past it. The keyword
/// counts where the syntax puts it: after a dictionary's `>>` and before an end of line, so that
/// the word inside a string or in `endstream` does not start a stream.
fn next_stream<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let mut from = 0;
    loop {
        let at = from + find(&rest[from..], b"stream")?;
        from = at + b"stream".len();
        let after = &rest[from..];
        let eol = if after.starts_with(b"\r\n") {
            2
        } else if after.starts_with(b"\n") {
            1
        } else {
            continue;
        };
        if !rest[..at].trim_ascii_end().ends_with(b">>") {
            continue;
        }
        let data = &rest[from + eol..];
        let length = find(data, b"endstream").unwrap_or(data.len());
        *rest = &data[length..];
        return Some(&data[..length]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
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
        Ok(Err(reason)) => LoadError::CorruptPdf(reason.into()),
        Err(panic) => LoadError::CorruptPdf(format!("the PDF reader failed ({panic})").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::test_pdf::{pdf_text_page, pdf_with_pages};
    use crate::load::tests::load;
    use crate::load::{Format, content_hash};

    /// A one-page PDF whose page draws `content` with Helvetica, with a correct xref table.
    fn pdf_with_page_content(content: &str) -> Vec<u8> {
        pdf_with_pages(&[content])
    }

    #[test]
    fn each_page_starts_where_its_text_does() {
        let words = ["Harbour fees", "Mooring rules", "Crane hire"];
        let contents = words.map(|w| pdf_text_page(&[w]));
        let pdf = pdf_with_pages(&contents.each_ref().map(String::as_str));
        let document = load("rules.pdf", &pdf).unwrap();
        assert_eq!(document.pages.len(), 3, "{document:?}");
        assert_eq!(document.pages[0], 0);
        for (page, word) in words.iter().enumerate() {
            let start = document.pages[page];
            let end = document
                .pages
                .get(page + 1)
                .copied()
                .unwrap_or(document.text.len());
            assert_eq!(document.text[start..end].trim(), *word, "page {}", page + 1);
        }
        // Formats without pages have none.
        assert!(load("notes.txt", b"Crane hire").unwrap().pages.is_empty());
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
    fn pdf_without_text_is_read_by_ocr_and_refused_when_that_finds_none() {
        let error = load("scan.pdf", pdf_with_page_content("")).unwrap_err();
        let ocr_installed = ["pdftoppm", "tesseract"].iter().all(|program| {
            std::process::Command::new(program)
                .arg("-v")
                .output()
                .is_ok()
        });
        if ocr_installed {
            assert!(matches!(error, LoadError::PdfNoText), "{error:?}");
            assert_eq!(
                error.to_string(),
                "PDF has no text layer, and OCR found no text on its pages"
            );
        } else {
            assert!(matches!(error, LoadError::PdfNeedsOcr), "{error:?}");
        }
    }

    #[test]
    fn corrupt_pdf_is_refused() {
        let garbage =
            b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R\n\xE2\xE3\xCF\xD3 garbage";
        let error = load("broken.pdf", garbage).unwrap_err();
        assert!(matches!(error, LoadError::CorruptPdf(_)), "{error:?}");
        assert!(
            scar_core::ErrorChain(&error)
                .to_string()
                .starts_with("corrupt PDF: ")
        );
    }

    /// A valid PDF with one more stream: `inflated` zero bytes, deflated.
    fn pdf_with_compressed_stream(inflated: usize) -> Vec<u8> {
        use std::io::Write as _;
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&vec![0u8; inflated]).unwrap();
        let deflated = encoder.finish().unwrap();
        let mut pdf = pdf_with_page_content("BT /F1 12 Tf 72 720 Td (Hello PDF) Tj ET");
        let mut object = format!(
            "6 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
            deflated.len()
        )
        .into_bytes();
        object.extend(deflated);
        object.extend(b"\nendstream\nendobj\n");
        // Before the xref table: an unreferenced object the reader may skip, but the scan may not.
        let xref = pdf.windows(5).position(|w| w == b"xref\n").unwrap();
        pdf.splice(xref..xref, object);
        pdf
    }

    #[test]
    fn streams_inflating_past_the_limit_are_refused_before_reading() {
        let pdf = pdf_with_compressed_stream(4 * 1024 * 1024);
        assert!(pdf.len() < 16 * 1024, "{} bytes", pdf.len());
        let error = text(&pdf, 1024 * 1024, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(error, LoadError::PdfInflatesTooLarge { limit: 1_048_576 }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "PDF streams inflate past the 1 MiB limit; raise --max-file-mib to index it"
        );
        assert_eq!(inflated_size(&pdf, u64::MAX), 4 * 1024 * 1024);
    }

    #[test]
    fn the_stream_scan_skips_the_keyword_outside_stream_syntax() {
        let mut rest: &[u8] = b"(mainstream\n) endstream\n<< /L 3 >>\r\nstream\r\nabc\nendstream";
        assert_eq!(next_stream(&mut rest), Some(&b"abc\n"[..]));
        assert_eq!(next_stream(&mut rest), None);
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
        let lost_content = good.replace("/Contents 5 0 R", "/Contents 9 0 R");
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
}
