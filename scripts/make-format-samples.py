"""Writes one file of each office, e-book and mail format SCAR reads into a folder, with the tools
that write those formats for real (python-docx, python-pptx, openpyxl, odfpy, ebooklib, the
standard library's email package, Pillow for a scanned page), so that the tests read what
people's files hold.

Each file keeps one fact in a table cell, a slide or its notes, a sheet row or a chapter, among
filler paragraphs, so that a question finds it only if the reader kept the structure.

usage: python make-format-samples.py OUTDIR   (run with the Python of scripts/fetch-format-writers)
"""

import sys
from email.message import EmailMessage
from pathlib import Path

FILLER = [
    "The island council publishes this guide every spring for visitors and residents alike.",
    "Opening times change with the seasons, so check the notice board at the harbour office.",
    "Most paths are marked with white posts and are safe in dry weather for walkers of all ages.",
]


def docx(path):
    from docx import Document

    doc = Document()
    doc.add_heading("Island ferry handbook", level=1)
    for line in FILLER:
        doc.add_paragraph(line)
    doc.add_heading("Fares", level=2)
    doc.add_paragraph("Prices below are per crossing unless a column says otherwise.")
    table = doc.add_table(rows=1, cols=3)
    for cell, name in zip(table.rows[0].cells, ["Vehicle", "Single crossing", "Return trip"]):
        cell.text = name
    for row in [
        ["Bicycle", "4 euros", "7 euros"],
        ["Sea kayak", "8 euros", "16 euros"],
        ["Car", "35 euros", "60 euros"],
    ]:
        for cell, value in zip(table.add_row().cells, row):
            cell.text = value
    doc.add_heading("Timetable", level=2)
    doc.add_paragraph("The first boat leaves the mainland at seven and the last returns at nine.")
    doc.save(path)


def odf_table(name, rows):
    """An OpenDocument table of text cells, as text documents and spreadsheets both hold them."""
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import P

    table = Table(name=name)
    table.addElement(TableColumn(numbercolumnsrepeated=len(rows[0])))
    for row in rows:
        table_row = TableRow()
        for value in row:
            cell = TableCell(valuetype="string")
            cell.addElement(P(text=value))
            table_row.addElement(cell)
        table.addElement(table_row)
    return table


def odt(path):
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text="Village library"))
    for line in FILLER:
        doc.text.addElement(P(text=line))
    doc.text.addElement(H(outlinelevel=2, text="Opening hours"))
    hours = [
        ["Day", "Opens", "Closes"],
        ["Weekdays", "09:00", "18:00"],
        ["Saturday", "10:00", "13:30"],
        ["Sunday", "closed", "closed"],
    ]
    doc.text.addElement(odf_table("Hours", hours))
    doc.text.addElement(H(outlinelevel=2, text="Loans"))
    doc.text.addElement(P(text="Books may be borrowed for three weeks and renewed once."))
    doc.save(str(path))


def pptx(path):
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slides = [
        ("Harbour works 2026", ["A plan for the quay, the slipway and the lighthouse"], None),
        (
            "Lighthouse restoration",
            ["New lantern glass", "Repainted tower"],
            "Say that the lighthouse restoration budget is 120,000 euros, half from the region.",
        ),
        ("Next steps", ["Tender in June", "Works from September"], None),
    ]
    for title, bullets, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0]
        for bullet in bullets[1:]:
            body.add_paragraph().text = bullet
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Quay repairs"
    shape = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2))
    for r, row in enumerate([["Section", "Contractor"], ["North quay", "Marwick Stone"],
                             ["Slipway", "Ferris & Daughters"]]):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    deck.save(path)


def xlsx(path):
    from openpyxl import Workbook

    book = Workbook()
    tools = book.active
    tools.title = "Tools"
    for row in [
        ["Item", "Shelf", "Count"],
        ["Claw hammer", "A2", 6],
        ["Angle grinder", "B7", 2],
        ["Spirit level", "A4", 3],
    ]:
        tools.append(row)
    paint = book.create_sheet("Paint")
    for row in [["Colour", "Litres"], ["Harbour blue", 40], ["Signal white", 25]]:
        paint.append(row)
    book.save(path)


def ods(path):
    from odf.opendocument import OpenDocumentSpreadsheet

    doc = OpenDocumentSpreadsheet()
    planting = [
        ["Plant", "Month", "Bed"],
        ["Tulips", "October", "North bed"],
        ["Runner beans", "May", "Kitchen garden"],
        ["Garlic", "November", "Raised bed three"],
    ]
    doc.spreadsheet.addElement(odf_table("Planting", planting))
    doc.save(str(path))


def csv(path):
    path.write_text(
        "Date,High tide,Low tide\n"
        "2026-05-01,06:12,12:30\n"
        "2026-05-02,07:01,13:18\n"
        "2026-05-03,07:49,14:05\n"
    )


def epub(path):
    from ebooklib import epub as book_format

    book = book_format.EpubBook()
    book.set_identifier("scar-sample-guide")
    book.set_title("A walker's guide to the island")
    book.set_language("en")
    chapters = []
    for name, title, text in [
        ("arrival", "Arrival", "The ferry docks beside the fish market. " + FILLER[0]),
        (
            "harbour",
            "The old harbour",
            "The old harbour wall was built in 1794 from granite carried by oxen. " + FILLER[1],
        ),
        ("departure", "Departure", "Leave time to buy smoked fish before the last boat. "),
    ]:
        chapter = book_format.EpubHtml(title=title, file_name=f"{name}.xhtml", lang="en")
        chapter.content = f"<h1>{title}</h1><p>{text}</p><p>{FILLER[2]}</p>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(book_format.EpubNcx())
    book.add_item(book_format.EpubNav())
    book.spine = ["nav", *chapters]
    book_format.write_epub(str(path), book)


def rtf(path):
    # Word's way of marking headings: a stylesheet entry named "heading N" and the outline level.
    path.write_text(
        r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss\fcharset0 Calibri;}}"
        r"{\colortbl ;\red0\green0\blue0;}"
        r"{\stylesheet{\s0 Normal;}{\s1\sbasedon0\snext0\outlinelevel0 heading 1;}}"
        "\n"
        r"{\*\generator Riched20 10.0.19041}\viewkind4\uc1"
        "\n"
        r"\pard\s1\outlinelevel0\b\f0\fs32 Harbour committee minutes\b0\fs22\par"
        "\n"
        r"\pard " + FILLER[1] + r"\par"
        "\n"
        r"\pard The committee agreed that the caf\'e9 on the quay may open until "
        r"midnight in August, and that the fee for a mooring is 12\u8364? a night.\par"
        "\n}"
    )


def eml(path):
    message = EmailMessage()
    message["From"] = "Ana Ruiz <ana@example.org>"
    message["To"] = "harbour-office@example.org"
    message["Subject"] = "Crane inspection results"
    message["Date"] = "Fri, 01 May 2026 09:30:00 +0000"
    message.set_content(
        "Hello,\n\nThe harbour crane passed its inspection, but the cable is worn near the hook "
        "and must be replaced before the summer season.\n\nAna\n"
    )
    message.add_attachment(
        "# Inspection notes\n\nThe crane's load test reached 14 tonnes.\n",
        subtype="markdown",
        filename="inspection-notes.md",
    )
    path.write_bytes(bytes(message))


def scanned_pdf(path):
    # A page that is only an image, as a scanner makes it: no text layer, so only OCR reads it.
    from PIL import Image, ImageDraw, ImageFont

    page = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=56)
    lines = [
        "Harbour notice",
        "",
        "The slipway is closed for repairs",
        "from 3 June to 28 June.",
        "Small boats may use the north beach.",
    ]
    for number, line in enumerate(lines):
        draw.text((150, 200 + 90 * number), line, fill=0, font=font)
    page.save(path, resolution=200)


def bound_pdf(path):
    # A typed page with a text layer and a scanned page bound into one PDF, as an office
    # scanner's output appended to a report makes it: only the second page needs OCR.
    import zlib

    from PIL import Image, ImageDraw, ImageFont

    scan = Image.new("L", (1275, 1650), 255)
    draw = ImageDraw.Draw(scan)
    font = ImageFont.load_default(size=44)
    for number, line in enumerate(["Signed delivery note", "", "The new pontoon arrived", "on 14 May with 22 floats."]):
        draw.text((120, 160 + 70 * number), line, fill=0, font=font)
    pixels = zlib.compress(scan.tobytes())
    typed = b"BT /F1 14 Tf 72 720 Td (Harbour works report) Tj 0 -24 Td (The quay wall was repointed in April.) Tj ET"
    scanned = b"q 612 0 0 792 0 0 cm /Scan Do Q"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(typed), typed),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 7 0 R "
        b"/Resources << /XObject << /Scan 8 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(scanned), scanned),
        b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream"
        % (scan.width, scan.height, len(pixels), pixels),
    ]
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        pdf += b"%010d 00000 n \n" % offset
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(pdf))


WRITERS = {
    "ferry-handbook.docx": docx,
    "library.odt": odt,
    "harbour-works.pptx": pptx,
    "workshop-inventory.xlsx": xlsx,
    "garden.ods": ods,
    "tides.csv": csv,
    "walkers-guide.epub": epub,
    "committee-minutes.rtf": rtf,
    "crane-inspection.eml": eml,
    "scanned-notice.pdf": scanned_pdf,
    "bound-report.pdf": bound_pdf,
}

if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, write in WRITERS.items():
        write(out / name)
