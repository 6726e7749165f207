"""File and diff slices come only from a project one of the identity's sessions works in.

A ``send`` request's ``cwd`` is written by its caller: the page, or any program on the control
socket. On main, ``cwd="/"`` with ``file:etc/hostname`` attached any file on the machine; now
the daemon resolves slices only inside its sessions' projects (``not_in_project`` otherwise).
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.errors import CrosstalkError, InvalidSlice, NotInProject
from crosstalk.hook.control import request
from crosstalk.slices.build import slice_root
from tests.e2e.conftest import Cli, cli, short_tmp, start_alone, work_in

__all__ = ["cli", "short_tmp"]  # fixtures used by name below

SECRET = "the-words-outside-every-project"


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    """A git project with a nested (non-git) one, a folder outside both, and a symlink out of
    the project."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True, capture_output=True)
    (project / "vendor" / "lib").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (project / "escape").symlink_to(outside)
    return {"project": project, "nested": project / "vendor" / "lib", "outside": outside}


def test_a_cwd_picks_among_the_projects_and_names_no_place_of_its_own(
    places: dict[str, Path],
) -> None:
    """In a project: the innermost (or its git root); elsewhere, by ``..`` or a symlink: refused."""
    project, nested = places["project"], places["nested"]
    projects = [str(project), str(nested)]
    assert slice_root(str(project / "src"), projects) == project
    assert slice_root(str(nested), projects) == nested
    escapes = ("/", str(places["outside"]), f"{project}/../outside", str(project / "escape"))
    for elsewhere in escapes:
        with pytest.raises(NotInProject):
            slice_root(elsewhere, projects)


def test_no_session_or_no_cwd_among_several_is_not_in_project(places: dict[str, Path]) -> None:
    """No project, or no cwd among two: refused; one project and no cwd: that project."""
    with pytest.raises(NotInProject):
        slice_root(str(places["project"]), [])
    with pytest.raises(NotInProject):
        slice_root(None, [str(places["project"]), str(places["outside"])])
    assert slice_root(None, [str(places["project"])]) == places["project"]


@given(cwd=st.text(max_size=60) | st.sampled_from(["/", "..", "/etc", "~", "\x00", ""]))
def test_any_cwd_is_refused_or_lands_inside_a_project(cwd: str) -> None:
    """Whatever a caller writes as cwd, the root is inside a registered project, or refused."""
    project = Path(__file__).resolve().parents[1]  # tests/: a real folder that exists
    try:
        root = slice_root(cwd, [str(project)])
    except (NotInProject, InvalidSlice):
        return
    assert root.is_relative_to(project)


def _send(cli: Cli, **params: Any) -> str:
    """The error code of a ``send`` to our own session, or "ok"."""
    try:
        request(cli.home / "daemon.sock", "send", {"to": "me/agent-1", "text": "see", **params},
                timeout=30)
    except CrosstalkError as exc:
        return exc.code
    return "ok"


def test_the_control_socket_slices_only_inside_a_sessions_project(
    cli: Cli, places: dict[str, Path]
) -> None:
    """``send`` from outside the sessions' projects is not_in_project; from inside, it goes."""
    start_alone(cli)
    outside = places["outside"]
    attack = {"cwd": "/", "slices": [f"file:{str(outside / 'secret.txt').lstrip('/')}"]}
    assert _send(cli, **attack) == "not_in_project"
    work_in(cli, places["project"], session="agent-1")
    work_in(cli, outside / "..", session="other")  # another session, in a folder above
    for cwd in ("/", "/etc", str(places["project"] / "escape")):
        assert _send(cli, session="agent-1", cwd=cwd, slices=["file:secret.txt"]) == (
            "not_in_project"), cwd
    (places["project"] / "notes.md").write_text("project notes\n")
    notes = str(places["project"])
    assert _send(cli, session="agent-1", cwd=notes, slices=["file:notes.md"]) == "ok"
    held = request(cli.home / "daemon.sock", "read", {"all": True, "session": "agent-1"})
    assert [[s["label"] for s in m["slices"]] for m in held["messages"]] == [["notes.md"]]
    # Named no session, a request picks among every session's projects: "other"'s holds it.
    assert _send(cli, cwd=str(places["outside"]), slices=["file:secret.txt"]) == "ok"


def test_the_pages_send_cannot_name_a_cwd_outside_the_projects(
    cli: Cli, places: dict[str, Path]
) -> None:
    """The page's ``send`` with ``cwd="/"``: cwd ignored, a climb out refused, nothing attached."""
    start_alone(cli)
    work_in(cli, places["project"], session="agent-1")
    url = urlsplit(cli.json("ui", "--no-open")["url"])
    token = url.query.removeprefix("t=")

    def act(slice_spec: str) -> dict[str, Any]:
        body = {"to": "me/agent-1", "text": "see", "cwd": "/", "slices": [slice_spec]}
        action = urllib.request.Request(
            f"http://{url.netloc}/api/act/send", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "X-Crosstalk-Token": token},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(action, timeout=30)
        assert refused.value.code == 400
        error: dict[str, Any] = json.loads(refused.value.read())["error"]
        return error

    absolute = act(f"file:{str(places['outside'] / 'secret.txt').lstrip('/')}")
    assert absolute["code"] == "usage" and "no file" in absolute["message"]
    assert act("file:../outside/secret.txt")["code"] == "refused"
    assert request(cli.home / "daemon.sock", "read", {"all": True})["messages"] == []


def test_a_person_at_their_own_terminal_slices_the_project_they_run_in(
    cli: Cli, places: dict[str, Path]
) -> None:
    """No session works in the project, but the CLI runs there: the daemon learns the caller's
    working directory from the kernel (``SO_PEERCRED``), so the file goes. A caller that writes
    a ``peer_cwd`` of its own gets it replaced, and outside every project it is refused."""
    start_alone(cli)
    work_in(cli, places["outside"], session="agent-1")  # the recipient session, elsewhere
    (places["project"] / "notes.md").write_text("project notes\n")
    sent = cli.json("send", "me/agent-1", "see", "--slice", "file:notes.md",
                    cwd=places["project"])
    assert sent["state"] in ("delivered", "read", "sent", "queued"), sent
    held = request(cli.home / "daemon.sock", "read", {"all": True, "session": "agent-1"})
    assert [[s["label"] for s in m["slices"]] for m in held["messages"]] == [["notes.md"]]
    climb = cli.json("send", "me/agent-1", "see", "--slice", "file:../outside/secret.txt",
                     expect=1, cwd=places["project"])
    assert climb["error"]["code"] == "refused"
    forged = {"peer_cwd": str(places["project"]), "cwd": str(places["project"]),
              "slices": ["file:notes.md"]}
    # This process runs outside the project, and the named session pins its own project.
    assert _send(cli, session="agent-1", **forged) == "not_in_project"
