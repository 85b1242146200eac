//! Spreadsheets (`.xlsx`, `.xlsm`, `.xls`, `.ods`) through calamine, and delimited text (`.csv`,
//! `.tsv`): one section per sheet, headed by its name, each row naming its cells' columns.

use std::io::Cursor;

use calamine::{Data, Reader};

use super::outline::Outline;
use super::zipped::{Archive, corrupt};
use super::{Heading, LoadError, decode_utf8};

const KIND: &str = "spreadsheet";

/// The sheets of a workbook, in the workbook's order.
pub(super) fn workbook_text(bytes: &[u8], limit: u64) -> Result<(String, Vec<Heading>), LoadError> {
    // The reader inflates each sheet whole: the parts are counted first, within the limit.
    if bytes.starts_with(b"PK") {
        Archive::open(bytes, KIND, limit)?.inflate_all()?;
    }
    let mut workbook =
        calamine::open_workbook_auto_from_rs(Cursor::new(bytes)).map_err(|e| corrupt(KIND, e))?;
    let mut outline = Outline::default();
    for name in workbook.sheet_names() {
        let range = workbook
            .worksheet_range(&name)
            .map_err(|e| corrupt(KIND, e))?;
        let rows: Vec<Vec<String>> = range
            .rows()
            .map(|row| row.iter().map(cell_text).collect())
            .collect();
        if rows.iter().flatten().any(|cell| !cell.is_empty()) {
            outline.heading(1, &name);
            outline.table(&rows);
        }
    }
    Ok(outline.finish())
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
    use super::*;

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
