//! The parts of a zip archive (office documents and e-books are zips of XML), read within the
//! size limit, and the XML helpers their readers share.

use std::io::{Cursor, Read};

use zip::ZipArchive;
use zip::result::ZipError;

use super::LoadError;

/// A zip archive whose parts are read within one budget: together they may inflate to at most
/// the size limit, so a small file whose parts inflate to gigabytes is refused, not held.
pub(super) struct Archive<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    kind: &'static str,
    limit: u64,
    inflated: u64,
}

impl<'a> Archive<'a> {
    /// Opens `bytes` as a zip archive; `kind` names the format in errors (`Word`, `EPUB`).
    pub(super) fn open(bytes: &'a [u8], kind: &'static str, limit: u64) -> Result<Self, LoadError> {
        let zip = ZipArchive::new(Cursor::new(bytes)).map_err(|error| corrupt(kind, error))?;
        Ok(Self {
            zip,
            kind,
            limit,
            inflated: 0,
        })
    }

    /// The part named `name` as UTF-8 text, or `None` when the archive has no such part.
    pub(super) fn text(&mut self, name: &str) -> Result<Option<String>, LoadError> {
        let Some(bytes) = self.bytes(name)? else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes).map_err(|error| corrupt(self.kind, error))?;
        Ok(Some(text))
    }

    /// The part named `name` as bytes, or `None` when the archive has no such part.
    pub(super) fn bytes(&mut self, name: &str) -> Result<Option<Vec<u8>>, LoadError> {
        let part = match self.zip.by_name(name) {
            Ok(part) => part,
            Err(ZipError::FileNotFound) => return Ok(None),
            Err(error) => return Err(corrupt(self.kind, error)),
        };
        let budget = self.limit - self.inflated;
        let mut bytes = Vec::new();
        // One byte past the budget tells a part that would exceed it from one that fills it.
        part.take(budget.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|error| corrupt(self.kind, error))?;
        self.inflated += bytes.len() as u64;
        if self.inflated > self.limit {
            return Err(LoadError::InflatesTooLarge { limit: self.limit });
        }
        Ok(Some(bytes))
    }

    /// Inflates every part once, keeping nothing but the first `look` bytes of each for
    /// `visit` (with the part's inflated length), to check that together they fit the limit
    /// before a reader that holds whole parts opens the archive.
    pub(super) fn inflate_all(
        &mut self,
        look: usize,
        mut visit: impl FnMut(&[u8], u64),
    ) -> Result<(), LoadError> {
        let mut head = Vec::new();
        for index in 0..self.zip.len() {
            let part = self
                .zip
                .by_index(index)
                .map_err(|error| corrupt(self.kind, error))?;
            let budget = self.limit - self.inflated;
            let mut part = part.take(budget.saturating_add(1));
            head.clear();
            let read = |error| corrupt(self.kind, error);
            (&mut part)
                .take(look as u64)
                .read_to_end(&mut head)
                .map_err(read)?;
            let rest = std::io::copy(&mut part, &mut std::io::sink()).map_err(read)?;
            let length = head.len() as u64 + rest;
            self.inflated += length;
            if self.inflated > self.limit {
                return Err(LoadError::InflatesTooLarge { limit: self.limit });
            }
            visit(&head, length);
        }
        Ok(())
    }

    /// The part named `name`, which the format requires.
    pub(super) fn required_text(&mut self, name: &str) -> Result<String, LoadError> {
        self.text(name)?
            .ok_or_else(|| corrupt(self.kind, format!("it has no {name}")))
    }
}

/// A corrupt file of the format `kind`, for `reason`.
pub(super) fn corrupt(
    kind: &'static str,
    reason: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> LoadError {
    LoadError::Corrupt {
        kind,
        source: reason.into(),
    }
}

/// Parses XML without a DTD: office parts have none, and refusing them rules out entity
/// expansion bombs.
pub(super) fn parse_xml<'x>(
    xml: &'x str,
    kind: &'static str,
) -> Result<roxmltree::Document<'x>, LoadError> {
    roxmltree::Document::parse(xml).map_err(|error| corrupt(kind, error))
}

/// The value of `node`'s attribute with the local name `name`, whatever its namespace prefix.
pub(super) fn attribute<'x>(node: roxmltree::Node<'x, '_>, name: &str) -> Option<&'x str> {
    node.attributes()
        .find(|attribute| attribute.name() == name)
        .map(|attribute| attribute.value())
}

/// True when `node` is an element with the local name `name`.
pub(super) fn is(node: roxmltree::Node<'_, '_>, name: &str) -> bool {
    node.is_element() && node.tag_name().name() == name
}

/// Visits the nodes under `root` in document order, each with the state its parent's visit
/// passed down (`state` for `root`'s children); a visit returns the state for the node's
/// children, or `None` to leave them out. A loop over a stack, not recursion and not a walk up
/// the ancestors: markup nested a hundred thousand deep takes time in proportion to its size.
pub(super) fn walk<'x, 'i, S: Copy>(
    root: roxmltree::Node<'x, 'i>,
    state: S,
    mut visit: impl FnMut(roxmltree::Node<'x, 'i>, S) -> Option<S>,
) {
    let mut stack: Vec<(roxmltree::Node<'x, 'i>, S)> =
        root.children().rev().map(|child| (child, state)).collect();
    while let Some((node, state)) = stack.pop() {
        if let Some(inner) = visit(node, state) {
            stack.extend(node.children().rev().map(|child| (child, inner)));
        }
    }
}

/// The nodes under `root` in document order, but for those inside an element that `skip`
/// holds (which is itself listed).
pub(super) fn nodes_outside<'x, 'i>(
    root: roxmltree::Node<'x, 'i>,
    skip: impl Fn(roxmltree::Node<'x, 'i>) -> bool,
) -> Vec<roxmltree::Node<'x, 'i>> {
    let mut nodes = Vec::new();
    walk(root, (), |node, ()| {
        nodes.push(node);
        (!skip(node)).then_some(())
    });
    nodes
}

/// The element names of a markup's tables: `tr`/`tc`/`p` in Word and DrawingML, `table-row`/
/// `table-cell`/`p` in OpenDocument.
pub(super) struct TableNames<'a> {
    pub table: &'a str,
    pub row: &'a str,
    pub cell: &'a str,
    pub paragraphs: &'a [&'a str],
}

/// The rows of `table`, leaving out those of tables nested in it (whose text reads into the
/// cell that holds them): each cell's paragraphs, read by `text`, joined by spaces.
pub(super) fn table_rows(
    table: roxmltree::Node,
    names: &TableNames,
    text: impl Fn(roxmltree::Node) -> String,
) -> Vec<Vec<String>> {
    nodes_outside(table, |node| is(node, names.table))
        .into_iter()
        .filter(|row| is(*row, names.row))
        .map(|row| {
            row.children()
                .filter(|cell| is(*cell, names.cell))
                .map(|cell| {
                    cell.descendants()
                        .filter(|p| names.paragraphs.iter().any(|name| is(*p, name)))
                        .map(&text)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        })
        .collect()
}

/// Targets of a package's relationships part (`_rels/….rels`), by relationship id, with the
/// relationship's type.
pub(super) fn relationships(xml: &str, kind: &'static str) -> Result<Vec<Relationship>, LoadError> {
    let document = parse_xml(xml, kind)?;
    Ok(document
        .descendants()
        .filter(|node| is(*node, "Relationship"))
        .filter_map(|node| {
            Some(Relationship {
                id: attribute(node, "Id")?.to_owned(),
                kind: attribute(node, "Type").unwrap_or_default().to_owned(),
                target: attribute(node, "Target")?.to_owned(),
            })
        })
        .collect())
}

/// One entry of a relationships part.
pub(super) struct Relationship {
    pub id: String,
    /// The relationship's type URI, e.g. `…/relationships/notesSlide`.
    pub kind: String,
    /// The part it points at, relative to the folder of the part that owns the relationships.
    pub target: String,
}

/// The archive path of `target` (as a package relationship or an e-book manifest writes it)
/// relative to the folder `base` (empty for the archive's root): `..` climbs, a leading `/` is
/// the root, and `%20`-style escapes are decoded.
pub(super) fn resolve(base: &str, target: &str) -> String {
    let target = percent_decode(target);
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|part| !part.is_empty()).collect()
    };
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// The folder of an archive path: `OEBPS/text/a.xhtml` → `OEBPS/text`.
pub(super) fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(folder, _)| folder)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_targets_resolve_inside_the_archive() {
        assert_eq!(
            resolve("ppt/slides", "../notesSlides/notesSlide1.xml"),
            "ppt/notesSlides/notesSlide1.xml"
        );
        assert_eq!(resolve("ppt", "slides/slide1.xml"), "ppt/slides/slide1.xml");
        assert_eq!(resolve("OEBPS", "/META-INF/x.xml"), "META-INF/x.xml");
        assert_eq!(
            resolve("", "Text/My%20Chapter.xhtml"),
            "Text/My Chapter.xhtml"
        );
        assert_eq!(resolve("a", "../../../b"), "b");
        assert_eq!(folder("OEBPS/text/a.xhtml"), "OEBPS/text");
        assert_eq!(folder("content.opf"), "");
    }

    #[test]
    fn a_file_that_is_not_a_zip_is_corrupt() {
        let error = Archive::open(b"not a zip at all", "Word", 1 << 20)
            .err()
            .unwrap();
        assert!(
            scar_core::ErrorChain(&error)
                .to_string()
                .starts_with("corrupt Word file: "),
            "{error}"
        );
    }
}
