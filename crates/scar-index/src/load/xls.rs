//! What the spreadsheet reader lays out for an `.xls`, measured before it reads one.
//!
//! The reader parses every sheet of an `.xls` as it opens the workbook: it reserves room for
//! the cells each sheet's DIMENSIONS record declares, lays each sheet out as the whole
//! rectangle its cells span, and copies a shared string into every cell that names it. A few
//! hundred bytes can declare 2³² rows, place two cells at opposite corners or name one long
//! string from thousands of cells. The workbook stream is walked here first, record by record,
//! and a file whose layout would go past the file's budget is refused unread.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::mem::size_of;

use calamine::{Cell, Data};

use super::LoadError;
use super::zipped::corrupt;

const KIND: &str = "Excel 97-2003";

/// Record types of the BIFF stream ([MS-XLS] 2.3).
mod record {
    pub const EOF: u16 = 0x000A;
    pub const BOF: u16 = 0x0809;
    pub const CONTINUE: u16 = 0x003C;
    pub const BOUND_SHEET: u16 = 0x0085;
    pub const SST: u16 = 0x00FC;
    pub const DIMENSIONS: u16 = 0x0200;
    pub const LABEL_SST: u16 = 0x00FD;
    pub const MUL_RK: u16 = 0x00BD;
    pub const FORMULA: u16 = 0x0006;
    /// A formula's text value, placed where the last formula was (at first, A1).
    pub const STRING: u16 = 0x0207;
    /// Cells of one value each, placed by their first four bytes (row, column): numbers,
    /// labels, rich labels, booleans and errors, compressed numbers.
    pub const SINGLE_CELLS: [u16; 5] = [0x0203, 0x0204, 0x00D6, 0x0205, 0x027E];
}

/// Continuation records one shared-string table may run over: the reader takes each from the
/// front of a list, in time quadratic in their number. Excel writes them 8,224 bytes long, so
/// this many hold 134 MB, more than any file under the size limit.
const MAX_CONTINUES: usize = 16_384;

/// Refuses an `.xls` whose sheets would take the reader more than `limit` bytes beyond the
/// cells they hold, whose shared strings copied into their cells run past `limit`, or whose
/// sheets are read from the same records (each copy would be laid out again).
pub(super) fn check_layout(bytes: &[u8], limit: u64) -> Result<(), LoadError> {
    let stream = workbook_stream(bytes, limit)?;
    let globals = Globals::read(&stream)?;
    let mut budget = Budget { limit, left: limit };
    // Where each sheet read so far starts, and where it ends.
    let mut read = BTreeMap::new();
    for &start in &globals.sheets {
        let Some(sheet) = stream.get(start..) else {
            continue;
        };
        let extent = SheetExtent::read(sheet, &globals.shared_string_bytes);
        let end = start + extent.length;
        let before = read.range(..=start).next_back().map(|(_, &end)| end);
        let after = read.range(start..).next().map(|(&start, _)| start);
        if before.is_some_and(|before_end| before_end > start)
            || after.is_some_and(|after_start| after_start < end)
        {
            return Err(corrupt(
                KIND,
                "two of its sheets are read from the same records",
            ));
        }
        read.insert(start, end);
        budget.take(&extent)?;
    }
    Ok(())
}

/// The workbook stream of the compound file, read within `limit`.
fn workbook_stream(bytes: &[u8], limit: u64) -> Result<Vec<u8>, LoadError> {
    let mut file = cfb::CompoundFile::open(Cursor::new(bytes)).map_err(|e| corrupt(KIND, e))?;
    let name = ["/Workbook", "/Book"]
        .into_iter()
        .find(|name| file.is_stream(name))
        .ok_or_else(|| corrupt(KIND, "it holds no workbook stream"))?;
    let mut stream = Vec::new();
    file.open_stream(name)
        .map_err(|e| corrupt(KIND, e))?
        .take(limit)
        .read_to_end(&mut stream)
        .map_err(|e| corrupt(KIND, e))?;
    Ok(stream)
}

/// The records of a BIFF stream from its start, as (type, data), up to the first cut short.
fn records(stream: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = stream;
    std::iter::from_fn(move || {
        let kind = u16::from_le_bytes([*rest.first()?, *rest.get(1)?]);
        let len = usize::from(u16::from_le_bytes([*rest.get(2)?, *rest.get(3)?]));
        let data = rest.get(4..4 + len)?;
        rest = &rest[4 + len..];
        Some((kind, data))
    })
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// What the workbook's globals say: where each sheet starts and, for each shared string, the
/// most bytes of text it decodes to.
struct Globals {
    sheets: Vec<usize>,
    shared_string_bytes: Vec<u64>,
}

impl Globals {
    fn read(stream: &[u8]) -> Result<Self, LoadError> {
        let mut sheets = Vec::new();
        let mut shared_string_bytes = Vec::new();
        let mut all = records(stream).peekable();
        while let Some((kind, data)) = all.next() {
            match kind {
                record::BOUND_SHEET => sheets.extend(u32_at(data, 0).map(|at| at as usize)),
                record::SST => {
                    let mut pieces = vec![data.get(8..).unwrap_or_default()];
                    while let Some((_, more)) = all.next_if(|(kind, _)| *kind == record::CONTINUE) {
                        pieces.push(more);
                    }
                    if pieces.len() > MAX_CONTINUES {
                        return Err(corrupt(
                            KIND,
                            "its shared strings run over more continuation records than any \
                             workbook under the size limit holds",
                        ));
                    }
                    // The reader keeps the last table.
                    shared_string_bytes = string_lengths(&pieces);
                }
                record::EOF => break,
                _ => {}
            }
        }
        Ok(Self {
            sheets,
            shared_string_bytes,
        })
    }
}

/// The most UTF-8 bytes each string of a shared-string table decodes to (three per character),
/// read as the reader reads them: a string's characters may run on into the next piece, which
/// then starts with its own flags byte. Stops at the first string cut short.
fn string_lengths(pieces: &[&[u8]]) -> Vec<u64> {
    let mut reader = Pieces { pieces, at: 0 };
    let mut lengths = Vec::new();
    while let Some(length) = reader.next_string() {
        lengths.push(length);
    }
    lengths
}

struct Pieces<'a> {
    pieces: &'a [&'a [u8]],
    at: usize,
}

impl<'a> Pieces<'a> {
    /// The current piece, moving on to the next when it is used up (and one is left).
    fn current(&mut self) -> Option<&'a [u8]> {
        while self.pieces.first()?.len() <= self.at {
            self.pieces = &self.pieces[1..];
            self.at = 0;
        }
        let piece: &'a [u8] = self.pieces[0];
        Some(&piece[self.at..])
    }

    fn skip(&mut self, mut count: usize) -> Option<()> {
        while count > 0 {
            let here = self.current()?.len().min(count);
            self.at += here;
            count -= here;
        }
        Some(())
    }

    /// Bytes of the piece being read, from where reading is: none once it is used up.
    fn here(&self) -> &'a [u8] {
        let piece: &'a [u8] = self.pieces.first().copied().unwrap_or_default();
        piece.get(self.at..).unwrap_or_default()
    }

    /// `count` bytes of the piece being read, never running on into the next.
    fn take_here(&mut self, count: usize) -> Option<&'a [u8]> {
        let taken = self.here().get(..count)?;
        self.at += count;
        Some(taken)
    }

    fn next_string(&mut self) -> Option<u64> {
        // As the reader does: a piece used up moves reading to the next, where an empty piece
        // is an empty string of its own.
        if self.here().is_empty() {
            self.pieces = self.pieces.get(1..).filter(|rest| !rest.is_empty())?;
            self.at = 0;
            if self.here().is_empty() {
                return Some(0);
            }
        }
        let header = self.take_here(3)?;
        let (characters, flags) = (u16::from_le_bytes([header[0], header[1]]), header[2]);
        let runs = if flags & 0x8 == 0 {
            0
        } else {
            usize::from(u16_at(self.take_here(2)?, 0)?)
        };
        let extra = if flags & 0x4 == 0 {
            0
        } else {
            u32_at(self.take_here(4)?, 0)? as usize
        };
        let mut wide = flags & 0x1 != 0;
        let mut left = usize::from(characters);
        while left > 0 {
            let width = if wide { 2 } else { 1 };
            let here = (self.here().len() / width).min(left);
            self.at += here * width;
            left -= here;
            if left > 0 {
                // The characters run on into the next piece, whose first byte is their flags.
                self.pieces = self.pieces.get(1..).filter(|rest| !rest.is_empty())?;
                self.at = 0;
                wide = self.take_here(1)?[0] & 0x1 != 0;
            }
        }
        self.skip(runs * 4)?;
        self.skip(extra)?;
        Some(u64::from(characters) * 3)
    }
}

/// One sheet as the reader lays it out.
#[derive(Debug, Default)]
struct SheetExtent {
    /// Cells the reader keeps, among them those of formulas.
    cells: u64,
    /// Cells its DIMENSIONS records declare: the reader reserves room for them.
    declared: u64,
    /// The vector the reader gathers the cells in, as it grows.
    room: Room,
    /// The rectangle its cells span: the reader lays out every cell in it.
    spanned: Span,
    /// Formulas, laid out in a rectangle of their own.
    formulas: u64,
    formulas_spanned: Span,
    /// Bytes of shared strings copied into its cells, at most.
    shared_text: u64,
    /// Bytes of the stream it is read from, to its end-of-file record.
    length: usize,
}

/// A vector's length and capacity as cells are pushed and room is reserved, grown as the
/// standard library grows one (doubling, at least four).
#[derive(Debug, Default)]
struct Room {
    len: u64,
    capacity: u64,
}

impl Room {
    fn reserve(&mut self, more: u64) {
        if self.capacity - self.len < more {
            self.capacity = self
                .capacity
                .saturating_mul(2)
                .max(self.len.saturating_add(more));
        }
    }

    fn push(&mut self, count: u64) {
        self.len = self.len.saturating_add(count);
        while self.capacity < self.len {
            self.capacity = self.capacity.saturating_mul(2).max(4);
        }
    }

    /// Slots reserved and never filled.
    fn empty(&self) -> u64 {
        self.capacity - self.len
    }
}

/// The rows and columns a set of cells spans.
#[derive(Debug, Default)]
struct Span(Option<((u32, u32), (u32, u32))>);

impl Span {
    fn add(&mut self, (row, column): (u32, u32)) {
        let ((top, left), (bottom, right)) = self.0.unwrap_or(((row, column), (row, column)));
        self.0 = Some((
            (top.min(row), left.min(column)),
            (bottom.max(row), right.max(column)),
        ));
    }

    fn cells(&self) -> u64 {
        self.0.map_or(0, |((top, left), (bottom, right))| {
            u64::from(bottom - top + 1) * u64::from(right - left + 1)
        })
    }
}

impl SheetExtent {
    /// The sheet starting at `sheet`, read as the reader reads it: to its end-of-file record,
    /// skipping the substreams (charts) nested in it.
    fn read(sheet: &[u8], shared_string_bytes: &[u64]) -> Self {
        let mut extent = Self::default();
        let (mut seen_bof, mut nested) = (false, 0usize);
        let mut formula_at = (0, 0);
        for (kind, data) in records(sheet) {
            extent.length += 4 + data.len();
            if nested > 0 {
                match kind {
                    record::BOF => nested += 1,
                    record::EOF => nested -= 1,
                    _ => {}
                }
                continue;
            }
            let at = || Some((u32::from(u16_at(data, 0)?), u32::from(u16_at(data, 2)?)));
            match kind {
                record::BOF if seen_bof => nested += 1,
                record::BOF => seen_bof = true,
                record::EOF => break,
                record::DIMENSIONS => {
                    let cells = declared_cells(data);
                    extent.declared = extent.declared.max(cells);
                    extent.room.reserve(cells);
                }
                record::LABEL_SST => {
                    if let (Some(position), Some(index)) = (at(), u32_at(data, 6))
                        && let Some(&bytes) = shared_string_bytes.get(index as usize)
                    {
                        extent.place(position);
                        extent.shared_text = extent.shared_text.saturating_add(bytes);
                    }
                }
                record::MUL_RK => {
                    // Six bytes a cell: a record of another length is refused by the reader.
                    if let (Some((row, first)), Some(last)) =
                        (at(), u16_at(data, data.len().saturating_sub(2)))
                        && let Some(count) = (u32::from(last) + 1).checked_sub(first)
                        && data.len() == 6 + 6 * count as usize
                    {
                        extent.cells += u64::from(count);
                        extent.room.push(u64::from(count));
                        extent.spanned.add((row, first));
                        extent.spanned.add((row, u32::from(last)));
                    }
                }
                record::FORMULA => {
                    // A formula keeps a cell only for some values: not counted as one held,
                    // which can only overstate the empty layout.
                    if let Some(position) = at() {
                        extent.spanned.add(position);
                        extent.room.push(1);
                        extent.formulas += 1;
                        extent.formulas_spanned.add(position);
                        formula_at = position;
                    }
                }
                record::STRING => extent.place(formula_at),
                _ if record::SINGLE_CELLS.contains(&kind) => {
                    if let Some(position) = at() {
                        extent.place(position);
                    }
                }
                _ => {}
            }
        }
        extent
    }

    fn place(&mut self, position: (u32, u32)) {
        self.cells += 1;
        self.room.push(1);
        self.spanned.add(position);
    }

    /// Bytes the reader takes for this sheet beyond one value per cell it holds: the room
    /// reserved for the declared cells, and the empty cells of the rectangles.
    fn empty_layout_bytes(&self) -> u64 {
        let bytes = |cells: u64, each: usize| cells.saturating_mul(each as u64);
        bytes(self.room.empty(), size_of::<Cell<Data>>())
            .saturating_add(bytes(
                self.spanned.cells().saturating_sub(self.cells),
                size_of::<Data>(),
            ))
            .saturating_add(bytes(
                self.formulas_spanned.cells().saturating_sub(self.formulas),
                size_of::<String>(),
            ))
    }
}

/// The cells a DIMENSIONS record makes the reader reserve room for, computed as it does
/// (with its wrap-around on a last row before the first).
fn declared_cells(data: &[u8]) -> u64 {
    let (first_row, last_row, mut first_column, last_column) = match data.len() {
        10 => (
            u32::from(u16_at(data, 0).unwrap_or(0)),
            u32::from(u16_at(data, 2).unwrap_or(0)),
            u32::from(u16_at(data, 4).unwrap_or(0)),
            u32::from(u16_at(data, 6).unwrap_or(0)),
        ),
        14 | 16 => (
            u32_at(data, 0).unwrap_or(0),
            u32_at(data, 4).unwrap_or(0),
            u32::from(u16_at(data, 8).unwrap_or(0)),
            u32::from(u16_at(data, 10).unwrap_or(0)),
        ),
        _ => return 0,
    };
    if first_column > 0xFF || last_column < first_column {
        first_column = 0;
    }
    if last_row == 0 || last_column == 0 {
        return 1;
    }
    let rows = (last_row - 1).wrapping_sub(first_row).wrapping_add(1);
    let columns = (last_column - 1).wrapping_sub(first_column).wrapping_add(1);
    u64::from(rows).saturating_mul(u64::from(columns))
}

/// The file's budget, spent on the empty layout of its sheets and the text copied into cells.
struct Budget {
    limit: u64,
    left: u64,
}

impl Budget {
    fn take(&mut self, extent: &SheetExtent) -> Result<(), LoadError> {
        let limit = self.limit;
        self.left = self.left.checked_sub(extent.empty_layout_bytes()).ok_or(
            LoadError::LayoutTooLarge {
                cells: extent.declared.max(extent.spanned.cells()),
                limit,
            },
        )?;
        self.left = self
            .left
            .checked_sub(extent.shared_text)
            .ok_or(LoadError::CellsTooLarge { limit })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::load::sheet::workbook_text;

    const MIB: u64 = 1 << 20;

    fn record(kind: u16, data: &[u8]) -> Vec<u8> {
        let length = u16::try_from(data.len()).unwrap();
        [&kind.to_le_bytes()[..], &length.to_le_bytes(), data].concat()
    }

    fn bof(kind: u16) -> Vec<u8> {
        record(
            record::BOF,
            &[&0x0600u16.to_le_bytes()[..], &kind.to_le_bytes(), &[0; 12]].concat(),
        )
    }

    fn number(row: u16, column: u16, value: f64) -> Vec<u8> {
        let data = [
            &row.to_le_bytes()[..],
            &column.to_le_bytes(),
            &[0, 0],
            &value.to_le_bytes(),
        ];
        record(0x0203, &data.concat())
    }

    fn shared(row: u16, column: u16, index: u32) -> Vec<u8> {
        let data = [
            &row.to_le_bytes()[..],
            &column.to_le_bytes(),
            &[0, 0],
            &index.to_le_bytes(),
        ];
        record(record::LABEL_SST, &data.concat())
    }

    /// A BIFF8 DIMENSIONS record: rows `first..last_plus_one`, columns likewise.
    fn dimensions(rows: (u32, u32), columns: (u16, u16)) -> Vec<u8> {
        let data = [
            &rows.0.to_le_bytes()[..],
            &rows.1.to_le_bytes(),
            &columns.0.to_le_bytes(),
            &columns.1.to_le_bytes(),
            &[0, 0],
        ];
        record(record::DIMENSIONS, &data.concat())
    }

    /// The shared-string table holding `strings` (one byte a character), cut into records of
    /// at most 8,224 bytes as Excel cuts it: a string running on starts its piece with flags.
    fn shared_strings(strings: &[&str]) -> Vec<u8> {
        let count = u32::try_from(strings.len()).unwrap().to_le_bytes();
        let mut pieces = vec![[&count[..], &count].concat()];
        for text in strings {
            let header = [&u16::try_from(text.len()).unwrap().to_le_bytes()[..], &[0]].concat();
            pieces.last_mut().unwrap().extend(header);
            for byte in text.bytes() {
                if pieces.last().unwrap().len() == 8224 {
                    pieces.push(vec![0]);
                }
                pieces.last_mut().unwrap().push(byte);
            }
        }
        let mut records = record(record::SST, &pieces[0]);
        for piece in &pieces[1..] {
            records.extend(record(record::CONTINUE, piece));
        }
        records
    }

    /// An `.xls` of `sheets`, each a name and the records between its BOF and EOF, the
    /// globals holding `shared` (a shared-string table) and `copies` more sheet entries that
    /// start where the first sheet does.
    fn xls(sheets: &[(&str, Vec<Vec<u8>>)], shared: &[u8], copies: usize) -> Vec<u8> {
        let bound_sheet = |start: usize, name: &str| {
            let start = u32::try_from(start).unwrap().to_le_bytes();
            let name_length = u8::try_from(name.len()).unwrap();
            let data = [&start[..], &[0, 0, name_length, 0], name.as_bytes()];
            record(record::BOUND_SHEET, &data.concat())
        };
        let names: Vec<String> = sheets
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .chain((0..copies).map(|copy| format!("Copy{copy}")))
            .collect();
        let globals_length = bof(0x0005).len()
            + shared.len()
            + names
                .iter()
                .map(|name| bound_sheet(0, name).len())
                .sum::<usize>()
            + record(record::EOF, &[]).len();
        let mut bodies = Vec::new();
        let mut starts = Vec::new();
        for (_, records) in sheets {
            starts.push(globals_length + bodies.len());
            bodies.extend(bof(0x0010));
            bodies.extend(records.concat());
            bodies.extend(record(record::EOF, &[]));
        }
        starts.extend(std::iter::repeat_n(starts[0], copies));
        let mut stream = bof(0x0005);
        stream.extend(shared);
        for (&start, name) in starts.iter().zip(&names) {
            stream.extend(bound_sheet(start, name));
        }
        stream.extend(record(record::EOF, &[]));
        assert_eq!(stream.len(), globals_length);
        stream.extend(bodies);
        // Version 3 (512-byte sectors), as Excel writes them.
        let mut file =
            cfb::CompoundFile::create_with_version(cfb::Version::V3, Cursor::new(Vec::new()))
                .unwrap();
        file.create_stream("/Workbook")
            .unwrap()
            .write_all(&stream)
            .unwrap();
        file.flush().unwrap();
        file.into_inner().into_inner()
    }

    fn refusal(bytes: &[u8], limit: u64) -> String {
        let started = std::time::Instant::now();
        let error = workbook_text(bytes, limit).unwrap_err();
        let error = scar_core::ErrorChain(&error).to_string();
        assert!(
            started.elapsed().as_secs() < 2,
            "refused only after {:?}",
            started.elapsed()
        );
        error
    }

    #[test]
    fn an_xls_is_read_as_its_cells() {
        let sheet = vec![
            dimensions((0, 2), (0, 2)),
            shared(0, 0, 0),
            shared(0, 1, 1),
            number(1, 0, 2.5),
            shared(1, 1, 2),
        ];
        let strings = shared_strings(&["Height", "Port", "Kalmar"]);
        let bytes = xls(&[("Tides", sheet)], &strings, 0);
        check_layout(&bytes, MIB).unwrap();
        let (text, headings) = workbook_text(&bytes, MIB).unwrap();
        assert_eq!(headings.len(), 1);
        assert!(
            text.contains("Tides") && text.contains("2.5") && text.contains("Kalmar"),
            "{text}"
        );
    }

    #[test]
    fn cells_at_opposite_corners_are_refused_before_they_are_laid_out() {
        // 256 × 65,536 cells between them: 512 MiB laid out for two values.
        let corners = vec![number(0, 0, 1.0), number(u16::MAX, 255, 2.0)];
        let bytes = xls(&[("Sheet1", corners)], &[], 0);
        assert!(bytes.len() < 4096);
        let error = refusal(&bytes, 50 * MIB);
        assert!(error.contains("16777216 cells"), "{error}");
        // A formula's text value with no formula before it is placed at A1.
        let string = record(record::STRING, &[0, 0, 0]);
        let far = vec![string, number(u16::MAX, 255, 2.0)];
        let error = refusal(&xls(&[("Sheet1", far)], &[], 0), 50 * MIB);
        assert!(error.contains("16777216 cells"), "{error}");
        // Close together they are read.
        let near = vec![number(0, 0, 1.0), number(40, 30, 2.0)];
        workbook_text(&xls(&[("Sheet1", near)], &[], 0), 50 * MIB).unwrap();
    }

    #[test]
    fn declared_dimensions_are_refused_before_room_is_reserved_for_them() {
        for rows in [(0, u32::MAX), (7, 3)] {
            let sheet = vec![dimensions(rows, (0, 200)), number(0, 0, 1.0)];
            let error = refusal(&xls(&[("Sheet1", sheet)], &[], 0), 50 * MIB);
            assert!(error.contains("declares or spans"), "{rows:?}: {error}");
        }
    }

    #[test]
    fn a_shared_string_is_counted_in_every_cell_before_it_is_copied() {
        // 20,000 characters, so the string runs over three records.
        let long = "tide ".repeat(4000);
        let strings = shared_strings(&["Port", &long]);
        let cells: Vec<Vec<u8>> = (0..1000).map(|row| shared(row, 0, 1)).collect();
        let bytes = xls(&[("Sheet1", cells)], &strings, 0);
        assert!(bytes.len() < 64 * 1024);
        let error = check_layout(&bytes, 16 * MIB).unwrap_err().to_string();
        assert!(error.contains("cells hold more than"), "{error}");
        // Twice it fits.
        let twice = vec![shared(0, 0, 1), shared(1, 0, 1)];
        workbook_text(&xls(&[("Sheet1", twice)], &strings, 0), 16 * MIB).unwrap();
    }

    #[test]
    fn a_shared_string_table_over_too_many_records_is_refused() {
        let mut strings = record(record::SST, &[0; 8]);
        for _ in 0..=MAX_CONTINUES {
            strings.extend(record(record::CONTINUE, &[]));
        }
        let sheets = [("Sheet1", vec![number(0, 0, 1.0)])];
        let error = refusal(&xls(&sheets, &strings, 0), 50 * MIB);
        assert!(error.contains("continuation records"), "{error}");
    }

    #[test]
    fn shared_string_lengths_follow_characters_into_the_next_record() {
        // "abcde", one byte a character, cut after "ab"; then "xy" in two bytes a character.
        let first: &[u8] = &[5, 0, 0, b'a', b'b'];
        let second: &[u8] = &[0, b'c', b'd', b'e', 2, 0, 1, b'x', 0, b'y', 0];
        assert_eq!(string_lengths(&[first, second]), [15, 6]);
        // An empty piece is an empty string; characters starting a piece follow its flags.
        let empty: &[u8] = &[];
        assert_eq!(
            string_lengths(&[&[1, 0, 0, b'a'], empty, &[2, 0, 0, b'b', b'c']]),
            [3, 0, 6]
        );
        let header_only: &[u8] = &[2, 0, 0];
        let run_on: &[u8] = &[1, b'x', 0, b'y', 0];
        assert_eq!(string_lengths(&[header_only, run_on]), [6]);
        // Formatting runs and extra bytes are skipped; a string cut short ends the list.
        let rich: &[u8] = &[
            1,
            0,
            0x8 | 0x4,
            1,
            0,
            2,
            0,
            0,
            0,
            b'z',
            1,
            2,
            3,
            4,
            9,
            9,
            3,
            0,
        ];
        assert_eq!(string_lengths(&[rich]), [3]);
    }

    #[test]
    fn sheets_read_from_the_same_records_are_refused() {
        // Each entry would lay the same 2,000 cells out again.
        let cells: Vec<Vec<u8>> = (0..2000).map(|row| number(row, 0, 1.0)).collect();
        let sheets = [("Sheet1", cells)];
        check_layout(&xls(&sheets, &[], 0), MIB).unwrap();
        let error = refusal(&xls(&sheets, &[], 5000), MIB);
        assert!(error.contains("read from the same records"), "{error}");
    }
}
