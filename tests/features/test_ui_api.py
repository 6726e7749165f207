"""The page's API answers a malformed query with 400 and one sentence, never a 500."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import trio
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.errors import UnknownMessage
from crosstalk.features.ui.hub import UiHub
from crosstalk.features.ui.web import build_app

PORT = 8123


class Page:
    """The ASGI app behind a minted token, driven with hand-built requests (no server)."""

    def __init__(self) -> None:
        self.hub = UiHub()
        self.hub.port = PORT
        self.token = self.hub.mint()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.app = build_app(self.hub, self._call)

    async def _call(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, params))
        if params.get("id") == "nosuch":
            raise UnknownMessage("There is no message nosuch here.")
        return {"ok": True}

    async def get(self, path: str, query: dict[str, str]) -> int:
        """The response status of ``GET path?query`` with the token."""
        return await self._request("GET", path, urlencode({**query, "t": self.token}), b"", [])

    async def post(self, path: str, body: dict[str, Any]) -> int:
        """The response status of a JSON ``POST`` carrying the token in its header."""
        headers = [(b"content-type", b"application/json"),
                   (b"x-crosstalk-token", self.token.encode())]
        return await self._request("POST", path, "", json.dumps(body).encode(), headers)

    async def _request(
        self, method: str, path: str, query: str, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> int:
        scope = {
            "type": "http", "method": method, "path": path, "raw_path": path.encode(),
            "query_string": query.encode(), "root_path": "",
            "headers": [(b"host", f"127.0.0.1:{PORT}".encode()), *headers], "scheme": "http",
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", PORT),
            "http_version": "1.1", "asgi": {"version": "3.0"},
        }
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, receive, send)
        (start,) = [m for m in sent if m["type"] == "http.response.start"]
        return int(start["status"])


async def test_a_slice_index_that_is_not_a_number_is_400_and_asks_nothing() -> None:
    """``/api/slice?index=abc`` (and a negative or endless index) is 400; no op runs."""
    page = Page()
    for index in ("abc", "-1", "1e3", "9" * 40, "٣"):
        assert await page.get("/api/slice", {"id": "m1", "index": index}) == 400, index
    assert page.calls == []
    assert await page.get("/api/slice", {"id": "nosuch", "index": "0"}) == 400  # the op refused
    page.calls.clear()
    assert await page.get("/api/slice", {"id": "m1", "index": "2"}) == 200
    assert page.calls == [("read_slice", {"id": "m1", "index": 2})]


async def test_a_room_query_without_an_id_is_400() -> None:
    """``/api/room`` with no id (or an empty one) is 400; with one, the op answers."""
    page = Page()
    assert await page.get("/api/room", {}) == 400
    assert await page.get("/api/room", {"id": ""}) == 400
    assert page.calls == []
    assert await page.get("/api/room", {"id": "r1"}) == 200
    assert page.calls == [("ui_room", {"room": "r1"})]


async def test_the_search_box_reads_through_a_get_and_an_empty_one_asks_nothing() -> None:
    """``/api/search?q=`` with no words is 400 and runs no op; words go to ``search`` as typed."""
    page = Page()
    for empty in ("", "   "):
        assert await page.get("/api/search", {"q": empty}) == 400
    assert page.calls == []
    assert await page.get("/api/search", {"q": 'c++ "unbalanced'}) == 200
    assert page.calls == [("search", {"query": 'c++ "unbalanced'})]


async def test_the_pages_send_names_no_place_on_this_machine() -> None:
    """A page ``send``'s ``cwd`` and ``transcript`` never reach the op: the page has neither."""
    page = Page()
    body = {"to": "#r", "text": "hi", "slices": ["file:etc/passwd", "turns:3"], "cwd": "/",
            "transcript": "/home/someone/other-project.jsonl"}
    assert await page.post("/api/act/send", body) == 200
    assert page.calls == [("send", {"to": "#r", "text": "hi",
                                    "slices": ["file:etc/passwd", "turns:3"]})]


@given(path=st.sampled_from(["/api/slice", "/api/room", "/api/search"]),
       query=st.dictionaries(st.sampled_from(["id", "index", "q", "x"]), st.text(max_size=30),
                             max_size=3))
def test_no_query_makes_the_api_answer_500(path: str, query: dict[str, str]) -> None:
    """Any id and index, present or not: 200, or 400 from the op or the parsing, never 500."""
    assert trio.run(Page().get, path, query) in (200, 400)
