"""Reading Markdown and plain text: headings, lists, fences, front matter, embedded images."""

from __future__ import annotations

import pytest

from ingestion.chunking import split_sections
from ingestion.loaders import load_document


def test_a_numbered_list_in_plain_text_is_not_a_run_of_headings(tmp_path) -> None:
    """Loose list items look like numbered headings; as headings, the last item would own
    the paragraph after it ("2. Get approval" > "Flights over 6 hours ...")."""
    path = tmp_path / "travel.txt"
    path.write_text(
        "Travel Policy\n\nBefore you travel:\n\n1. Book flights through Navan\n\n"
        "2. Get approval from your manager\n\nFlights over 6 hours may be business class.\n\n"
        "3. Hotels\n\nUp to 200 USD per night.\n\n3.1 Conference hotels\n\nAny rate.\n"
    )
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [
        ("Travel Policy",),
        ("Travel Policy", "3. Hotels"),
        ("Travel Policy", "3. Hotels", "3.1 Conference hotels"),
    ]
    assert sections[0].body.splitlines()[-1] == "Flights over 6 hours may be business class."


def test_markdown_front_matter_and_setext_headings(tmp_path) -> None:
    """Static-site exports: YAML front matter is metadata (its title names the document) and
    "====" / "----" underlines are headings. An underline after a list item stays a rule."""
    path = tmp_path / "travel.md"
    path.write_text(
        '---\ntitle: "Travel Policy"\nowner: finance\ntags:\n  - travel\n---\n'
        "Applies to all staff.\n\nHotels\n------\n\nUp to 200 USD per night.\n\n- Taxis\n---\n\n"
        "```\ncode\n===\n```\n"
    )
    document = load_document(path)
    assert document.title == "Travel Policy"
    assert "owner: finance" not in document.text
    sections = split_sections(document.text)
    assert [s.heading_path for s in sections] == [("Travel Policy",), ("Travel Policy", "Hotels")]
    assert sections[1].body.startswith("Up to 200 USD per night.") and "- Taxis\n---" in sections[1].body
    assert "code\n===" in sections[1].body


def test_markdown_images_embedded_as_base64_keep_only_their_alt_text(tmp_path) -> None:
    blob = "iVBORw0KGgo" + "A" * 20_000
    path = tmp_path / "offices.md"
    path.write_text(
        f"# Offices\n\nThe Lisbon office opens at 8.\n\n![Floor plan](data:image/png;base64,{blob})\n\n"
        f'<img src="data:image/png;base64,{blob}"> Badges are collected at reception.\n'
    )
    text = load_document(path).text
    assert "AAAA" not in text and len(text) < 200
    assert "Floor plan" in text and "Badges are collected at reception." in text


def test_numbered_lists_and_numbered_headings_apart(tmp_path) -> None:
    """A list numbered "1." "2." does not swallow a heading numbered "3" after it, and a run of
    Title-Case numbered headings (a section with no text yet) stays headings."""
    path = tmp_path / "leave.txt"
    path.write_text(
        "Leave Policy\n\nTo request leave:\n\n1. Open the HR portal\n\n2. Submit the request\n\n"
        "3 Sick Leave\n\nTen days a year.\n\n4 Approval\n\n5 Per Diem\n\n40 EUR a day.\n"
    )
    sections = split_sections(load_document(path).text)
    assert [s.heading_path[-1] for s in sections] == ["Leave Policy", "3 Sick Leave", "4 Approval", "5 Per Diem"]
    assert sections[0].body.endswith("2. Submit the request")


def test_plain_text_rules_and_markdown_fences_and_faq_headings(tmp_path) -> None:
    """A "~~~" rule under a sentence in plain text is no fence; a bare "````" fence after a
    line of text in Markdown is one; FAQ-style "# ...?" headings keep a text file Markdown."""
    rule = tmp_path / "travel.txt"
    rule.write_text(
        "Travel Policy\n\nRead this before booking\n~~~\n\nHotels\n\nUp to 200 USD.\n\nMeals\n\n50 USD a day.\n"
    )
    assert [s.heading_path[-1] for s in split_sections(load_document(rule).text)][-2:] == ["Hotels", "Meals"]
    fence = tmp_path / "backups.md"
    fence.write_text("# Backups\n\nRestore:\n````\n# restore the database\n````\n\nBackups are kept for 30 days.\n")
    sections = split_sections(load_document(fence).text)
    assert [s.heading_path for s in sections] == [("Backups",)] and "kept for 30 days" in sections[0].body
    faq = tmp_path / "faq.txt"
    faq.write_text("# How do I request leave?\n\nIn Workday.\n\n# Who approves it?\n\nYour manager.\n")
    assert [s.heading_path for s in split_sections(load_document(faq).text)] == [
        ("How do I request leave?",),
        ("Who approves it?",),
    ]


def test_one_hash_comment_in_plain_text_and_an_unclosed_fence_in_markdown(tmp_path) -> None:
    """A "# Is the VPN up?" comment in a snippet does not make a text file Markdown; a "~~~~"
    rule under a title in Markdown opens no fence that would swallow every later heading."""
    remote = tmp_path / "remote.txt"
    remote.write_text(
        "Remote Work Policy\n\n1. Eligibility\n\nAll staff.\n\n2. Equipment\n\nCheck the VPN:\n\n"
        "# Is the VPN up?\nvpn status\n\n3. Expenses\n\nUp to 50 USD a month.\n"
    )
    document = load_document(remote)
    assert document.title == "Remote Work Policy"
    assert [s.heading_path[-1] for s in split_sections(document.text)][-1] == "3. Expenses"
    rule = tmp_path / "travel.md"
    rule.write_text("Travel Policy\n~~~~~~~~~~~~~\n\n# Booking\n\nUse Navan.\n\n# Hotels\n\nUp to 200 USD.\n")
    assert [s.heading_path for s in split_sections(load_document(rule).text)][-2:] == [("Booking",), ("Hotels",)]


def test_a_plain_text_table_header_over_a_rule_is_not_a_heading(tmp_path) -> None:
    path = tmp_path / "limits.txt"
    path.write_text("Travel Limits\n\nCity          Limit\n-------------------\nBoston        250 USD\n\nBook early.\n")
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Travel Limits",)]
    assert "City          Limit\n-------------------" in sections[0].body


def test_an_underlined_title_in_plain_text_is_a_heading_not_a_code_fence(tmp_path) -> None:
    path = tmp_path / "travel.txt"
    path.write_text("Travel Policy\n~~~~~~~~~~~~~\n\nBooking\n\nBook through Navan.\n\nHotels\n\nUp to 200 USD.\n")
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Travel Policy", "Booking"), ("Travel Policy", "Hotels")]


def test_front_matter_is_only_yaml_and_its_title_ignores_code(tmp_path) -> None:
    prose = tmp_path / "notice.md"
    prose.write_text(
        "---\n**Effective date:** 1 March 2025. All earlier versions are withdrawn.\n---\n\n# Notice\n\nText.\n"
    )
    assert "All earlier versions are withdrawn." in load_document(prose).text
    titled = tmp_path / "remote.md"
    titled.write_text(
        "---\ntitle: Remote Work Policy\n---\n\nConnect first:\n\n```bash\n# connect to the VPN first\nvpn up\n```\n"
    )
    assert load_document(titled).title == "Remote Work Policy"
    spaced = tmp_path / "travel.md"
    spaced.write_text("---\ntitle: Travel Policy\nLast reviewed: 2026-01-10\n---\n\nBook through Navan.\n")
    document = load_document(spaced)
    assert document.title == "Travel Policy" and "reviewed" not in document.text
    for stripped in (
        "---\n# exported by the wiki, do not edit\ntitle: Travel Policy\nowner: Finance\n---\n\nBook early.\n",
        "---\nsidebar_position: 3\n---\n\n# Travel Policy\n\nBook early.\n",
    ):
        spaced.write_text(stripped)
        document = load_document(spaced)
        assert document.title == "Travel Policy" and "---" not in document.text and ":" not in document.text
    for kept in (
        "---\n# Travel Policy\nOwner: People Team\n---\n\nBook through Navan.\n",
        "---\nPlease note: this policy replaces the 2024 version.\n---\n\n# Travel\n\nBook early.\n",
    ):
        spaced.write_text(kept)
        document = load_document(spaced)
        assert document.title == "Travel Policy" if "# Travel Policy" in kept else "replaces the 2024" in document.text


def test_an_embedded_image_with_a_title_leaves_no_debris(tmp_path) -> None:
    path = tmp_path / "logo.md"
    path.write_text(
        '# Brand\n\n![Company logo](data:image/png;base64,iVBORw0KGgo "Logo (v2)") is used everywhere.\n\n'
        '![Map](<data:image/png;base64,iVBORw0KGgo> "Floors (all)") shows the floors.\n\n'
        "![Plan](data:image/png;base64,iVBORw0KGgo\nAAAABBBB\n) hangs at reception.\n\n"
        "![Team](data:image/svg+xml;utf8,%3Csvg%3EHR's%20team%3C/svg%3E) meets weekly.\n\n"
        '![Floors](data:image/svg+xml;utf8,<svg fill="rgb(0,0,0)" width="10"></svg>) are marked.\n\n'
        "![Desk](\n  data:image/png;base64,AAAA\n  BBBB\n  ) is assigned.\n\n"
        "Employees get 25 days of leave.\n\nCarry-over is capped (5 days).\n"
    )
    text = load_document(path).text
    assert "Company logo is used everywhere." in text and "Map shows the floors." in text
    assert "Plan hangs at reception." in text and "data:" not in text and "Team meets weekly." in text
    assert "Floors are marked." in text and "Desk is assigned." in text and "BBBB" not in text
    assert "Employees get 25 days of leave." in text and "Carry-over is capped (5 days)." in text


def test_a_hash_line_in_plain_text_or_word_is_text_not_markdown(tmp_path) -> None:
    """One "# " line no longer turns a text file into Markdown (which switched off heading
    detection), and it never becomes a heading itself."""
    import docx

    path = tmp_path / "leave.txt"
    path.write_text("Leave Policy\n\n# of days: 25 for everyone.\n\nSick Leave\n\nTen days a year.\n")
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Leave Policy",), ("Leave Policy", "Sick Leave")]
    assert sections[0].body.strip() == "# of days: 25 for everyone."
    document = docx.Document()
    document.add_heading("Per Diem", level=1)
    document.add_paragraph("# of nights covered: 3")
    document.add_paragraph("Per diem is 40 EUR.")
    path = tmp_path / "per-diem.docx"
    document.save(str(path))
    sections = split_sections(load_document(path).text)
    assert [s.heading_path for s in sections] == [("Per Diem",)]
    assert sections[0].body.splitlines()[-1] == "Per diem is 40 EUR."


@pytest.mark.timeout(30)  # the old pattern took minutes on this input: a hang, not a speed target
def test_markdown_drafts_struck_text_and_unclosed_inline_svg(tmp_path) -> None:
    path = tmp_path / "expenses.md"
    svg = "![Approval flow](data:image/svg+xml;utf8,<svg " + " ".join(f'a{i}="{i}"' for i in range(30))
    path.write_text(
        "# Expense Policy\n\n## Meals\n\nMeals: ~~50~~ 75 EUR a day, <del>taxis</del> trains.\n\n"
        "<!--\n## Draft section (not approved)\nMeals up to 100 EUR.\n-->\n\n"
        f"{svg}\n\nClaims over 500 EUR need approval.\n\n```\n<!-- kept in code -->\n```\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "Meals: 75 EUR a day, trains." in text.replace("  ", " ")
    assert "Draft" not in text and "100 EUR" not in text and "<!-- kept in code -->" in text
    assert "Claims over 500 EUR need approval." in text
    assert [s.heading_path for s in split_sections(text)] == [("Expense Policy", "Meals")]


@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_a_byte_order_mark_does_not_hide_the_first_heading(tmp_path, suffix: str) -> None:
    path = tmp_path / f"leave{suffix}"
    path.write_bytes("\ufeff# Leave Policy\n\nEmployees get 25 days.\n".encode())
    document = load_document(path)
    assert document.title == "Leave Policy" and "\ufeff" not in document.text
    assert split_sections(document.text)[0].heading_path == ("Leave Policy",)


def test_a_github_handbook_reads_as_markdown(tmp_path) -> None:
    """Badges, images and HTML comments go; reference links become inline links; inline links,
    bare URLs, code, lists and tables stay as written; autolinks are written out."""
    from support.markdown_handbook import AMAZON, HANDBOOK, HOLIDAYS

    path = tmp_path / "handbook.md"
    path.write_text(HANDBOOK, encoding="utf-8")
    document = load_document(path)
    text = document.text
    assert document.title == "Kettle & Fern People Handbook"
    assert text.startswith("# Kettle & Fern People Handbook\n")  # nothing left of the badges' line or the image
    for gone in ("shields.io", "![", "team.png", "Offsite", "TODO", "14 local holidays", "sidebar_position", "]: "):
        assert gone not in text, gone
    assert f"observes [11 local holidays]({HOLIDAYS}) every year" in text
    assert "Ask in [#people-ops](https://kettlefern.slack.com/archives/C0PEOPLE) when" in text
    assert "Read the [equipment policy](<https://kettlefern.example.com/policies/equipment policy.pdf>) before" in text
    assert f"on [Amazon]({AMAZON}) and claim up to **USD 400**" in text
    assert "https://kettlefern.example.com/home-office/kit.v2.html?items=desk%2Cchair." in text
    assert "Write to people@kettlefern.example.com or see https://kettlefern.example.com/faq." in text
    assert "  - Secondary caregivers get __4 weeks__; book them with `/timeoff parental` in Slack." in text
    assert f"| [Chair]({AMAZON}) | 250.50 |" in text
    sections = split_sections(text)
    assert [s.heading_path[-1] for s in sections] == ["Time off", "Home office"]


def test_markdown_link_reading_keeps_code_and_what_is_not_a_link(tmp_path) -> None:
    path = tmp_path / "it.md"
    path.write_text(
        "# IT Policy\n\n## [VPN](https://it.example.com/vpn)\n\n"
        "Type `[x][vpn]`, `![y](z.png)` and `<https://a.example>` as written. [^1]\n\n"
        "- [ ] Install the [VPN][] client.\n- ![logo](logo.png)\n- Ask [IT].\n\n"
        "```\n[vpn]: https://in-code.example\n![kept](in-code.png)\n```\n\n"
        "[vpn]: https://it.example.com/vpn\n[^1]: A footnote stays.\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "## VPN\n" in text  # a heading's link is its text: it names a section
    assert "Type `[x][vpn]`, `![y](z.png)` and `<https://a.example>` as written.\n" in text  # the footnote's mark went
    assert "- Install the [VPN](https://it.example.com/vpn) client.\n- Ask [IT].\n" in text  # the image's item went
    assert "[vpn]: https://in-code.example\n![kept](in-code.png)" in text
    assert "\nA footnote stays." in text and "\n[vpn]: https://it.example.com/vpn" not in text


def test_markdown_callouts_and_github_html_read_as_their_text(tmp_path) -> None:
    """A blockquote's text is policy without its ">" marks, GitHub's alert line goes; HTML
    tags go and their text stays (a link as a link, <kbd> as code, <br> as a line break and
    a space inside a table row); tags in code spans and code blocks stay as written."""
    path = tmp_path / "handbook.md"
    path.write_text(
        "# Learning\n\n"
        "> **Heads-up:** if a course costs over EUR 2,000 and you leave within 6 months,\n"
        "> you pay back half.\n\n"
        "> [!WARNING]\n> Call 112 first.\n\n"
        "<details><summary>Old budget</summary>\n\nBefore 2024 the budget was EUR 300.<br>Ask "
        '<a href="https://people.example.org/learning">People Ops</a> or press <kbd>Ctrl</kbd>.\n</details>\n\n'
        "| Course | Cap |\n| --- | --- |\n| Conference<br/>travel | EUR 900<sup>1</sup> |\n| Desk | 6 m<sup>2</sup><sup>*</sup> |\n\n"
        "Type `<br>` as written. Write to <hr@example.org> or <p.lee@example.org>.\n\n"
        "```html\n<details>kept</details>\n> kept\n```\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "**Heads-up:** if a course costs over EUR 2,000 and you leave within 6 months,\nyou pay back half." in text
    assert "[!WARNING]" not in text and "\nCall 112 first.\n" in text
    assert "\nOld budget\n" in text and "<summary>" not in text and "</details>" not in text.split("```")[0]
    assert (
        "Before 2024 the budget was EUR 300.\nAsk [People Ops](https://people.example.org/learning) or press `Ctrl`."
        in text
    )
    assert "| Conference travel | EUR 900¹ |" in text  # a row stays one line; a raised number stays raised
    assert "| Desk | 6 m² |" in text  # a unit's power is kept, not read as "6 m2" or "6 m"; a "*" mark goes
    assert "Type `<br>` as written. Write to hr@example.org or p.lee@example.org." in text
    assert "```html\n<details>kept</details>\n> kept\n```" in text


def test_static_site_marks_go_and_their_text_stays(tmp_path) -> None:
    """Jekyll, Hugo and MkDocs handbooks: a heading's attributes, attribute lines, task boxes,
    footnote marks and HTML entities are markup, not policy; code spans keep them."""
    path = tmp_path / "onboarding.md"
    path.write_text(
        "# Onboarding {#onboarding}\n\n## Week one {: .no_toc }\n\n"
        "- [ ] Set up the VPN&nbsp;client &rarr; see IT.\n- [x] Read the code of conduct.\n\n"
        "You get 25 days[^1] of leave &amp; 2 wellness days. Type `&amp;` and `[^2]` as written.\n\n"
        "{: .note }\nManagers approve leave in [Hearth](https://hearth.example.org/?a=1&amp;b=2).\n\n"
        "[^1]: Pro-rated for part-time staff.\n",
        encoding="utf-8",
    )
    document = load_document(path)
    assert document.title == "Onboarding"
    assert [s.heading_path for s in split_sections(document.text)] == [("Onboarding", "Week one")]
    assert "- Set up the VPN client → see IT.\n- Read the code of conduct.\n" in document.text
    assert "You get 25 days of leave & 2 wellness days. Type `&amp;` and `[^2]` as written." in document.text
    assert "\n\nManagers approve leave in [Hearth](https://hearth.example.org/?a=1&b=2).\n" in document.text
    assert "\n\nPro-rated for part-time staff.\n" in document.text and "{:" not in document.text


def test_a_table_of_contents_goes_with_its_heading(tmp_path) -> None:
    """In-page links listed as a table of contents answer nothing; a list with a real link or
    a word of its own stays, and so does a contents heading with text of its own."""
    path = tmp_path / "handbook.md"
    path.write_text(
        "# Handbook\n\n## Table of contents\n\n- [Time off](#time-off)\n  - [Sick days](#sick-days)\n"
        "1. [Gear](#gear)\n\n## Time off\n\nTake 25 days.\n\n**On this page:**\n\n- [Sick days](#sick-days)\n\n"
        "### Asking\n\nAsk early.\n\n- [Holidays](https://example.org/holidays)\n"
        "- [Sick days](#sick-days) are unlimited.\n\n## Sick days\n\n* [Time off](#time-off)\n\nTell your lead.\n\n"
        "## Contents\n\nWhat this handbook holds.\n",
        encoding="utf-8",
    )
    text = load_document(path).text
    assert "Table of contents" not in text and "](#gear)" not in text and "](#time-off)" not in text
    assert "On this page" not in text and "Take 25 days.\n\n### Asking" in text
    assert "- [Holidays](https://example.org/holidays)\n- [Sick days](#sick-days) are unlimited." in text
    assert [s.heading_path[-1] for s in split_sections(text)] == ["Time off", "Asking", "Sick days", "Contents"]
