"""Reading HTML: the content, not the page around it; tables; hostile nesting."""

from __future__ import annotations

import pytest

from ingestion.chunking import first_title, split_sections
from ingestion.loaders import load_document


def test_html_reads_the_content_not_the_page_around_it(tmp_path) -> None:
    """An intranet page: site header with its logo heading, menus, a cookie banner, a sidebar and
    the site footer are not policy; the article's own footer is. The page's title loses the site name."""
    path = tmp_path / "travel.html"
    path.write_text(
        "<html><head><title>Travel Policy - Acme Intranet</title></head><body>"
        "<header><h1>Acme Intranet</h1><input placeholder='Search'></header>"
        "<div id='topnav'><ul><li>Home</li><li>HR</li></ul></div>"
        "<div class='cookie-banner'><h2>We value your privacy</h2><button>Accept all</button></div>"
        "<aside><h3>Related articles</h3><p>Old travel FAQ</p></aside>"
        "<article><h2>Travel Policy</h2><h3>Flights</h3><p>Economy only. Business class needs the CFO's approval "
        "for flights over eight hours, booked through the travel portal at least fourteen days ahead.</p>"
        "<footer>Supersedes version 3.</footer></article>"
        "<div id='footer'>© 2024 Acme Corp | Privacy</div></body></html>",
        encoding="utf-8",
    )
    loaded = load_document(path)
    assert loaded.title == "Travel Policy"
    sections = split_sections(loaded.text)
    assert [(s.heading_path, s.body) for s in sections] == [
        (
            ("Travel Policy", "Flights"),
            "Economy only. Business class needs the CFO's approval for flights over eight "
            "hours, booked through the travel portal at least fourteen days ahead.\n\n"
            "Supersedes version 3.",
        )
    ]


def test_html_drops_struck_and_hidden_text_and_keeps_numbers_and_cells_in_place(tmp_path) -> None:
    """A struck rule no longer applies and must not stand next to the one that does; a footnote must
    not glue onto an amount; a merged cell must not shift a row's values into other columns."""
    path = tmp_path / "expenses.html"
    path.write_text(
        "<html><head><style>.c3{color:red;text-decoration:line-through}</style></head><body><h1>Expense Policy</h1>"
        "<p>Meals: <strike>$50</strike><del>$55</del><s>$60</s> $75 per day.</p>"
        "<p>Per diem <span style='text-decoration: line-through'>$40</span> $60.</p>"
        "<p><span class='c3'>Fathers receive 2 weeks.</span>All parents receive 16 weeks.</p>"
        "<div hidden>Draft: meals up to 100 EUR.</div><div style='display:none'>Old rule: receipts above 10 EUR.</div>"
        "<p># of carry-over days: 5</p>"
        "<p>The nightly cap is 200<sup>1</sup> EUR, from the 1<sup>st</sup> of May.</p>"
        "<p>Write to hr_benefits@acme.com about PTO_CARRY <img src='flow.png' alt='(Finance pays within 30 days)'></p>"
        "<details><summary>Hotel cap in London?</summary>250 EUR per night.</details>"
        "<h2>Rates <a class='headerlink' href='#rates'>¶</a></h2>"
        "<table><tr><th>Region</th><th>City</th><th>Hotel cap</th><th>Meals</th></tr>"
        "<tr><td rowspan='2'>Europe</td><td>Paris</td><td>250</td><td>80</td></tr>"
        "<tr><td>Berlin</td><td>180</td><td>60</td></tr><tr><td>Asia</td><td>Tokyo | Osaka</td><td>300</td><td>90</td></tr>"
        "</table></body></html>",
        encoding="utf-8",
    )
    text = load_document(path).text
    for gone in ("$50", "$55", "$60 ", "$40", "Fathers"):
        assert gone not in text, (gone, text)
    # Hidden is not deleted: tab panels and accordions hide policy text until clicked.
    assert "Draft: meals up to 100 EUR." in text and "Old rule: receipts above 10 EUR." in text
    for kept in (
        "$75 per day.",
        "Per diem $60.",
        "All parents receive 16 weeks.",
        "200¹ EUR, from the 1st of May",
        "hr_benefits@acme.com about PTO_CARRY (Finance pays within 30 days)",
        "Hotel cap in London?\n\n250 EUR per night.",
        "| Europe | Berlin | 180 | 60 |",
        "| Asia | Tokyo \\| Osaka | 300 | 90 |",
    ):
        assert kept in text, (kept, text)
    assert [s.heading_path for s in split_sections(text)] == [("Expense Policy",), ("Expense Policy", "Rates")]


def test_html_from_word_and_legacy_pages(tmp_path) -> None:
    """Word's "Save as Web Page": its title style is the title, its conditional list markers
    are not text; a page of unclosed <font> tags nests thousands deep; no charset declared
    and not UTF-8 is windows-1252, what browsers assume."""
    word = tmp_path / "travel.html"
    word.write_text(
        "<html><head><title>Travel Policy</title></head><body><p class=MsoTitle>Travel Policy</p><h1>1. Booking</h1>"
        "<p class=MsoListParagraph><![if !supportLists]><span style='mso-list:Ignore'>·<span>&nbsp;&nbsp;</span></span>"
        "<![endif]>Economy for domestic flights</p>"
        "<p class=MsoListParagraph><![if !supportLists]><span style='mso-list:Ignore'>1.<span>&nbsp;</span></span>"
        "<![endif]>Get approval</p></body></html>",
        encoding="utf-8",
    )
    text = load_document(word).text
    assert "if !supportLists" not in text and "endif" not in text
    assert "- Economy for domestic flights" in text and "1. Get approval" in text
    assert [s.heading_path for s in split_sections(text)] == [("Travel Policy", "1. Booking")]

    legacy = tmp_path / "legacy.html"
    legacy.write_bytes(
        (
            "<html><body><h1>Richtlinie</h1>"
            + "<p><font face=Arial>Regel." * 1500
            + "<p>Übernachtung bis 150 € pro Nacht.</body></html>"
        ).encode("cp1252")
    )
    text = load_document(legacy).text
    assert text.count("Regel.") == 1500 and "Übernachtung bis 150 € pro Nacht." in text


def test_html_content_markers_and_names_are_trusted_only_so_far(tmp_path) -> None:
    """A "main-content" skip-link anchor holds nothing; a privacy notice's class names its
    content, not a banner; a section's header is the section's; accordion questions are buttons;
    a struck cell is emptied in place; a descendant selector strikes nothing on its own."""
    from ingestion.html_reader import html_to_markdown

    def read(html: str) -> str:
        return html_to_markdown(html.encode("utf-8"))

    text = read(
        '<html><head><title>Travel Policy | Acme</title></head><body><div id="content">'
        '<a id="main-content"></a><h1>Travel Policy</h1><p>Economy class for flights under 6 hours.</p></div>'
    )
    assert "Economy class for flights under 6 hours." in text
    assert "We keep payroll data for 10 years." in read(
        '<div class="gdpr-notice-content"><h1>Privacy Notice</h1><p>We keep payroll data for 10 years.</p></div>'
    )
    text = read(
        "<h1>Leave Policy</h1><section><header><h2>Annual leave</h2><p>Applies to all employees</p></header>"
        "<p>25 days per year.</p></section><h3><button>Can I carry over leave?</button></h3><p>5 days.</p>"
    )
    assert [s.heading_path for s in split_sections(text)] == [
        ("Leave Policy", "Annual leave"),
        ("Leave Policy", "Annual leave", "Can I carry over leave?"),
    ]
    text = read(
        "<style>.expired .effective-date{text-decoration:line-through}</style><h1>Meals</h1>"
        "<p class='effective-date'>Effective 1 January 2026</p><table><tr><th>Item</th><th>Old</th>"
        "<th>Limit</th></tr><tr><td>Meals</td><td style='text-decoration:line-through'>40</td><td>50</td></tr>"
        "</table>"
    )
    assert "Effective 1 January 2026" in text and "| Meals | | 50 |" in text
    assert (
        read(
            "<table><thead><tr><th rowspan='2'>Grade</th><th>Cap</th></tr></thead>"
            "<tbody><tr><td>G1</td><td>100</td></tr></tbody></table>"
        ).count("| G1 | 100 |")
        == 1
    )
    assert "Gültig ab 1. März – 50 €" in html_to_markdown(
        '<meta charset="iso-8859-1"><p>Gültig ab 1. März – 50 €</p>'.encode("cp1252")
    )


def test_html_tables_have_one_header_row_and_one_body() -> None:
    """ "Hotel cap" over "Staff" and "Directors": Markdown has one header row, so each column
    carries both labels, not "Hotel cap" with an empty neighbour and the sub-labels as data."""
    from ingestion.html_reader import html_to_markdown

    text = html_to_markdown(
        b"<h1>Travel</h1><table><thead><tr><th rowspan='2'>Region</th><th colspan='2'>Hotel cap</th></tr>"
        b"<tr><th>Staff</th><th>Directors</th></tr></thead>"
        b"<tbody><tr><td>EU</td><td>150 EUR</td><td>250 EUR</td></tr></tbody></table>"
        b"<table><tr><th>Region</th><th>Meals</th></tr><tr><th>EU</th><td>40 EUR</td></tr></table>"
    )
    assert "| Region | Hotel cap Staff | Hotel cap Directors |\n| --- | --- | --- |\n| EU | 150 EUR | 250 EUR |" in text
    assert "| Region | Meals |\n| --- | --- |\n| EU | 40 EUR |" in text  # a row header under one header row stays data
    # A <tfoot> written before the body is read after it, and no section starts a second table.
    text = html_to_markdown(
        b"<table><thead><tr><th>Item</th><th>Cap</th></tr></thead><tfoot><tr><td>Total</td><td>300</td></tr></tfoot>"
        b"<tbody><tr><td>Hotel</td><td>200</td></tr></tbody><tbody><tr><td>Meals</td><td>100</td></tr></tbody></table>"
    )
    assert text.strip() == "| Item | Cap |\n| --- | --- |\n| Hotel | 200 |\n| Meals | 100 |\n| Total | 300 |"
    # Confluence writes column groups; a caption stays a caption; the header line stays.
    text = html_to_markdown(
        b"<table><caption>Caps</caption><colgroup><col/><col/></colgroup><tbody><tr><th>Item</th><th>Cap</th></tr>"
        b"<tr><td>Hotel</td><td>200</td></tr></tbody><tfoot><tr><td>Total</td><td>300</td></tr></tfoot></table>"
    )
    assert text.strip() == "Caps\n\n| Item | Cap |\n| --- | --- |\n| Hotel | 200 |\n| Total | 300 |"
    # Word splits words into runs; a footnote and an image's alt text are part of a label.
    text = html_to_markdown(
        b"<table><tr><th rowspan=2><b>Reg</b><b>ion</b></th><th colspan=2>Hotel c<span>ap</span><sup>1</sup></th></tr>"
        b"<tr><th><b>Direct</b><b>ors</b></th><th><img alt='Staff'></th></tr><tr><td>EU</td><td>1</td><td>2</td></tr>"
        b"</table>"
    )
    assert "| Region | Hotel cap¹ Directors | Hotel cap¹ Staff |\n| --- | --- | --- |\n| EU | 1 | 2 |" in text
    # A footer of header cells written first, a group's label row in a second <tbody>, an empty
    # <thead>, headings inside header cells: none of them joins or breaks the header.
    text = html_to_markdown(
        b"<table><thead></thead><tfoot><tr><th>Total</th><th>260</th></tr></tfoot><tbody><tr><th>Country</th>"
        b"<th>Per diem</th></tr><tr><td>DE</td><td>60</td></tr></tbody><tbody><tr><th>Asia</th><th>JPY</th></tr>"
        b"<tr><td>JP</td><td>8000</td></tr></tbody></table>"
    )
    assert text.strip() == (
        "| Country | Per diem |\n| --- | --- |\n| DE | 60 |\n| Asia | JPY |\n| JP | 8000 |\n| Total | 260 |"
    )
    text = html_to_markdown(
        b"<table><tr><th rowspan=2><h3>Region</h3></th><th colspan=2><h3>Hotel cap</h3></th></tr>"
        b"<tr><th><h3>Staff</h3></th><th><p>Directors</p></th></tr><tr><td>EU</td><td>1</td>"
        b"<td>2</td></tr></table>"
    )
    assert "| Region | Hotel cap Staff | Hotel cap Directors |" in text
    # Rows of header cells that span no columns are rows ("Sick | 10" under "Leave | Days"); an
    # empty <thead> row is no header.
    text = html_to_markdown(
        b"<table><tbody><tr><th>Leave</th><th>Days</th></tr><tr><th>Sick</th><th>10</th></tr>"
        b"<tr><td>Vacation</td><td>25</td></tr></tbody></table>"
    )
    assert "| Leave | Days |\n| --- | --- |\n| Sick | 10 |\n| Vacation | 25 |" in text
    text = html_to_markdown(
        b"<table><thead><tr><th></th></tr></thead><tbody><tr><th>Item</th><th>Cap</th></tr>"
        b"<tr><td>Hotel</td><td>200</td></tr></tbody><tfoot><tr><td>Total</td><td>200</td></tr>"
        b"</tfoot></table>"
    )
    assert text.strip() == "| Item | Cap |\n| --- | --- |\n| Hotel | 200 |\n| Total | 200 |"
    # A group label under the header ("Europe") is no header row.
    text = html_to_markdown(
        b"<table><tr><th>Region</th><th>Cap</th></tr><tr><th colspan=2>Europe</th></tr>"
        b"<tr><td>Germany</td><td>150</td></tr></table>"
    )
    assert "| Region | Cap |\n| --- | --- |\n| Europe | |\n| Germany | 150 |" in text


def test_html_tables_as_word_processors_and_editors_write_them() -> None:
    """Pretty-printed rows, LibreOffice's <col> elements before the first row, a caption, no
    header cells at all: one Markdown table headed by its first row, each row on one line."""
    from ingestion.html_reader import html_to_markdown

    libreoffice = b"""<h2 class="western">Hotel caps</h2>
<table width="100%" cellpadding="4" cellspacing="0">
	<col width="128*"/>
	<col width="128*"/>
	<tr valign="top">
		<td width="50%" style="border: 1px solid #000000"><p>Grade</p></td>
		<td width="50%" style="border: 1px solid #000000"><p>Hotel cap per night</p></td>
	</tr>
	<tr valign="top">
		<td width="50%"><p>Staff</p></td>
		<td width="50%"><p>$200</p></td>
	</tr>
</table>
<p>Receipts are required.</p>"""
    table = "| Grade | Hotel cap per night |\n| --- | --- |\n| Staff | $200 |\n"
    assert table + "\nReceipts are required." in html_to_markdown(libreoffice)
    indented = b"""<table>
  <caption>Caps</caption>
  <thead>
    <tr>
      <th>Grade</th>
      <th>Cap</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <td rowspan="2">Staff</td>
      <td>$200</td>
    </tr>
    <tr>
      <td>$250</td>
    </tr>
  </tbody>
</table>"""
    assert (
        html_to_markdown(indented).strip()
        == "Caps\n\n| Grade | Cap |\n| --- | --- |\n| Staff | $200 |\n| Staff | $250 |"
    )
    # A caption is a paragraph of its own, wherever the table stands.
    assert "See the rates below\n\nRates 2026\n\n| A | B |" in html_to_markdown(
        b"<div>See the rates below<table><caption>Rates 2026</caption><tr><th>A</th><th>B</th></tr>"
        b"<tr><td>1</td><td>2</td></tr></table></div>"
    )


def test_an_html_table_headed_down_its_first_column_is_not_headed_by_its_first_row() -> None:
    """Row headers (<th> opening every row) and no header row: an empty header, so a long
    table's chunks do not repeat the first rule over the others. A table with a header row
    over row headers keeps it."""
    from ingestion.html_reader import html_to_markdown

    row_headed = (
        b"<table><tbody><tr><th scope='row'>Sick leave</th><td>10 days</td></tr>"
        b"<tr><th scope='row'>Vacation</th><td>20 days</td></tr></tbody></table>"
    )
    assert (
        html_to_markdown(row_headed).strip() == "| | |\n| --- | --- |\n| Sick leave | 10 days |\n| Vacation | 20 days |"
    )
    both = b"<table><tr><th>Leave</th><th>Days</th></tr><tr><th>Sick leave</th><td>10</td></tr></table>"
    assert html_to_markdown(both).strip() == "| Leave | Days |\n| --- | --- |\n| Sick leave | 10 |"
    # Cut into chunks, a long one keeps its empty header: no chunk is headed by the first rule.
    from crag.minilm import minilm_folder
    from ingestion.chunking import chunk_markdown, word_piece_counter

    long_table = (
        b"<h1>Leave</h1><table>"
        + b"".join(
            f"<tr><th>Leave kind {i}</th><td>{i + 1} days a year, asked for in the HR portal</td></tr>".encode()
            for i in range(60)
        )
        + b"</table>"
    )
    chunks = chunk_markdown(html_to_markdown(long_table), word_piece_counter(str(minilm_folder())))
    assert len(chunks) > 1
    for chunk in chunks:
        table = [line for line in chunk.text.split("\n") if line.startswith("|")]
        assert table[:2] == ["| | |", "| --- | --- |"], chunk.text
    assert sum(chunk.text.count("| Leave kind 0 |") for chunk in chunks) == 1


def test_html_keeps_what_names_itself_furniture_but_is_policy(tmp_path) -> None:
    """A policy header with its effective date, tab labels, a sidebar of key limits, a second
    <main>: policy text, kept. Link menus still go. Undeclared non-Western pages get detected."""
    from ingestion.html_reader import html_to_markdown

    def read(html: str, encoding: str = "utf-8") -> str:
        return html_to_markdown(html.encode(encoding))

    text = read(
        "<header><h1>Remote Work Policy</h1><p>Version 3, effective 2026-03-01</p></header><main>"
        "<h2>Eligibility</h2><p>All staff after probation may work remotely two days a week, agreed "
        "with their manager in advance.</p></main>"
    )
    assert "Version 3, effective 2026-03-01" in text and first_title(text) == "Remote Work Policy"
    text = read(
        "<h1>Leave</h1><ul class='nav nav-tabs'><li><a href='#de'>Germany</a></li><li><a href='#fr'>France</a>"
        "</li></ul><div>30 days in Germany.</div><div class='sidebar'><p>Key limits: hotel 180 EUR a night."
        "</p></div><div id='topnav'><a href='/'>Home</a> <a href='/hr'>HR</a></div>"
    )
    assert "- Germany" in text and "Key limits: hotel 180 EUR a night." in text and "Home" not in text
    text = read(
        "<main><h1>Annual leave</h1><p>25 days for all staff, carried over until March.</p></main>"
        "<main><h2>Sick leave</h2><p>10 days paid.</p></main>"
    )
    assert "10 days paid." in text
    assert "Сотрудники получают 28 дней отпуска." in read(
        "<h1>Отпуск</h1><p>Сотрудники получают 28 дней отпуска.</p>", "cp1251"
    )
    assert "25 days." in read("<h1>Leave</h1><p>25 days.</p>", "utf-16-le")
    assert "Manager approves\n\nFinance pays" in read(
        "<h1>Flow</h1><svg><text x='1'>Manager approves</text><text>Finance pays</text></svg>"
    )


@pytest.mark.timeout(60)  # the first rewrite took minutes here: a hang, not a speed target
def test_html_nested_ten_thousand_deep_is_read() -> None:
    from ingestion.html_reader import html_to_markdown

    text = html_to_markdown(("<html><body><h1>Rules</h1>" + "<div>Rule. " * 10_000 + "</body></html>").encode())
    assert text.count("Rule.") == 10_000


def test_html_keeps_every_block_of_text_once(tmp_path) -> None:
    """Confluence-style exports: text in divs and definition lists, nested lists, tables."""
    path = tmp_path / "expenses.html"
    path.write_text(
        "<html><head><title>Expenses</title></head><body><h1>Expenses</h1><div>Claims are paid monthly.</div>"
        "<ul><li>Outer rule<ul><li>Inner rule</li></ul></li></ul><dl><dt>PTO</dt><dd>25 days</dd></dl>"
        "<h2>Limits</h2><table><tr><th>Item</th><th>Limit</th></tr><tr><td><p>Hotel</p></td><td>200 USD</td></tr></table>"
        "<script>var secret = 1;</script></body></html>"
    )
    text = load_document(path).text
    for phrase in (
        "Claims are paid monthly.",
        "Outer rule",
        "Inner rule",
        "PTO",
        "25 days",
        "| Item | Limit |",
        "| Hotel | 200 USD |",
    ):
        assert text.count(phrase) == 1, (phrase, text)
    assert "secret" not in text
    assert [s.heading_path for s in split_sections(text)] == [("Expenses",), ("Expenses", "Limits")]


def test_an_html_blockquote_is_its_text_and_a_code_block_keeps_its_marks(tmp_path) -> None:
    path = tmp_path / "leave.html"
    path.write_text(
        "<html><body><main><h1>Leave</h1><blockquote><p><strong>Note:</strong> ask early.</p></blockquote>"
        "<p>Take 25 days.</p><pre><code>&gt; not a quote</code></pre></main></body></html>",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "# Leave\n\nNote: ask early.\n\nTake 25 days.\n" in text
    assert "> not a quote" in text
