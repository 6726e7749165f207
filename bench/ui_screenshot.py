"""Regenerate docs/ui.png: the local page (`crosstalk ui`) with two rooms and live traffic.

    python -m bench.ui_screenshot [--out docs/ui.png]

Runs a throwaway relay and three throwaway homes (ana pairs with ben and with cy), sends a few
messages both ways, adds a fact and a task, opens ana's page in Debian's chromium through
Playwright, sends one more message while the page is open, and saves a screenshot. Every process
it starts is stopped by its pid; the homes are deleted.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import tempfile
from pathlib import Path

from tests.e2e.conftest import Person, pair, stop_pid
from tests.relay.process import RelayProcess


def _traffic(ana: Person, ben: Person, cy: Person) -> None:
    ben.json("send", "ana", "the parser refactor is up for review", "--intent", "question")
    ana.json("send", "ben", "looking now; the tokenizer change is the risky part")
    cy.json("send", "ana", "staging is green again after the cache fix")
    ben.json("facts", "add", "CI runs on Python 3.11 and 3.12", "--room", "ana")
    ana.json("tasks", "add", "write the migration notes", "--room", "ben")


def shoot(out: Path) -> None:
    """Build the scene and write the screenshot to ``out``."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    root = Path(tempfile.mkdtemp(prefix="ct-shot-", dir="/tmp"))
    relay = RelayProcess(root / "relay-data", root / "relay.stderr")
    relay.start()
    people = [Person(root / n, f"ws://127.0.0.1:{relay.port}") for n in ("ana", "ben", "cy")]
    try:
        ana, ben, cy = people
        pair(ana, ben)
        pair(ana, cy)
        _traffic(ana, ben, cy)
        url = str(ana.json("ui", "--no-open")["url"])
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(url)
            page.wait_for_selector("[data-testid=message]")
            ben.json("send", "ana", "thanks! answering the inline comments next")
            page.locator("[data-testid=message]", has_text="inline comments").wait_for()
            page.wait_for_selector("[data-testid=fact]")
            page.screenshot(path=str(out))
            browser.close()
    finally:
        for person in people:
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        relay.kill(signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/ui.png"))
    shoot(parser.parse_args().out)


if __name__ == "__main__":
    main()
