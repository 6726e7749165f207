"""The local page (`crosstalk ui`) in a real browser: Playwright driving Debian's chromium.

Real relay, real daemons, real pairing (tests/e2e/conftest.py). Locally, without chromium or
Playwright, these tests are skipped with the reason shown; under CI (``CI`` set, where .ci/run
installs both) a missing browser fails them instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from crosstalk.hook.control import ControlConnection
from tests.e2e.conftest import (
    Person,
    pair,
    read_json_line,
    reap,
    wait_for_messages,
    wait_until,
    work_in,
)

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "</script><script>alert(2)</script>"


def _need_browser() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "playwright is not installed (pip install playwright)"
    else:
        missing = "" if CHROMIUM else "chromium is not installed (apt-get install chromium)"
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests: {missing}")
    if missing:
        pytest.skip(missing)
    assert CHROMIUM is not None
    return CHROMIUM


@pytest.fixture
def page() -> Iterator[Any]:
    """A fresh chromium page; every dialog it opens (an alert from injected code) is recorded."""
    executable = _need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True,
                                     args=["--no-sandbox"])
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.dialogs = []  # type: ignore[attr-defined]
            tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))
            yield tab
        finally:
            browser.close()


def open_ui(person: Person, tab: Any) -> str:
    url = str(person.json("ui", "--no-open")["url"])
    assert url.startswith("http://127.0.0.1:"), url
    tab.goto(url)
    tab.wait_for_selector("[data-testid=live].on", timeout=20_000)
    return url


def message(tab: Any, text: str) -> Any:
    return tab.locator("[data-testid=message]", has_text=text)


def test_page_shows_a_message_live_and_an_answer_from_it_reaches_the_other_home(
    people: list[Person], page: Any
) -> None:
    """A question from ben appears on ana's open page; ana replies from the page; ben gets it."""
    ana, ben = people[:2]
    pair(ana, ben)
    open_ui(ana, page)
    page.wait_for_selector("[data-testid=room]")
    ben.json("send", "ana", "can you review the parser?", "--intent", "question")
    question = message(page, "can you review the parser?").first
    question.wait_for(timeout=20_000)
    question_id = question.get_attribute("data-id")
    reply(page, question, "yes, after lunch")
    answered = wait_for_messages(ben, 1)
    assert [m["text"] for m in answered] == ["yes, after lunch"]
    assert answered[0]["reply_to"] == question_id
    # Ben's daemon committed it and ben read it: the page shows the state move without a reload.
    mine = message(page, "yes, after lunch").locator("[data-testid=state]")
    wait_until(lambda: mine.text_content() == "read", timeout=20, what="the read receipt")


def test_an_ask_answered_from_the_page_ends_the_askers_wait(
    people: list[Person], page: Any
) -> None:
    """ben's `crosstalk ask` waits; ana answers it on the page; ben's ask prints the answer."""
    ana, ben = people[:2]
    pair(ana, ben)
    open_ui(ana, page)
    asking = ben.spawn("ask", "ana", "which port does staging use?", "--timeout", "60", "--json")
    try:
        ask = message(page, "which port does staging use?").first
        ask.wait_for(timeout=20_000)
        reply(page, ask, "8443")
        result = read_json_line(asking, timeout=30)
        assert result["answer"] == "8443", result
        assert asking.wait(timeout=30) == 0
    finally:
        if asking.poll() is None:
            asking.kill()
        asking.wait(timeout=10)
        for stream in (asking.stdout, asking.stderr):
            if stream:
                stream.close()


def reply(tab: Any, item: Any, text: str) -> None:
    """Answer ``item`` from the page and wait until the page took it (or said why not)."""
    item.locator("[data-testid=reply]").click()
    tab.fill("[data-testid=compose]", text)
    tab.click("[data-testid=send]")
    tab.wait_for_function("() => document.getElementById('text').value === '' || "
                          "document.getElementById('error').textContent", timeout=20_000)
    assert tab.text_content("[data-testid=error]") == ""


def _join_as(joiner: Person, inviter: Person, label: str) -> None:
    new = inviter.spawn("room", "new", "--json", "--label", inviter.home.name)
    try:
        invite = read_json_line(new, timeout=60)
        joiner.json("room", "join", invite["invite"], "--label", label)
        read_json_line(new, timeout=60)
        assert new.wait(timeout=30) == 0
    finally:
        reap(new)


def test_nothing_a_peer_writes_runs_on_the_page(
    people: list[Person], page: Any, short_tmp: Path
) -> None:
    """Markup in messages, labels, facts and file names shows as text; no code runs."""
    ana, ben = people[:2]
    _join_as(ben, ana, f"ben{XSS_IMG}")
    project = short_tmp / "project"
    project.mkdir()
    (project / f"{XSS_IMG}.txt").write_text("content\n")
    work_in(ben, project)
    ben.json("send", "ana", f"hi {XSS_IMG} {XSS_SCRIPT}", "--slice", f"file:{XSS_IMG}.txt",
             cwd=project)
    ben.json("facts", "add", f"fact {XSS_IMG} {XSS_SCRIPT}")
    open_ui(ana, page)
    message(page, "hi ").wait_for(timeout=20_000)
    text = message(page, "hi ").locator("[data-testid=text]").text_content()
    assert text == f"hi {XSS_IMG} {XSS_SCRIPT}"
    slice_button = message(page, "hi ").locator("[data-testid=slice]")
    assert XSS_IMG in slice_button.text_content()
    page.wait_for_selector("[data-testid=fact]", timeout=20_000)
    assert XSS_SCRIPT in page.locator("[data-testid=fact]").first.text_content()
    assert XSS_IMG in page.locator("[data-testid=rooms]").text_content()  # ben's label
    slice_button.click()
    page.wait_for_selector("[data-testid=slice]:not([hidden])")
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1  # only the page's own
    assert page.dialogs == []


def test_reservations_show_on_the_page_and_ones_own_release_from_it(
    people: list[Person], page: Any, short_tmp: Path
) -> None:
    """ben's reservation (a reason with markup) shows as text, with no release button; ana's
    own has one, and clicking it gives it back everywhere."""
    ana, ben = people[:2]
    pair(ana, ben)
    clones = {p.home.name: short_tmp / f"{p.home.name}-clone" / "app" for p in (ana, ben)}
    for clone in clones.values():
        subprocess.run(["git", "init", "-q", str(clone)], check=True, timeout=30)
    ben.json("reserve", "src/**", "--reason", f"auth {XSS_IMG}", cwd=clones["ben"])
    mine = ana.json("reserve", "docs/**", "--shared", cwd=clones["ana"])
    open_ui(ana, page)
    wait_until(lambda: page.locator("[data-testid=reservation]").count() == 2, timeout=20,
               what="both reservations on ana's page")
    theirs = page.locator("[data-testid=reservation]", has_text="ben: src/**")
    assert XSS_IMG in theirs.text_content()
    assert theirs.locator("[data-testid=release]").count() == 0
    page.locator("[data-testid=reservation]", has_text="you: docs/**").locator(
        "[data-testid=release]").click()
    wait_until(lambda: page.locator("[data-testid=reservation]").count() == 1, timeout=20,
               what="ana's reservation gone from her page")
    wait_until(lambda: [r["id"] for r in ben.json("reservations")["reservations"]
                        if not r["mine"]] == [], timeout=20,
               what=f"{mine['id']} released at ben's")
    assert page.locator("img").count() == 0 and page.dialogs == []


def test_the_page_refuses_requests_without_its_token(people: list[Person], page: Any) -> None:
    """No token, a wrong one, or a state change with the token only in the URL: refused."""
    ana, ben = people[:2]
    pair(ana, ben)
    url = open_ui(ana, page)
    base, _, token = url.partition("/?t=")
    api = page.request
    assert api.get(base + "/api/state").status == 401
    assert api.get(base + "/api/state?t=" + token[::-1]).status == 401
    assert api.get(base + "/api/state?t=" + token).status == 200
    body = {"to": "ben", "text": "forged"}
    assert api.post(base + "/api/act/send?t=" + token, data=body).status == 401
    ok = api.post(base + "/api/act/send", data=body, headers={"X-Crosstalk-Token": token})
    assert ok.status == 200, ok.text()
    csp = api.get(base + "/?t=" + token).headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert token not in (ana.home / "daemon.log").read_text()


def _send_many(person: Person, to: str, count: int, *, connections: int = 20) -> None:
    """``count`` messages over several control connections at once (the CLI would take
    minutes: each send waits for the relay to sequence it)."""

    def one_connection(first: int) -> None:
        with ControlConnection(person.home / "daemon.sock", timeout=300) as conn:
            for i in range(first, count, connections):
                conn.send("send", {"to": to, "text": f"message {i:04d} about the build"})
                conn.receive()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(one_connection, range(connections)))


def test_a_room_of_a_thousand_messages_renders_within_a_second(
    people: list[Person], page: Any
) -> None:
    """1,000 messages in a room: fetched and rendered by the browser in under a second."""
    ana, ben = people[:2]
    pair(ana, ben)
    _send_many(ben, "ana", 1000)

    def held() -> int:
        with ControlConnection(ana.home / "daemon.sock", timeout=30) as conn:
            conn.send("rooms", {})
            room = conn.receive()["rooms"][0]["id"]
            conn.send("ui_room", {"room": room})
            return len(conn.receive()["messages"])

    wait_until(lambda: held() >= 1000, timeout=240, what="1,000 messages at ana")
    open_ui(ana, page)
    page.wait_for_function(
        "() => document.body.dataset.lastRender && "
        "JSON.parse(document.body.dataset.lastRender).count >= 1000", timeout=30_000
    )
    # The first render can overlap with the page's start; time a fresh one the person asks for.
    page.evaluate("() => { delete document.body.dataset.lastRender; }")
    started = time.monotonic()
    page.locator("[data-testid=room] a").first.click()
    page.wait_for_function("() => document.body.dataset.lastRender", timeout=30_000)
    timing = json.loads(page.evaluate("() => document.body.dataset.lastRender"))
    assert timing["count"] == 1000
    assert page.locator("[data-testid=message]").count() == 1000
    assert timing["ms"] < 1000, timing
    assert time.monotonic() - started < 5  # the test's own view, with Playwright's overhead


def test_the_search_box_finds_a_message_and_a_fact_and_shows_markup_as_text(
    people: list[Person], page: Any
) -> None:
    """ana searches her page: ben's message and fact come back with the match marked; markup
    in them stays text; a query that does not parse shows the usage error."""
    ana, ben = people[:2]
    pair(ana, ben)
    ben.json("send", "ana", f"the deploy of {XSS_IMG} is done")
    ben.json("facts", "add", f"deploy windows are fridays {XSS_SCRIPT}")
    open_ui(ana, page)
    page.wait_for_selector("[data-testid=fact]", timeout=20_000)
    message(page, "the deploy of").wait_for(timeout=20_000)
    page.fill("[data-testid=search-text]", "deploy")
    page.click("[data-testid=search-go]")
    results = page.locator("[data-testid=search-result]")
    wait_until(lambda: results.count() == 2, timeout=20, what="two results on ana's page")
    texts = [results.nth(n).text_content() for n in range(2)]
    assert any(f"the deploy of {XSS_IMG} is done" in t for t in texts), texts
    assert any(XSS_SCRIPT in t for t in texts), texts
    assert page.locator("[data-testid=search-results] mark").all_text_contents() == [
        "deploy", "deploy"]
    page.fill("[data-testid=search-text]", '"unbalanced')
    page.click("[data-testid=search-go]")
    wait_until(lambda: "usage" in (page.locator("[data-testid=error]").text_content() or ""),
               timeout=20, what="the usage error on the page")
    assert page.locator("img").count() == 0 and page.dialogs == []
