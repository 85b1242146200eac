//! PDFs built for tests: pages of text drawn in Helvetica, with a correct cross-reference
//! table. Shared by scar-index's tests and, through scar-test-support, the other crates'.

/// A PDF with a page for each of `contents` (content streams; Helvetica is font `/F1`), with a
/// correct cross-reference table.
#[must_use]
pub fn pdf_with_pages(contents: &[&str]) -> Vec<u8> {
    use std::fmt::Write as _;

    // Objects 1-3: the catalog, the page tree and the font; then each page and its content.
    let kids: Vec<String> = (0..contents.len())
        .map(|i| format!("{} 0 R", 4 + 2 * i))
        .collect();
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            kids.join(" "),
            contents.len()
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
    ];
    for (i, content) in contents.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {} 0 R \
             /Resources << /Font << /F1 3 0 R >> >> >>",
            5 + 2 * i
        ));
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    let mut pdf = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (number, body) in (1..).zip(&objects) {
        offsets.push(pdf.len());
        let _ = writeln!(pdf, "{number} 0 obj\n{body}\nendobj");
    }
    let xref_offset = pdf.len();
    let count = objects.len() + 1;
    let _ = writeln!(pdf, "xref\n0 {count}\n0000000000 65535 f ");
    for offset in offsets {
        let _ = writeln!(pdf, "{offset:010} 00000 n ");
    }
    let _ = writeln!(
        pdf,
        "trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref_offset}\n%%EOF"
    );
    pdf.into_bytes()
}

/// A page's content stream that draws `lines` of text (no parentheses or backslashes) one under
/// the other.
#[must_use]
pub fn pdf_text_page(lines: &[&str]) -> String {
    let drawn: Vec<String> = lines
        .iter()
        .map(|line| format!("({line}) Tj 0 -14 Td"))
        .collect();
    format!("BT /F1 12 Tf 72 740 Td {} ET", drawn.join(" "))
}
