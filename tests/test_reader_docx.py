"""Reading Word (.docx): heading styles, lists, tables, wrappers, tracked changes."""

from __future__ import annotations

from ingestion.chunking import split_sections
from ingestion.loaders import load_document


def test_docx_heading_styles_lists_and_tables(tmp_path) -> None:
    """Word's styles carry the structure: heading levels nest, list items stay items, table
    cells stay cells (short Title-Case cells are not headings), and text in a content
    control is kept. The running header is page furniture."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "Acme Corp Confidential"
    document.add_heading("Travel Policy", level=0)
    document.add_heading("Hotels", level=1)
    document.add_heading("Conference Hotels", level=2)
    document.add_paragraph("The conference hotel may be booked at any rate.")
    document.add_heading("Meals", level=1)
    document.add_paragraph("Reimbursable meals include", style="Normal")
    document.add_paragraph("Client Dinners", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, column), value in {
        (0, 0): "Role",
        (0, 1): "Daily Limit",
        (1, 0): "Senior Staff",
        (1, 1): "75 USD",
    }.items():
        table.cell(row, column).text = value
    document.element.body.append(
        parse_xml(
            f"<w:sdt {nsdecls('w')}><w:sdtContent><w:p><w:r><w:t>Alcohol is never reimbursed.</w:t></w:r></w:p>"
            "</w:sdtContent></w:sdt>"
        )
    )
    path = tmp_path / "travel.docx"
    document.save(str(path))

    loaded = load_document(path)
    assert loaded.title == "Travel Policy"
    assert "Acme Corp Confidential" not in loaded.text
    assert "- Client Dinners" in loaded.text
    assert "| Role | Daily Limit |" in loaded.text and "| Senior Staff | 75 USD |" in loaded.text
    sections = split_sections(loaded.text)
    assert [s.heading_path for s in sections] == [
        ("Travel Policy", "Hotels", "Conference Hotels"),
        ("Travel Policy", "Meals"),
    ]
    assert sections[-1].body.endswith("Alcohol is never reimbursed.")


W_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def test_docx_text_in_word_wrappers_is_read_once(tmp_path) -> None:
    """Tracked insertions, inline content controls, fields, smart tags and text boxes hold text
    that python-docx's Paragraph.text skips; deleted text and a drawing's fallback copy are not
    part of the document."""
    import docx
    from docx.oxml import parse_xml

    mc = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    paragraphs = [
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Economy class is required. </w:t></w:r>'
        '<w:ins w:id="1" w:author="a"><w:r><w:t>Flights over 6 hours may be booked in business class.</w:t></w:r></w:ins>'
        '<w:del w:id="2" w:author="a"><w:r><w:delText>Never business.</w:delText></w:r></w:del></w:p>',
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Employees get </w:t></w:r><w:sdt><w:sdtContent><w:r><w:t>25</w:t></w:r>'
        '</w:sdtContent></w:sdt><w:r><w:t xml:space="preserve"> days of leave.</w:t></w:r></w:p>',
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Send claims to </w:t></w:r><w:fldSimple w:instr="MERGEFIELD email">'
        '<w:r><w:t>expenses@example.com</w:t></w:r></w:fldSimple><w:r><w:t xml:space="preserve"> within 30 days.</w:t></w:r></w:p>',
        f'<w:p {W_NS} {mc}><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent><w:p><w:r>'
        "<w:t>Report lost laptops within 24 hours.</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback>"
        "<w:pict><w:txbxContent><w:p><w:r><w:t>Report lost laptops within 24 hours.</w:t></w:r></w:p></w:txbxContent>"
        "</w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>",
    ]
    document = docx.Document()
    document.add_heading("Travel Policy", level=1)
    for xml in paragraphs:
        document.element.body.append(parse_xml(xml))
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text, table.cell(1, 0).text = "Item", "Limit", "Meals"
    table.cell(1, 1)._tc.append(
        parse_xml(f"<w:sdt {W_NS}><w:sdtContent><w:p><w:r><w:t>50 EUR</w:t></w:r></w:p></w:sdtContent></w:sdt>")
    )
    document.element.body.append(document.element.body.sectPr)  # the section properties stay last
    path = tmp_path / "travel.docx"
    document.save(str(path))
    text = load_document(path).text
    for sentence in (
        "Economy class is required. Flights over 6 hours may be booked in business class.",
        "Employees get 25 days of leave.",
        "Send claims to expenses@example.com within 30 days.",
        "Report lost laptops within 24 hours.",
        "| Meals | 50 EUR |",
    ):
        assert text.count(sentence) == 1, (sentence, text)
    assert "Never business" not in text


def test_docx_tracked_blocks_and_symbol_font_characters(tmp_path) -> None:
    """Paragraphs inside a block-level tracked insertion or move are the document's, deleted and
    moved-from ones are not; Insert Symbol characters (w:sym) keep their meaning: "≥ 500 EUR"
    must not read "500 EUR"."""
    import docx
    from docx.oxml import parse_xml

    def sym(font: str, char: str) -> str:
        return f'<w:r><w:sym w:font="{font}" w:char="{char}"/></w:r>'

    def run(text: str) -> str:
        return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'

    document = docx.Document()
    document.add_heading("Approvals", level=1)
    for xml in (
        f'<w:ins {W_NS} w:id="1" w:author="a"><w:p>{run("Hotels need a quote.")}</w:p></w:ins>',
        f'<w:del {W_NS} w:id="2" w:author="a"><w:p>{run("Hotels are free.")}</w:p></w:del>',
        f'<w:moveTo {W_NS} w:id="3" w:author="a"><w:p>{run("Taxis need a receipt.")}</w:p></w:moveTo>',
        f'<w:moveFrom {W_NS} w:id="4" w:author="a"><w:p>{run("Taxis need a receipt.")}</w:p></w:moveFrom>',
        f"<w:p {W_NS}>{run('Claims ')}{sym('Symbol', 'F0B3')}{run(' 500 EUR need approval; claims ')}"
        f"{sym('Symbol', 'B3')}{run(' 5 days old need a reason; ')}{sym('Cambria Math', '2264')}"
        f"{run(' 20 ')}{sym('Symbol', 'F06D')}{run('g of caffeine.')}</w:p>",
        f"<w:p {W_NS}>{sym('Wingdings', 'F0A7')}{run(' Receipt attached ')}{sym('Wingdings', 'F0FC')}"
        f"{run(' Manager signed ')}{sym('Wingdings 2', 'F050')}{run(' Budget code ')}{sym('Wingdings', 'F0FB')}"
        f"{run(' Alcohol ')}{sym('Wingdings 2', 'F054')}{run(' Gifts ')}{sym('ZapfDingbats', 'F033')}</w:p>",
        # A deleted symbol has no deleted form (unlike w:delText); fonts named as PDF converters
        # write them; broken codes are skipped, not fatal.
        f'<w:p {W_NS}>{run("Meals ")}<w:del w:id="5" w:author="a">{sym("Symbol", "F0B3")}</w:del>'
        f'<w:ins w:id="6" w:author="a">{sym("SymbolMT", "F0A3")}</w:ins>{run(" ")}{sym("Symbol MT", "F0A0")}'
        f"{run('60 a day')}{sym('Arial', 'FFFFFFF')}{sym('Arial', 'D800')}{sym('Mystery Font', 'F0B3')}"
        f"{sym('Arial', '00E9')}{run('.')}</w:p>",
    ):
        document.element.body.append(parse_xml(xml))
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "approvals.docx"
    document.save(str(path))
    text = load_document(path).text
    assert text.count("Hotels need a quote.") == 1 and text.count("Taxis need a receipt.") == 1, text
    assert "Hotels are free" not in text
    assert "Claims ≥ 500 EUR need approval; claims ≥ 5 days old need a reason; ≤ 20 μg of caffeine." in text, text
    assert "Receipt attached ✓ Manager signed ✓ Budget code ✗ Alcohol ☒ Gifts ✓" in text, text
    assert "Meals ≤ €60 a dayé." in text, text
    assert not any(0xE000 <= ord(c) <= 0xF8FF for c in text)


def test_docx_merged_cells_placeholders_numbering_and_second_titles(tmp_path) -> None:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("Code of Conduct", level=0)
    document.add_heading("and Ethics Guide", level=0)
    numbered = '<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>'
    for xml in (
        f"<w:p {W_NS}>{numbered}<w:r><w:t>Gifts and Hospitality</w:t></w:r></w:p>",
        f"<w:p {W_NS}><w:r><w:t>Declare gifts over 50 EUR.</w:t></w:r></w:p>",
        f'<w:p {W_NS}><w:r><w:t xml:space="preserve">Owner: </w:t></w:r><w:sdt><w:sdtPr><w:showingPlcHdr/></w:sdtPr>'
        "<w:sdtContent><w:r><w:t>Click or tap here to enter text.</w:t></w:r></w:sdtContent></w:sdt></w:p>",
        f'<w:p {W_NS}><w:r><w:t>Name</w:t></w:r><w:r><w:ptab w:relativeTo="margin" w:alignment="right" '
        'w:leader="none"/></w:r><w:r><w:t>Value</w:t></w:r></w:p>',
        f"<w:p {W_NS}><w:r><w:ruby><w:rubyPr/><w:rt><w:r><w:t>kanji</w:t></w:r></w:rt><w:rubyBase><w:r>"
        "<w:t>漢字</w:t></w:r></w:rubyBase></w:ruby></w:r></w:p>",
    ):
        document.element.body.append(parse_xml(xml))
    table = document.add_table(rows=3, cols=3)
    for (row, column), value in {
        (0, 0): "Category",
        (0, 1): "Item",
        (0, 2): "Limit",
        (1, 0): "Travel",
        (1, 1): "Meals",
        (1, 2): "60 EUR",
        (2, 1): "Taxis",
        (2, 2): "40 EUR",
    }.items():
        table.cell(row, column).text = value
    table.cell(1, 0).merge(table.cell(2, 0))
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "conduct.docx"
    document.save(str(path))
    text = load_document(path).text
    assert "and Ethics Guide" in text
    assert "Click or tap" not in text and "Name Value" in text and "漢字" in text and "kanji" not in text
    assert "| Travel | Taxis | 40 EUR |" in text
    sections = split_sections(text)
    assert ("Code of Conduct", "Gifts and Hospitality") in [s.heading_path for s in sections]


def test_docx_numbered_normal_paragraphs_next_to_each_other_are_a_list(tmp_path) -> None:
    import docx
    from docx.oxml import parse_xml

    numbered = '<w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>'
    document = docx.Document()
    document.add_heading("Expenses", level=1)
    for line, is_numbered in (
        ("We reimburse:", False),
        ("Flights", True),
        ("Hotels", True),
        ("Meals", True),
        ("Receipts are required for every claim.", False),
    ):
        document.element.body.append(
            parse_xml(f"<w:p {W_NS}>{numbered if is_numbered else ''}<w:r><w:t>{line}</w:t></w:r></w:p>")
        )
    document.element.body.append(
        parse_xml(
            f'<w:p {W_NS}><w:sdt><w:sdtPr><w:showingPlcHdr w:val="false"/></w:sdtPr><w:sdtContent><w:r>'
            "<w:t>Employees get 25 days.</w:t></w:r></w:sdtContent></w:sdt></w:p>"
        )
    )
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "expenses.docx"
    document.save(str(path))
    text = load_document(path).text
    assert "- Flights\n\n- Hotels\n\n- Meals" in text and "Employees get 25 days." in text
    assert [s.heading_path for s in split_sections(text)] == [("Expenses",)]


def test_docx_numbered_headings_over_numbered_subheadings_stay_headings(tmp_path) -> None:
    import docx
    from docx.oxml import parse_xml

    def numbered(text: str, level: int) -> str:
        return (
            f'<w:p {W_NS}><w:pPr><w:numPr><w:ilvl w:val="{level}"/><w:numId w:val="3"/></w:numPr></w:pPr>'
            f"<w:r><w:t>{text}</w:t></w:r></w:p>"
        )

    document = docx.Document()
    document.add_heading("Leave Policy", level=0)
    for xml in (
        numbered("Annual Leave", 0),
        numbered("Entitlement", 1),
        f"<w:p {W_NS}><w:r><w:t>25 days.</w:t></w:r></w:p>",
        numbered("Sick Leave", 0),
        numbered("Notification", 1),
        f"<w:p {W_NS}><w:r><w:t>Tell your manager before 10:00.</w:t></w:r></w:p>",
    ):
        document.element.body.append(parse_xml(xml))
    document.element.body.append(document.element.body.sectPr)
    path = tmp_path / "leave.docx"
    document.save(str(path))
    sections = split_sections(load_document(path).text)
    assert sections[-1].heading_path[-1] == "Notification" and sections[-1].body == "Tell your manager before 10:00."


def test_docx_styles_based_on_each_other_in_a_loop_still_load(tmp_path) -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    first = document.styles.add_style("Policy A", WD_STYLE_TYPE.PARAGRAPH)
    second = document.styles.add_style("Policy B", WD_STYLE_TYPE.PARAGRAPH)
    first.base_style, second.base_style = second, first
    document.add_paragraph("Leave Policy")
    document.add_paragraph("Employees get 25 days.", style="Policy A")
    path = tmp_path / "loop.docx"
    document.save(str(path))
    assert "Employees get 25 days." in load_document(path).text


def test_docx_with_only_a_title_style_still_finds_typed_headings(tmp_path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Expense Policy", level=0)
    for line in ("1 Meals", "Dinners up to 50 EUR.", "2 Hotels", "Up to 200 EUR per night."):
        document.add_paragraph(line)
    path = tmp_path / "expenses.docx"
    document.save(str(path))
    assert [s.heading_path for s in split_sections(load_document(path).text)] == [
        ("Expense Policy", "1 Meals"),
        ("Expense Policy", "2 Hotels"),
    ]


def test_docx_without_heading_styles_still_finds_typed_headings(tmp_path) -> None:
    import docx

    document = docx.Document()
    for line in (
        "Leave Policy",
        "Sick Leave",
        "Employees get 10 sick days.",
        "Parental Leave",
        "Primary caregivers get 16 weeks.",
    ):
        document.add_paragraph(line)
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Carry Over", "Five Days"
    path = tmp_path / "leave.docx"
    document.save(str(path))
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Leave Policy", "Sick Leave"), ("Leave Policy", "Parental Leave")]
    assert sections[-1].body.splitlines()[-1] == "| Carry Over | Five Days |"
