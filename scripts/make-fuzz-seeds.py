"""Writes small files shaped like the inputs that once took the loaders down, as seeds for the
`load` fuzz target: from each, the fuzzer's mutations reach the next bomb of its kind (a larger
span, a deeper nesting, another repeat count) within the target's memory and time limits.

- a spreadsheet (.xlsx) with cells at opposite corners of its largest range, and one whose
  shared string is used by many cells;
- an OpenDocument sheet (.ods) repeating one cell across many rows and columns;
- a CSV file whose header names are long and many;
- a mail carrying a mail carrying a mail, 40 deep;
- a .docx whose runs nest 2,000 deep, and an .odt whose spans do.

Standard library only. usage: python3 make-fuzz-seeds.py OUTDIR
"""

import sys
import zipfile
from email.message import EmailMessage
from pathlib import Path

CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/{main}" ContentType="{kind}"/>
</Types>"""

RELS = """<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="{main}"/>
</Relationships>"""

SHEET_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def xlsx(path, cells, shared=None):
    """A workbook of one sheet holding `cells` ([(reference, xml of the cell's value)])."""
    workbook = (
        f'<workbook xmlns="{SHEET_NS}" xmlns:r="{REL_NS}"><sheets>'
        '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
    )
    workbook_rels = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        'relationships/worksheet" Target="worksheets/sheet1.xml"/>'
        + (
            '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/sharedStrings" Target="sharedStrings.xml"/>'
            if shared is not None
            else ""
        )
        + "</Relationships>"
    )
    rows = {}
    for reference, value in cells:
        row = int("".join(c for c in reference if c.isdigit()))
        rows.setdefault(row, []).append(f'<c r="{reference}"{value}</c>')
    sheet_data = "".join(f'<row r="{row}">{"".join(rows[row])}</row>' for row in sorted(rows))
    sheet = f'<worksheet xmlns="{SHEET_NS}"><sheetData>{sheet_data}</sheetData></worksheet>'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        main = "xl/workbook.xml"
        kind = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
        z.writestr("[Content_Types].xml", CONTENT_TYPES.format(main=main, kind=kind))
        z.writestr("_rels/.rels", RELS.format(main=main))
        z.writestr(main, workbook)
        z.writestr("xl/_rels/workbook.xml.rels", workbook_rels)
        z.writestr("xl/worksheets/sheet1.xml", sheet)
        if shared is not None:
            z.writestr("xl/sharedStrings.xml", shared)


def ods(path, rows_repeated, columns_repeated):
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
        '<office:spreadsheet><table:table table:name="Sheet1">'
        f'<table:table-row table:number-rows-repeated="{rows_repeated}">'
        f'<table:table-cell table:number-columns-repeated="{columns_repeated}"'
        ' office:value-type="string"><text:p>ferry</text:p></table:table-cell>'
        "</table:table-row></table:table></office:spreadsheet></office:body>"
        "</office:document-content>"
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        z.writestr("content.xml", content, zipfile.ZIP_DEFLATED)


def nested_mail(depth):
    inner = EmailMessage()
    inner["Subject"] = "The fare"
    inner.set_content("A sea kayak costs 8 euros a crossing.")
    for level in range(depth):
        outer = EmailMessage()
        outer["Subject"] = f"Fwd {level}"
        outer.set_content("See the message attached.")
        outer.add_attachment(inner)
        inner = outer
    return inner.as_bytes()


def docx_nested_runs(path, depth):
    body = "<w:r>" * depth + "<w:t>deep</w:t>" + "</w:r>" * depth
    document = (
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body><w:p>{body}</w:p></w:body></w:document>"
    )
    main = "word/document.xml"
    kind = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", CONTENT_TYPES.format(main=main, kind=kind))
        z.writestr("_rels/.rels", RELS.format(main=main))
        z.writestr(main, document)


def odt_nested_spans(path, depth):
    body = "<text:span>" * depth + "deep" + "</text:span>" * depth
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
        f"<text:p>{body}</text:p></office:text></office:body></office:document-content>"
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content, zipfile.ZIP_DEFLATED)


def main(out):
    out.mkdir(parents=True, exist_ok=True)
    corners = [
        ("A1", ' t="inlineStr"><is><t>ferry</t></is>'),
        ("XFD1048576", ' t="inlineStr"><is><t>kayak</t></is>'),
    ]
    xlsx(out / "far-corners.xlsx", corners)
    shared = (
        f'<sst xmlns="{SHEET_NS}" count="200" uniqueCount="1">'
        f'<si><t>{"fare " * 2000}</t></si></sst>'
    )
    xlsx(
        out / "shared-string.xlsx",
        [(f"A{row}", ' t="s"><v>0</v>') for row in range(1, 201)],
        shared,
    )
    ods(out / "repeated-cell.ods", 1000, 1000)
    header = ",".join(f"a column named at length number {i} " * 4 for i in range(60))
    rows = "\n".join(",".join("x" for _ in range(60)) for _ in range(20))
    (out / "long-header.csv").write_text(f"{header}\n{rows}\n")
    (out / "nested.eml").write_bytes(nested_mail(40))
    docx_nested_runs(out / "nested-runs.docx", 2000)
    odt_nested_spans(out / "nested-spans.odt", 2000)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
