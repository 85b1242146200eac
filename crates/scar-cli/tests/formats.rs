//! One file of each office, e-book and mail format and a scanned PDF, written by the tools that
//! write them for real (scripts/make-format-samples.py), indexed with nothing skipped; a question
//! about a table cell, a slide, its speaker notes, a sheet row, a chapter, an attachment or the
//! scanned page finds the chunk that holds the answer.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{run, scar, search_json, workspace};

/// The sample folder and an index of it, made once per test binary.
fn indexed_samples() -> &'static (tempfile::TempDir, tempfile::TempDir) {
    static SAMPLES: OnceLock<(tempfile::TempDir, tempfile::TempDir)> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let python = std::env::var("SCAR_FORMATS_PYTHON").expect(
            "SCAR_FORMATS_PYTHON: run the tests through scripts/test, which installs the writers",
        );
        let samples = tempfile::tempdir().unwrap();
        run(Command::new(python)
            .arg(workspace().join("scripts/make-format-samples.py"))
            .arg(samples.path()));
        let index = tempfile::tempdir().unwrap();
        let output = run(scar(index.path()).arg("index").arg(samples.path()).args([
            "--chunk-tokens",
            "48",
            "--json",
        ]));
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["skipped"], Value::Array(Vec::new()), "{report}");
        assert_eq!(report["added"], 11, "{report}");
        // Only the scanned pages needed OCR, and the report says which were read that way: the
        // whole of the scanned notice, and the second page of the bound report.
        let warnings = report["warnings"].as_array().unwrap();
        let warned: Vec<(&str, &str)> = warnings
            .iter()
            .map(|w| {
                let path = w["path"].as_str().unwrap();
                (
                    path.rsplit('/').next().unwrap(),
                    w["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(warned.len(), 2, "{report}");
        assert!(
            warned
                .iter()
                .any(|(file, reason)| *file == "scanned-notice.pdf"
                    && reason.contains("read by OCR"))
        );
        assert!(
            warned
                .iter()
                .any(|(file, reason)| *file == "bound-report.pdf"
                    && reason.starts_with("page(s) 2 had no text layer: read by OCR"))
        );
        (samples, index)
    })
}

/// Seeds searched for each question: the chunk that answers must rank among them, above the
/// other nine files' chunks.
const SEEDS: usize = 3;

/// Asserts that one of the top seeds for `question` is a chunk of `file` holding `holds`,
/// under `heading` or starting the section it names; gives back that chunk.
fn assert_found(question: &str, file: &str, holds: &str, heading: &str) -> Value {
    let (_, index) = indexed_samples();
    let report = search_json(index.path(), question, &["--k", &SEEDS.to_string()]);
    let seeds: Vec<&Value> = report["ledger"]["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|seed| &seed["id"])
        .collect();
    let found = report["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|chunk| seeds.contains(&&chunk["id"]))
        .find(|chunk| {
            let document = PathBuf::from(chunk["document"].as_str().unwrap());
            document.file_name().unwrap() == file && chunk["text"].as_str().unwrap().contains(holds)
        });
    let Some(chunk) = found else {
        panic!("{question}: no seed of {file} holds {holds:?}: {report}");
    };
    let path = chunk["heading_path"].as_str().unwrap();
    let last = heading.rsplit(" > ").next().unwrap();
    assert!(
        path.contains(heading) || chunk["text"].as_str().unwrap().contains(last),
        "{question}: {heading:?} is neither the heading path {path:?} nor in the chunk"
    );
    chunk.clone()
}

#[test]
fn a_word_table_cell_is_found_with_its_column_names() {
    let chunk = assert_found(
        "How much is a return trip with a sea kayak?",
        "ferry-handbook.docx",
        "Vehicle: Sea kayak; Single crossing: 8 euros; Return trip: 16 euros",
        "Island ferry handbook > Fares",
    );
    // Only documents of pages give their chunks a page.
    assert!(chunk.get("page").is_none(), "{chunk}");
}

#[test]
fn an_opendocument_table_row_is_found() {
    assert_found(
        "When does the village library close on Saturday?",
        "library.odt",
        "Day: Saturday; Opens: 10:00; Closes: 13:30",
        "Opening hours",
    );
}

#[test]
fn speaker_notes_and_slide_tables_are_found_under_their_slide() {
    assert_found(
        "What is the budget for restoring the lighthouse?",
        "harbour-works.pptx",
        "120,000 euros",
        "Lighthouse restoration > Speaker notes",
    );
    assert_found(
        "Which contractor repairs the slipway?",
        "harbour-works.pptx",
        "Section: Slipway; Contractor: Ferris & Daughters",
        "Quay repairs",
    );
}

#[test]
fn spreadsheet_rows_are_found_under_their_sheet() {
    assert_found(
        "Which shelf holds the angle grinder?",
        "workshop-inventory.xlsx",
        "Item: Angle grinder; Shelf: B7; Count: 2",
        "Tools",
    );
    assert_found(
        "In which month are tulips planted?",
        "garden.ods",
        "Plant: Tulips; Month: October; Bed: North bed",
        "Planting",
    );
    assert_found(
        "When is high tide on 2026-05-02?",
        "tides.csv",
        "Date: 2026-05-02; High tide: 07:01",
        "",
    );
}

#[test]
fn an_epub_chapter_rtf_minutes_and_a_mail_attachment_are_found() {
    assert_found(
        "When was the old harbour wall built?",
        "walkers-guide.epub",
        "built in 1794",
        "The old harbour",
    );
    assert_found(
        "How much does a mooring cost per night?",
        "committee-minutes.rtf",
        "12€ a night",
        "Harbour committee minutes",
    );
    // The attachment is a document of its own, of the mail's file, under its own headings.
    let attached = assert_found(
        "What load did the crane's load test reach?",
        "crane-inspection.eml",
        "14 tonnes",
        "Inspection notes",
    );
    assert_eq!(attached["attachment"], "inspection-notes.md", "{attached}");
    let (_, index) = indexed_samples();
    let inspected: Value =
        serde_json::from_slice(&run(scar(index.path()).args(["inspect", "--json"])).stdout)
            .unwrap();
    let mail: Vec<&Value> = inspected["documents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["path"]
                .as_str()
                .unwrap()
                .ends_with("crane-inspection.eml")
        })
        .collect();
    assert_eq!(mail.len(), 2, "{inspected}");
    assert!(mail[0].get("attachment").is_none());
    assert_eq!(mail[1]["attachment"], "inspection-notes.md");
    assert_eq!(mail[0]["hash"], mail[1]["hash"]);
}

#[test]
fn a_scanned_page_is_read_by_ocr() {
    assert_found(
        "When is the slipway closed for repairs?",
        "scanned-notice.pdf",
        "from 3 June to 28 June",
        "",
    );
}

#[test]
fn a_scanned_page_bound_with_typed_ones_is_read_by_ocr_and_the_typed_ones_are_kept() {
    let scanned = assert_found(
        "How many floats did the new pontoon arrive with?",
        "bound-report.pdf",
        "22 floats",
        "",
    );
    let typed = assert_found(
        "When was the quay wall repointed?",
        "bound-report.pdf",
        "repointed in April",
        "",
    );
    // Each chunk knows the page it starts on, for the viewer to open the file there: the
    // typed page is the first; the scanned page's chunk starts on it unless it also holds the
    // end of the first (page 1 is two lines).
    let starts_on_first = scanned["text"].as_str().unwrap().contains("repointed");
    assert_eq!(typed["page"], 1, "{typed}");
    assert_eq!(
        scanned["page"],
        if starts_on_first { 1 } else { 2 },
        "{scanned}"
    );
}

#[test]
fn without_the_ocr_programs_a_bound_scan_keeps_its_typed_pages_and_names_the_others() {
    let (samples, _) = indexed_samples();
    let index = tempfile::tempdir().unwrap();
    let output = scar(index.path())
        .env("PATH", "/nonexistent")
        .arg("index")
        .arg(samples.path().join("bound-report.pdf"))
        .arg("--json")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["added"], 1, "{report}");
    let reason = report["warnings"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("page(s) 2 have no text layer and were left out")
            && reason.contains("install tesseract-ocr and poppler-utils"),
        "{report}"
    );
}

#[test]
fn without_the_ocr_programs_a_scanned_pdf_says_what_to_install() {
    let (samples, _) = indexed_samples();
    let index = tempfile::tempdir().unwrap();
    let output = scar(index.path())
        .env("PATH", "/nonexistent")
        .arg("index")
        .arg(samples.path().join("scanned-notice.pdf"))
        .arg(samples.path().join("tides.csv"))
        .arg("--json")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let reason = report["skipped"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("install tesseract-ocr and poppler-utils"),
        "{report}"
    );
    // The index keeps the list, and `inspect` shows it.
    let inspected: Value =
        serde_json::from_slice(&run(scar(index.path()).args(["inspect", "--json"])).stdout)
            .unwrap();
    assert_eq!(inspected["skipped"], report["skipped"], "{inspected}");
    let printed = run(scar(index.path()).arg("inspect")).stdout;
    let printed = String::from_utf8(printed).unwrap();
    assert!(
        printed.contains("skipped (1):") && printed.contains("scanned-notice.pdf: "),
        "{printed}"
    );
}
