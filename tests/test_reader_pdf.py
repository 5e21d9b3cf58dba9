"""Reading PDF: running headers and footers, hyphenation, ligatures."""

from __future__ import annotations

from ingestion.chunking import split_sections
from ingestion.loaders import load_document


def test_pdf_running_headers_footers_and_page_numbers_are_not_headings(tmp_path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pages = [
        ("Leave Policy", "1. Sick Leave", "Employees get 10 sick days."),
        (None, "2. Vacation", "Employees get 25 vacation days."),
        (None, "3. Parental Leave", "Primary caregivers get 16 weeks."),
    ]
    for number, (title, heading, body) in enumerate(pages, start=1):
        pdf.add_page()
        pdf.cell(0, 8, "Acme Corp Confidential", new_x="LMARGIN", new_y="NEXT")
        for line in (title, heading, body):
            if line:
                pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
        pdf.set_y(-20)
        pdf.cell(0, 8, f"Page {number} of 3")
    path = tmp_path / "leave.pdf"
    pdf.output(str(path))
    text = load_document(path).text
    # Page 1's banner stays (at the top of a first page it is usually the title); its repeats
    # and the page numbers go, so they never become the section of what follows them.
    assert text.count("Acme Corp Confidential") == 1 and "Page" not in text
    assert [s.heading_path[-1] for s in split_sections(text)] == [
        "Leave Policy",
        "1. Sick Leave",
        "2. Vacation",
        "3. Parental Leave",
    ]


def test_pdf_heading_after_a_list_does_not_join_its_last_item(tmp_path) -> None:
    """ "- Meals" then "Non-Reimbursable Items": joined, the item would read as never reimbursed."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    for line in (
        "Expense Policy",
        "Reimbursable items include",
        "- Taxis",
        "- Meals",
        "Non-Reimbursable Items",
        "Alcohol is never reimbursed.",
    ):
        pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "expenses.pdf"
    pdf.output(str(path))
    sections = split_sections(load_document(path).text)
    assert [(s.heading_path[-1], s.body.splitlines()[-1]) for s in sections] == [
        ("Expense Policy", "- Meals"),
        ("Non-Reimbursable Items", "Alcohol is never reimbursed."),
    ]


def test_pdf_words_hyphenated_at_line_ends_are_joined(tmp_path) -> None:
    """ "reim-" / "bursed" must read "reimbursed" (search and the evaluator never match
    "reim- bursed"); a compound cut at its own hyphen keeps it: "part-time"; a suspended hyphen
    ("Pre- and post-trip") keeps its space; the document's own spelling elsewhere decides first
    ("onboarding"), and a line start that is no word ("ⓐ") leaves the break alone."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    for line in (
        "Expense Policy",
        "Claims must be reim-",
        "bursed within 30 days. Part-",
        "time staff and self-",
        "employed contractors are covered. Travel ex-",
        "penses over 500-",
        "EUR need approval. Ask HR-",
        "Ops first. Pre-",
        "and post-trip approvals apply to full-",
        "and/or part-time staff. Hotel-",
        "und Flugkosten. The fee is pay-",
        "able with per-",
        "mission of the on-",
        "boarding team.",
        "We mean onboarding.",
    ):
        pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "expenses.pdf"
    pdf.output(str(path))
    text = load_document(path).text
    assert (
        "Claims must be reimbursed within 30 days. Part-time staff and self-employed contractors are "
        "covered. Travel expenses over 500- EUR need approval. Ask HR- Ops first. Pre- and post-trip approvals "
        "apply to full- and/or part-time staff. Hotel- und Flugkosten. The fee is payable with permission of the "
        "onboarding team."
    ) in text, text
    from ingestion.loaders import _reflow_pdf_lines

    # A line that opens with a lowercase letter that is no word character must not fail the file.
    assert _reflow_pdf_lines("Gifts are non-\n\u24d0 listed below.") == "Gifts are non- \u24d0 listed below."


def test_ligatures_and_invisible_break_hints_are_read_as_plain_letters(tmp_path) -> None:
    path = tmp_path / "finance.txt"
    path.write_text(
        "Finance Policy\n\nThe \ufb01nance team con\ufb01rms o\ufb00sites; reim\u00adbursement takes\u200b 5 days.\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "The finance team confirms offsites; reimbursement takes 5 days." in text, text
