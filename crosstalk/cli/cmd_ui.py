"""`crosstalk ui`: open the local page (crosstalk/features/ui/) in a browser."""

from __future__ import annotations

from typing import Annotated

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors


@reports_errors
def ui(
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the URL without opening a browser.")
    ] = False,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Open the local page: rooms, conversations, memory, attention and health, live.

    The URL is on loopback and carries a fresh random token; anyone who has it can act as you
    on this page, so do not share it. ``BROWSER`` picks the browser.
    """
    reply = ask(home, "ui_open")
    url = str(reply["url"])
    show(json_output, {"url": url}, url)
    if not no_open:
        import webbrowser  # only when a browser is wanted

        webbrowser.open(url)
