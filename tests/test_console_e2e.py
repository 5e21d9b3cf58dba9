"""The admin console end to end in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).

The console is mounted under /admin of the real Bolt HTTP app (uvicorn), on the test
PostgreSQL, with a real Celery worker process on the test Redis taking the uploads from the
`ingest` queue. Screenshots go to $POLICYBOT_ARTIFACTS_DIR/console (default ./.artifacts/console).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.console import ADMIN_PASSWORD, ADMIN_USER, DOG, console_settings

pytestmark = pytest.mark.timeout(300)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO = Path(__file__).resolve().parent.parent
SEED_CHANNEL = "CCONSOLE02"  # seeded_log's rows for this module
ARTIFACTS = Path(os.environ.get("POLICYBOT_ARTIFACTS_DIR") or REPO / ".artifacts") / "console"


@pytest.fixture(scope="module")
def console_url(stack) -> Iterator[str]:
    from bot.app import build_app
    from bot.http import BackgroundServer, create_asgi_app
    from console.app import console_routes
    from workers.enqueuer import CeleryEnqueuer

    settings = console_settings(stack.settings)
    server = BackgroundServer(create_asgi_app(build_app(settings, CeleryEnqueuer()), console_routes(settings))).start()
    try:
        yield server.url + "/admin"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        message = "Chromium is not installed: apt-get install -y chromium chromium-driver (.ci/run does this)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def page(browser, console_url):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    # JavaScript errors and CSP violations; refused resources are expected (the wrong password's 401)
    opened.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and not message.text.startswith("Failed to load resource")
            else None
        ),
    )
    opened.js_errors = errors
    yield opened
    context.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_sign_in(page, console_url) -> None:
    page.goto(console_url + "/activity")
    assert "/admin/login" in page.url
    page.fill("input[name=username]", ADMIN_USER)
    page.fill("input[name=password]", "wrong password")
    page.click("button[type=submit]")
    assert "wrong user name or password" in page.inner_text("#login-error")
    shot(page, "01-sign-in-refused")
    page.fill("input[name=username]", ADMIN_USER)
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/admin/activity$"))
    assert page.inner_text("h1") == "Activity"
    cookie = next(c for c in page.context.cookies() if c["name"] == "policybot_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    shot(page, "02-activity")


def test_the_date_filters_examples_fit_their_boxes(page, console_url) -> None:
    """The From/To placeholders are whole in the browser: typed into the box, their text does not scroll."""
    page.goto(console_url + "/activity")
    for name in ("since", "until"):
        text, needed, room = page.evaluate(
            """(name) => {
                const box = document.querySelector(`input[name=${name}]`);
                box.value = box.placeholder;
                const measured = [box.placeholder, box.scrollWidth, box.clientWidth];
                box.value = "";
                return measured;
            }""",
            name,
        )
        assert text and needed <= room, (name, text, needed, room)


def test_filter_activity_open_record_and_review(page, console_url, seeded_log) -> None:
    page.goto(console_url + "/activity")
    page.fill("input[name=channel]", SEED_CHANNEL)
    page.select_option("select[name=action]", "incorrect")
    page.select_option("select[name=range]", "24h")
    page.click("#apply-filters")
    page.wait_for_url(re.compile(r"action=incorrect"))
    rows = page.locator("#activity tbody tr.row-link")
    assert rows.count() == 1 and page.inner_text("#result-count") == "1"
    assert DOG in rows.first.inner_text()
    shot(page, "03-activity-filtered")

    rows.first.locator("a.question").click()
    page.wait_for_url(re.compile(rf"/admin/activity/id:{seeded_log['dog']}$"))
    assert page.inner_text("#question-text") == DOG
    assert page.locator("#scores-chart svg circle.score").count() == 1
    assert page.locator("#scores-chart svg line.threshold").count() == 2
    assert "dog office" in page.inner_text("#fallback-queries")
    assert page.is_visible("#not-reviewed")

    page.check("input[name=verdict][value=wrong]")
    page.select_option("select[name=expected_document]", label="policies / leave-policy.md")
    page.fill("input[name=note]", "marked in the browser")
    page.click("#save-review")
    page.wait_for_selector(".flash.ok")
    assert "review saved: wrong" in page.inner_text(".flash.ok")
    line = page.inner_text(".review-line")
    assert "wrong" in line and ADMIN_USER in line and "leave-policy.md" in line and "marked in the browser" in line
    shot(page, "04-record-reviewed")
    assert not page.js_errors, page.js_errors


def test_upload_a_document_and_see_it_appear(page, console_url, stack, tmp_path) -> None:
    from application.manage import list_documents

    upload = tmp_path / "console-e2e-parking.md"
    upload.write_text(
        "# Parking Policy\n\n## Visitor parking\n\nVisitors park in the green zone of garage B for up to "
        "four hours. Employees must not use the green zone.\n"
    )
    page.goto(console_url + "/documents")
    page.set_input_files("input[name=files]", str(upload))
    page.fill("input[name=collection]", "console-e2e")
    page.click("#upload")
    page.wait_for_selector("#watched-job")
    assert "queued for ingestion into console-e2e" in page.inner_text(".flash.ok")
    shot(page, "05-upload-queued")
    # the worker ingests it; the page follows the job and reloads the list when it is done
    page.wait_for_selector(
        'table[data-collection="console-e2e"] tr[data-document="console-e2e-parking.md"]', timeout=120_000
    )
    row = page.locator('tr[data-document="console-e2e-parking.md"]')
    assert "Parking Policy" in row.inner_text()
    [document] = [d for d in list_documents(stack.settings, "console-e2e") if d.name == "console-e2e-parking.md"]
    assert document.chunk_count >= 1 and document.version == 1
    cells = row.locator("td")
    assert cells.nth(1).inner_text() == str(document.chunk_count) and cells.nth(2).inner_text() == "1"
    assert "done" in page.inner_text("#jobs")
    shot(page, "06-upload-ingested")
    assert not page.js_errors, page.js_errors


def test_dashboard_renders_seeded_data(page, console_url, seeded_log) -> None:
    page.goto(console_url + "/dashboard")
    assert page.is_visible("#incorrect-alert")
    assert page.locator("svg.chart").count() == 4
    assert page.locator("#questions-chart rect.bar-incorrect").count() >= 6
    assert page.locator("#latency-chart circle.point").count() >= 6
    assert "travel-expenses.md" in page.inner_text("#miss-documents")
    assert "minibar" in page.inner_text("#miss-topics")
    box = page.locator("#questions-chart svg").bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100  # actually laid out, not an empty element
    shot(page, "07-dashboard")
    page.click("#logout")
    page.wait_for_url(re.compile(r"/admin/login$"))
    page.goto(console_url + "/dashboard")
    assert "/admin/login" in page.url
    assert not page.js_errors, page.js_errors
