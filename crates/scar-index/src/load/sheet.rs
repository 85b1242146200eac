//! Spreadsheets (`.xlsx`, `.xlsm`, `.xls`, `.ods`) through calamine, and delimited text (`.csv`,
//! `.tsv`): one section per sheet, headed by its name, each row naming its cells' columns.
//!
//! A sheet is read as its cells, never as the rectangle it declares or spans: a few kilobytes
//! can declare a million rows, place two cells at opposite corners, share one long string
//! among thousands of cells or repeat one cell millions of times. The text the cells hold is
//! counted against the file's limit before a shared or repeated value is copied.

use std::collections::BTreeMap;
use std::io::Cursor;

use calamine::{Data, DataRef, Reader, Sheets};
use roxmltree::Node;

use super::outline::Outline;
use super::zipped::{Archive, attribute, corrupt, is, parse_xml};
use super::{Heading, LoadError, decode_utf8};

const KIND: &str = "spreadsheet";

/// The sheets of a workbook, in the workbook's order.
pub(super) fn workbook_text(bytes: &[u8], limit: u64) -> Result<(String, Vec<Heading>), LoadError> {
    let mut cells = Cells::new(limit);
    let sheets = if bytes.starts_with(b"PK") {
        // The readers inflate each part whole: the parts are counted first, within the limit,
        // and each is looked into for a shared-strings table that declares more than it holds.
        let mut archive = Archive::open(bytes, KIND, limit)?;
        let mut overdeclared = None;
        archive.inflate_all(ROOT_TAG_LOOK, |head, length| {
            if overdeclared.is_none() {
                overdeclared = declares_too_many(head, length);
            }
        })?;
        if let Some(content) = archive.text("content.xml")? {
            open_document_sheets(&content, &mut cells)?
        } else {
            if let Some(attribute) = overdeclared {
                return Err(corrupt(
                    KIND,
                    format!("its shared strings declare more entries ({attribute}) than they hold"),
                ));
            }
            calamine_sheets(bytes, &mut cells)?
        }
    } else {
        super::xls::check_layout(bytes, limit)?;
        calamine_sheets(bytes, &mut cells)?
    };
    let mut outline = Outline::default();
    for (name, rows) in sheets {
        if !rows.is_empty() {
            outline.heading(1, &name);
            outline.sparse_table(&rows);
        }
    }
    Ok(outline.finish())
}

/// A sheet's non-empty cells, row by row in order, each as its column and text.
type SparseRows = Vec<Vec<(usize, String)>>;

/// What laying out one cell takes beside its text: its column and the string that holds it.
const CELL_ROOM: usize = std::mem::size_of::<(usize, String)>();

/// What a cell holding `text` costs the file's budget.
fn cost(text: &str) -> usize {
    text.len() + CELL_ROOM
}

/// The cells read so far, and what is left of the file's budget for them.
struct Cells {
    limit: u64,
    left: u64,
}

impl Cells {
    fn new(limit: u64) -> Self {
        Self { limit, left: limit }
    }

    /// Takes `bytes` of text `times` over, if the budget has room for them.
    fn take(&mut self, bytes: usize, times: u64) -> Result<(), LoadError> {
        let cost = (bytes as u64).saturating_mul(times);
        self.left = self
            .left
            .checked_sub(cost)
            .ok_or(LoadError::CellsTooLarge { limit: self.limit })?;
        Ok(())
    }
}

/// Lays out cells placed by (row, column) as rows in order.
fn rows_of(placed: BTreeMap<(u32, u32), String>) -> SparseRows {
    let mut rows: SparseRows = Vec::new();
    let mut current = None;
    for ((row, column), text) in placed {
        if current != Some(row) {
            rows.push(Vec::new());
            current = Some(row);
        }
        if let Some(cells) = rows.last_mut() {
            cells.push((column as usize, text));
        }
    }
    rows
}

/// The attribute by which a part (its first bytes, and its length) declares more shared strings
/// than its bytes can hold: the reader reserves room for the declared count before it reads
/// one. Every part is looked into, wherever the workbook's relationships put it.
fn declares_too_many(head: &[u8], length: u64) -> Option<String> {
    let (attribute, declared) = declared_strings(head)?;
    // `<si/>`, the shortest entry, is five bytes.
    (declared > length / 5).then_some(attribute)
}

/// How much of a part is read to find an `sst` element in: a part cut there that may hold one
/// unseen counts as declaring every count there is.
const ROOT_TAG_LOOK: usize = 1 << 20;

/// The larger count the first `sst` element declares, under any prefix and wherever it sits
/// (the reader reserves on the first it meets), with the attribute that declares it.
fn declared_strings(bytes: &[u8]) -> Option<(String, u64)> {
    let text = match bytes {
        [0xFF, 0xFE, rest @ ..] | [0xFE, 0xFF, rest @ ..] => {
            let little = bytes[0] == 0xFF;
            let units: Vec<u16> = rest
                .chunks_exact(2)
                .map(|pair| {
                    let pair = [pair[0], pair[1]];
                    if little {
                        u16::from_le_bytes(pair)
                    } else {
                        u16::from_be_bytes(pair)
                    }
                })
                .collect();
            String::from_utf16_lossy(&units)
        }
        _ => String::from_utf8_lossy(bytes).into_owned(),
    };
    let worst = || ("a start tag past the look".to_owned(), u64::MAX);
    let cut = bytes.len() >= ROOT_TAG_LOOK;
    let mut rest = text.as_str();
    while let Some(open) = rest.find('<') {
        rest = &rest[open + 1..];
        let skip_to = |rest: &str, end: &str| rest.find(end).map(|at| at + end.len());
        let skipped = if rest.starts_with("!--") {
            skip_to(rest, "-->")
        } else if rest.starts_with(['?', '!', '/']) {
            skip_to(rest, ">")
        } else {
            let Some(end) = tag_end(rest) else {
                return (cut && rest.contains("sst")).then(worst);
            };
            let tag = &rest[..end];
            let name = tag.split(|c: char| c.is_whitespace() || c == '/').next()?;
            if name.rsplit(':').next() == Some("sst") {
                return Some(counts(tag).unwrap_or_else(|| ("none".to_owned(), 0)));
            }
            Some(end + 1)
        };
        let Some(skipped) = skipped else {
            return (cut && rest.contains("sst")).then(worst);
        };
        rest = &rest[skipped..];
    }
    None
}

/// Where a tag's `>` is, past any in a quoted value.
fn tag_end(tag: &str) -> Option<usize> {
    let mut quote = None;
    for (at, c) in tag.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, '>') => return Some(at),
            _ => {}
        }
    }
    None
}

/// The larger of a start tag's `count` and `uniqueCount` attributes (under any prefix); a value
/// that is not a plain number (an entity, say) counts as the largest there is.
fn counts(tag: &str) -> Option<(String, u64)> {
    let mut best: Option<(String, u64)> = None;
    let mut rest = tag;
    while let Some(equals) = rest.find('=') {
        let name = rest[..equals].split_whitespace().last().unwrap_or_default();
        let value = rest[equals + 1..].trim_start();
        let quote = value.chars().next()?;
        let body = &value[quote.len_utf8()..];
        let close = body.find(quote)?;
        let local = name.rsplit(':').next().unwrap_or_default();
        if matches!(local, "count" | "uniqueCount") {
            let count = body[..close].trim().parse::<u64>().unwrap_or(u64::MAX);
            if best.as_ref().is_none_or(|(_, seen)| count > *seen) {
                best = Some((local.to_owned(), count));
            }
        }
        rest = &body[close + quote.len_utf8()..];
    }
    best
}

/// Excel's sheets: `.xlsx` (a zip) streamed cell by cell, `.xls` from the reader's cells.
fn calamine_sheets(
    bytes: &[u8],
    cells: &mut Cells,
) -> Result<Vec<(String, SparseRows)>, LoadError> {
    let mut workbook = if bytes.starts_with(b"PK") {
        Sheets::Xlsx(
            calamine::open_workbook_from_rs(Cursor::new(bytes)).map_err(|e| corrupt(KIND, e))?,
        )
    } else {
        Sheets::Xls(
            calamine::open_workbook_from_rs(Cursor::new(bytes)).map_err(|e| corrupt(KIND, e))?,
        )
    };
    let mut sheets = Vec::new();
    for name in workbook.sheet_names() {
        let mut placed = BTreeMap::new();
        if let Sheets::Xlsx(xlsx) = &mut workbook {
            let mut reader = xlsx
                .worksheet_cells_reader(&name)
                .map_err(|e| corrupt(KIND, e))?;
            while let Some(cell) = reader.next_cell().map_err(|e| corrupt(KIND, e))? {
                let text = match cell.get_value() {
                    // Shared by any number of cells: counted before it is copied.
                    DataRef::SharedString(shared) => {
                        cells.take(cost(shared), 1)?;
                        (*shared).to_owned()
                    }
                    value => {
                        let text = cell_text(&Data::from(value.clone()));
                        cells.take(cost(&text), 1)?;
                        text
                    }
                };
                if !text.is_empty() {
                    placed.insert(cell.get_position(), text);
                }
            }
        } else {
            let range = workbook
                .worksheet_range(&name)
                .map_err(|e| corrupt(KIND, e))?;
            for (row, column, value) in range.used_cells() {
                let text = cell_text(value);
                cells.take(cost(&text), 1)?;
                if !text.is_empty() {
                    placed.insert((row as u32, column as u32), text);
                }
            }
        }
        sheets.push((name, rows_of(placed)));
    }
    Ok(sheets)
}

/// OpenDocument's sheets (`.ods`), read from `content.xml`: repeated rows and cells are
/// counted as repeats, and only those with text are laid out, within the budget.
fn open_document_sheets(
    content: &str,
    cells: &mut Cells,
) -> Result<Vec<(String, SparseRows)>, LoadError> {
    let document = parse_xml(content, KIND)?;
    let mut sheets = Vec::new();
    for table in document.descendants().filter(|node| is(*node, "table")) {
        let name = attribute(table, "name").unwrap_or_default().to_owned();
        let mut rows = Vec::new();
        for row in table.descendants().filter(|node| is(*node, "table-row")) {
            let cells_of_row = row_cells(row, cells)?;
            if !cells_of_row.is_empty() {
                let repeats = repeats(row, "number-rows-repeated");
                let bytes = cells_of_row.iter().map(|(_, text)| cost(text)).sum();
                cells.take(bytes, repeats - 1)?;
                for _ in 0..repeats {
                    rows.push(cells_of_row.clone());
                }
            }
        }
        sheets.push((name, rows));
    }
    Ok(sheets)
}

/// The cells of an OpenDocument row that hold text, each with its column, repeats expanded.
fn row_cells(row: Node, cells: &mut Cells) -> Result<Vec<(usize, String)>, LoadError> {
    let mut placed = Vec::new();
    let mut column: u64 = 0;
    for cell in row
        .children()
        .filter(|node| is(*node, "table-cell") || is(*node, "covered-table-cell"))
    {
        let repeats = repeats(cell, "number-columns-repeated");
        let paragraphs: Vec<String> = cell
            .children()
            .filter(|node| is(*node, "p"))
            .map(paragraph_text)
            .collect();
        let text = paragraphs.join("\n");
        if !text.trim().is_empty() {
            cells.take(cost(&text), repeats)?;
            for repeat in 0..repeats {
                placed.push(((column + repeat) as usize, text.clone()));
            }
        }
        column = column.saturating_add(repeats);
    }
    Ok(placed)
}

/// How many times a row or cell stands, from its `table:number-…-repeated` attribute.
fn repeats(node: Node, name: &str) -> u64 {
    attribute(node, name)
        .and_then(|count| count.parse::<u64>().ok())
        .unwrap_or(1)
        .max(1)
}

/// A cell paragraph's text, its spans and runs of spaces included.
fn paragraph_text(paragraph: Node) -> String {
    let mut text = String::new();
    for node in paragraph.descendants() {
        if node.is_text() {
            text.push_str(node.text().unwrap_or_default());
        } else if is(node, "s") {
            text.push(' ');
        } else if is(node, "tab") {
            text.push('\t');
        }
    }
    text
}

/// A delimited text file as one table: commas, or semicolons or tabs when the first line holds
/// more of them (and tabs for `.tsv`).
pub(super) fn delimited_text(
    bytes: &[u8],
    tab_separated: bool,
    warnings: &mut Vec<String>,
) -> Result<(String, Vec<Heading>), LoadError> {
    let text = decode_utf8(bytes, warnings)?;
    let first_line = text.lines().next().unwrap_or_default();
    let delimiter = if tab_separated {
        b'\t'
    } else {
        [b',', b';', b'\t']
            .into_iter()
            .max_by_key(|&d| first_line.bytes().filter(|&b| b == d).count())
            .unwrap_or(b',')
    };
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| corrupt("CSV", e))?;
        rows.push(record.iter().map(str::to_owned).collect());
    }
    let mut outline = Outline::default();
    outline.table(&rows);
    Ok(outline.finish())
}

fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty | Data::Error(_) => String::new(),
        Data::String(text) | Data::DateTimeIso(text) | Data::DurationIso(text) => text.clone(),
        Data::Int(number) => number.to_string(),
        Data::Float(number) => number.to_string(),
        Data::Bool(value) => value.to_string(),
        Data::DateTime(date) if date.is_datetime() => serial_date(date.as_f64()),
        Data::DateTime(date) => date.as_f64().to_string(),
    }
}

/// A spreadsheet date serial (days since 1899-12-30, the fraction the time of day) as ISO 8601:
/// `2026-05-01`, or `2026-05-01 14:30` when it has a time.
fn serial_date(serial: f64) -> String {
    // Serials past 9999-12-31 (or before the epoch, or not numbers) name no calendar date; the
    // arithmetic below would overflow on them.
    if !(0.0..=2_958_465.0).contains(&serial) {
        return serial.to_string();
    }
    // Whole minutes, rounded, so that 14:29:59.9999 reads 14:30.
    #[allow(clippy::cast_possible_truncation)]
    let minutes = (serial * 1440.0).round() as i64;
    let (days, minute_of_day) = (minutes.div_euclid(1440), minutes.rem_euclid(1440));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days - 25_569 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let date = format!("{year:04}-{month:02}-{day:02}");
    if minute_of_day == 0 {
        date
    } else {
        format!("{date} {:02}:{:02}", minute_of_day / 60, minute_of_day % 60)
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::io::Write as _;

    use super::*;

    const MAIN: &str = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";

    /// An `.xlsx` of one sheet, `Tides`, with these rows and shared strings.
    fn xlsx(sheet_data: &str, shared: &str) -> Vec<u8> {
        let relationships = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
        let parts = [
            (
                "[Content_Types].xml".to_owned(),
                r#"<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#.to_owned(),
            ),
            (
                "_rels/.rels".to_owned(),
                format!(
                    r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="{relationships}/officeDocument" Target="xl/workbook.xml"/></Relationships>"#
                ),
            ),
            (
                "xl/workbook.xml".to_owned(),
                format!(
                    r#"<workbook xmlns="{MAIN}" xmlns:r="{relationships}"><sheets><sheet name="Tides" sheetId="1" r:id="rId1"/></sheets></workbook>"#
                ),
            ),
            (
                "xl/_rels/workbook.xml.rels".to_owned(),
                format!(
                    r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="{relationships}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#
                ),
            ),
            (
                "xl/worksheets/sheet1.xml".to_owned(),
                format!(
                    r#"<worksheet xmlns="{MAIN}"><dimension ref="A1:XFD1048576"/><sheetData>{sheet_data}</sheetData></worksheet>"#
                ),
            ),
            ("xl/sharedStrings.xml".to_owned(), shared.to_owned()),
        ];
        zipped(&parts)
    }

    fn zipped(parts: &[(String, String)]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, contents) in parts {
            zip.start_file(name.as_str(), deflated).unwrap();
            zip.write_all(contents.as_bytes()).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    fn shared_strings(strings: &[&str]) -> String {
        let items = strings
            .iter()
            .map(|text| ["<si><t>", text, "</t></si>"].concat())
            .collect::<String>();
        let count = strings.len();
        format!(r#"<sst xmlns="{MAIN}" count="{count}" uniqueCount="{count}">{items}</sst>"#)
    }

    #[test]
    fn cells_at_opposite_corners_are_read_as_two_cells() {
        let rows = r#"<row r="1"><c r="A1" t="inlineStr"><is><t>Port</t></is></c><c r="C1" t="inlineStr"><is><t>Tide</t></is></c></row><row r="1048576"><c r="A1048576" t="s"><v>0</v></c><c r="XFD1048576"><v>6.5</v></c></row>"#;
        let bytes = xlsx(rows, &shared_strings(&["Harbour"]));
        assert!(bytes.len() < 2048, "{} bytes", bytes.len());
        let (text, headings) = workbook_text(&bytes, 1 << 20).unwrap();
        assert_eq!(text, "Tides\n\nPort | Tide\nPort: Harbour; 6.5");
        assert_eq!(headings.len(), 1);
    }

    #[test]
    fn a_long_string_shared_by_many_cells_is_counted_before_it_is_copied() {
        let long = "w".repeat(64 * 1024);
        let mut rows = String::new();
        for row in 1..=1000 {
            let _ = write!(
                rows,
                r#"<row r="{row}"><c r="A{row}" t="s"><v>0</v></c></row>"#
            );
        }
        let bytes = xlsx(&rows, &shared_strings(&[&long]));
        let error = workbook_text(&bytes, 16 << 20).unwrap_err();
        assert!(
            matches!(error, LoadError::CellsTooLarge { limit } if limit == 16 << 20),
            "{error:?}"
        );
    }

    #[test]
    fn shared_strings_that_declare_more_than_they_hold_are_refused() {
        // Plain, prefixed, on a new line, in single quotes, after a comment.
        let roots = [
            format!(r#"<sst xmlns="{MAIN}" count="1" uniqueCount="4000000000000">"#),
            format!(r#"<x:sst xmlns:x="{MAIN}" uniqueCount="4000000000000">"#),
            format!("<sst xmlns=\"{MAIN}\"\n uniqueCount\n=\n'4000000000000'>"),
            format!(
                r#"<?xml version="1.0"?><!-- a > b --><sst xmlns="{MAIN}" count=" 4000000000000 ">"#
            ),
        ];
        for root in roots {
            let close = if root.contains("<x:sst") {
                "</x:sst>"
            } else {
                "</sst>"
            };
            let item = if root.contains("<x:sst") {
                "<x:si><x:t>x</x:t></x:si>"
            } else {
                "<si><t>x</t></si>"
            };
            let shared = format!("{root}{item}{close}");
            let bytes = xlsx(r#"<row r="1"><c r="A1" t="s"><v>0</v></c></row>"#, &shared);
            let error = workbook_text(&bytes, 1 << 20).unwrap_err();
            let message = scar_core::ErrorChain(&error).to_string();
            assert!(
                message.starts_with(
                    "corrupt spreadsheet file: its shared strings declare more entries"
                ),
                "{root}: {message}"
            );
        }
        // Wherever the part is: the check does not go by its name.
        let shared =
            format!(r#"<sst xmlns="{MAIN}" uniqueCount="4000000000000"><si><t>x</t></si></sst>"#);
        assert_eq!(
            declared_strings(shared.as_bytes()),
            Some(("uniqueCount".to_owned(), 4_000_000_000_000))
        );
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(shared.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(
            declared_strings(&utf16).map(|(_, count)| count),
            Some(4_000_000_000_000)
        );
        assert_eq!(declared_strings(b"<worksheet count='9'/>"), None);
        // Not the root, under a prefix no one declares, or with a number in an entity.
        for part in [
            &b"<a><sst uniqueCount='4000000000000'><si/></sst></a>"[..],
            b"<x:sst uniqueCount=\"4000000000000\"><x:si/></x:sst>",
            b"<sst count=\"&#52;000000000000\"/>",
        ] {
            let (_, count) = declared_strings(part).unwrap();
            assert!(
                count >= 4_000_000_000_000,
                "{}",
                String::from_utf8_lossy(part)
            );
        }
    }

    fn ods(rows: &str) -> Vec<u8> {
        let content = format!(
            r#"<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:spreadsheet><table:table table:name="Fares">{rows}</table:table></office:spreadsheet></office:body></office:document-content>"#
        );
        zipped(&[
            (
                "mimetype".to_owned(),
                "application/vnd.oasis.opendocument.spreadsheet".to_owned(),
            ),
            ("content.xml".to_owned(), content),
        ])
    }

    #[test]
    fn open_document_repeats_place_cells_and_count_against_the_budget() {
        let rows = r#"<table:table-row><table:table-cell><text:p>Vehicle</text:p></table:table-cell><table:table-cell table:number-columns-repeated="16000"/><table:table-cell><text:p>Return</text:p></table:table-cell></table:table-row><table:table-row table:number-rows-repeated="1000000"/><table:table-row table:number-rows-repeated="2"><table:table-cell><text:p>Kayak</text:p></table:table-cell><table:covered-table-cell/><table:table-cell table:number-columns-repeated="15999"/><table:table-cell><text:p>16 <text:span>euros</text:span></text:p></table:table-cell></table:table-row>"#;
        let (text, _) = workbook_text(&ods(rows), 1 << 20).unwrap();
        assert_eq!(
            text,
            "Fares\n\nVehicle | Return\nVehicle: Kayak; Return: 16 euros\n\
             Vehicle: Kayak; Return: 16 euros"
        );

        let bomb = r#"<table:table-row table:number-rows-repeated="6000"><table:table-cell table:number-columns-repeated="16384"><text:p>x</text:p></table:table-cell></table:table-row>"#;
        let bytes = ods(bomb);
        assert!(bytes.len() < 1024, "{} bytes", bytes.len());
        let error = workbook_text(&bytes, 1 << 20).unwrap_err();
        assert!(
            matches!(error, LoadError::CellsTooLarge { .. }),
            "{error:?}"
        );
        // One-letter cells count what laying each out takes, not their one byte: 983,040 of
        // them would take some 80 MB, under a 1 MiB limit.
        let letters = r#"<table:table-row table:number-rows-repeated="60"><table:table-cell table:number-columns-repeated="16384"><text:p>x</text:p></table:table-cell></table:table-row>"#;
        let error = workbook_text(&ods(letters), 1 << 20).unwrap_err();
        assert!(
            matches!(error, LoadError::CellsTooLarge { .. }),
            "{error:?}"
        );
    }

    #[test]
    fn long_column_names_are_not_repeated_without_bound() {
        let names: Vec<String> = (0..200).map(|i| format!("{i:0>200}")).collect();
        let mut csv = names.join(",");
        for _ in 0..100 {
            csv.push('\n');
            csv.push_str(&vec!["1"; 200].join(","));
        }
        let mut warnings = Vec::new();
        let (text, _) = delimited_text(csv.as_bytes(), false, &mut warnings).unwrap();
        assert!(
            text.len() < 4 * csv.len(),
            "{} bytes from {}",
            text.len(),
            csv.len()
        );
        // The names would make each row 200 times its text: the rows are written plain.
        assert_eq!(
            text.lines().last(),
            Some(vec!["1"; 200].join("; ").as_str())
        );
    }

    #[test]
    fn date_serials_read_as_iso_dates() {
        assert_eq!(serial_date(46_143.0), "2026-05-01");
        assert_eq!(serial_date(46_143.604_166), "2026-05-01 14:30");
        assert_eq!(serial_date(1.0), "1899-12-31");
        assert_eq!(serial_date(60.0), "1900-02-28");
        assert_eq!(serial_date(1e300), 1e300.to_string());
        assert_eq!(serial_date(-1.0), "-1");
        assert_eq!(serial_date(f64::NAN), "NaN");
    }

    #[test]
    fn delimited_rows_name_their_columns_whatever_the_delimiter() {
        let mut warnings = Vec::new();
        let semicolons = "Date;High tide;Low tide\n2026-05-01;06:12;12:30\n";
        let (text, headings) = delimited_text(semicolons.as_bytes(), false, &mut warnings).unwrap();
        assert_eq!(
            text,
            "Date | High tide | Low tide\nDate: 2026-05-01; High tide: 06:12; Low tide: 12:30"
        );
        assert!(headings.is_empty());
        let quoted = "Name,Note\n\"Smith, J.\",\"said \"\"hi\"\"\"\nextra,cells,beyond\n";
        let (text, _) = delimited_text(quoted.as_bytes(), false, &mut warnings).unwrap();
        assert_eq!(
            text,
            "Name | Note\nName: Smith, J.; Note: said \"hi\"\nName: extra; Note: cells; beyond"
        );
        let (text, _) = delimited_text(b"a,b\tc\n1,2\t3\n", true, &mut warnings).unwrap();
        assert_eq!(text, "a,b | c\na,b: 1,2; c: 3");
        assert!(warnings.is_empty());
    }
}
