"""Every package imports only what its row of the table allows, and no module imports itself
back through others (no cycles), in crosstalk/ and relay/ alike.

The table is the layering written down: a lower layer never reaches up. Imports under
``if TYPE_CHECKING:`` do not count (they never run). ``from pkg import module`` counts as an
import of that module, not of the package's ``__init__``.

``DEBTS`` lists the upward imports that exist today, each with why; the redesign (issue 21)
removes them one by one. A debt that is paid must be taken off the list (the test says so), and
a new upward import fails until it is fixed or, with a reason, listed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What each area may import (besides itself, the standard library and third-party packages).
BASE = {"crosstalk", "crosstalk.errors", "crosstalk.sim_hooks"}  # "crosstalk": __version__
ALLOWED: dict[str, set[str]] = {
    "crosstalk.errors": set(),
    "crosstalk.sim_hooks": set(),
    "crosstalk.paths": BASE,
    "crosstalk.crypto": BASE,
    "crosstalk.crypto_pairing": BASE | {"crosstalk.crypto"},
    "crosstalk.daemon.lock": BASE | {"crosstalk.paths"},
    # Logging for the daemon and the relay alike: rotation, and repeats said once (sans-IO).
    "crosstalk.logs": BASE | {"crosstalk.paths"},
    # The relays this machine runs: the shared local one, a quick tunnel in front of one.
    "crosstalk.hosting": BASE | {"crosstalk.paths"},
    # The wire is below the cores: cores take wire models as inputs (the relay link's machines
    # read and write relay frames), the wire imports no core (the relay shares it without them).
    "crosstalk.core": BASE | {"crosstalk.crypto", "crosstalk.crypto_pairing", "crosstalk.wire"},
    "crosstalk.wire": BASE | {"crosstalk.crypto"},
    "crosstalk.project": BASE | {"crosstalk.core"},
    # Building slices and refusing credentials in them.
    "crosstalk.slices": BASE | {"crosstalk.wire"},
    "crosstalk.hook": BASE | {"crosstalk.core", "crosstalk.paths"},
    "crosstalk.install": BASE | {"crosstalk.core", "crosstalk.paths"},
    "crosstalk.client": BASE | {"crosstalk.hook", "crosstalk.daemon.lock", "crosstalk.paths"},
    # The MCP server: its stdlib front end (front.py imports only profiles.py, a test says so),
    # the SDK server, the tools (declared over the control op table, in wire), the channel;
    # listing.py writes down what the server lists.
    "crosstalk.mcp": BASE | {"crosstalk.client", "crosstalk.core", "crosstalk.hook",
                             "crosstalk.paths", "crosstalk.wire"},
    "crosstalk.store": BASE | {"crosstalk.core", "crosstalk.crypto", "crosstalk.wire",
                               "crosstalk.paths"},
    "crosstalk.actors": BASE | {"crosstalk.core", "crosstalk.crypto", "crosstalk.wire",
                                "crosstalk.store", "crosstalk.hosting", "crosstalk.paths",
                                "crosstalk.logs"},
    "crosstalk.features": BASE | {"crosstalk.core", "crosstalk.crypto", "crosstalk.wire",
                                  "crosstalk.store", "crosstalk.actors", "crosstalk.paths",
                                  "crosstalk.project", "crosstalk.slices",
                                  "crosstalk.hosting", "crosstalk.logs"},
    "crosstalk.daemon.tree": BASE | {"crosstalk.core", "crosstalk.crypto", "crosstalk.wire",
                                "crosstalk.store", "crosstalk.actors", "crosstalk.features",
                                "crosstalk.hosting", "crosstalk.paths",
                                "crosstalk.daemon.caps", "crosstalk.daemon.link"},
    # The relay link's keeping (start, restart, move, the local relay's keeper).
    "crosstalk.daemon.link": BASE | {"crosstalk.actors", "crosstalk.crypto",
                                     "crosstalk.hosting", "crosstalk.paths",
                                     "crosstalk.store"},
    # What features are handed instead of the Daemon: it imports nothing at runtime.
    "crosstalk.daemon.caps": BASE,
    # The daemon process's root: the control socket first; crosstalk.daemon.tree only by name, on a
    # worker thread, once the socket answers.
    "crosstalk.daemon.start": BASE | {"crosstalk.actors", "crosstalk.store", "crosstalk.paths",
                                      "crosstalk.daemon.tree", "crosstalk.features"},
    # Backup and restore read and write a home's files beside the store, below the CLI.
    "crosstalk.backup": BASE | {"crosstalk.crypto", "crosstalk.daemon.lock", "crosstalk.paths",
                                "crosstalk.store", "crosstalk.wire"},
    # `crosstalk doctor`: its checks as data, the daemon's answers, the clients' rows.
    "crosstalk.doctor": BASE | {"crosstalk.client", "crosstalk.install", "crosstalk.paths",
                                "crosstalk.store"},
    "crosstalk.cli": BASE | {
        "crosstalk.backup", "crosstalk.client", "crosstalk.core", "crosstalk.crypto",
        "crosstalk.daemon.tree", "crosstalk.daemon.start", "crosstalk.doctor", "crosstalk.hook",
        "crosstalk.hosting", "crosstalk.install", "crosstalk.daemon.lock", "crosstalk.logs",
        "crosstalk.mcp", "crosstalk.features", "crosstalk.paths", "crosstalk.store",
        "crosstalk.wire", "relay",
    },
    "crosstalk.__main__": {"crosstalk.cli"},
    # The relay is its own program: it shares only the wire formats, crypto, errors and logging.
    "relay": BASE | {"crosstalk.crypto", "crosstalk.wire", "crosstalk.paths", "crosstalk.logs"},
}

# Upward imports that exist today: (importer area, imported area) -> why. Issue 21 paid the
# last of them; a new one fails the table check until it is fixed or listed here with its reason.
DEBTS: dict[tuple[str, str], str] = {}


# Packages whose modules each have a row of their own (the daemon's: the lock the stdlib client
# takes must not open the way to the supervision tree).
BY_MODULE = {"crosstalk.daemon"}


def _area(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "relay":
        return "relay"
    if ".".join(parts[:2]) in BY_MODULE and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) > 1 else module


def _modules() -> dict[str, Path]:
    found = {}
    for top in ("crosstalk", "relay"):
        for path in (ROOT / top).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _runtime_imports(path: Path, known: dict[str, Path]) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names
                    if f"{node.module}.{a.name}" in known]
            yield from subs
            if len(subs) < len(node.names) and node.module in known:
                yield node.module


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: set(_runtime_imports(path, known)) for name, path in known.items()}


def _area_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(_area(m), _area(d)) for m, deps in graph.items() for d in deps
            if _area(m) != _area(d)}


def test_every_package_imports_only_what_its_row_allows() -> None:
    """Each cross-package import is in the table or a listed debt."""
    edges = _area_edges(_graph())
    unknown = sorted({a for a, _ in edges} - ALLOWED.keys())
    assert not unknown, f"add a row to ALLOWED for {unknown}"
    bad = sorted((a, b) for a, b in edges if b not in ALLOWED[a] and (a, b) not in DEBTS)
    assert not bad, f"imports the table does not allow: {bad}"


def test_paid_debts_come_off_the_list() -> None:
    """A debt nobody owes any more is deleted from DEBTS, so the list only shrinks."""
    edges = _area_edges(_graph())
    paid = sorted(debt for debt in DEBTS if debt not in edges)
    assert not paid, f"these no longer happen; remove them from DEBTS: {paid}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle between modules, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_no_module_imports_itself_back() -> None:
    """No import cycles between modules (those that run, not type-only ones)."""
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check can fail: a planted a -> b -> c -> a is found."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_table_check_catches_an_upward_import() -> None:
    """The check can fail: a core importing the store is not in its row."""
    assert "crosstalk.store" not in ALLOWED["crosstalk.core"]
    assert ("crosstalk.core", "crosstalk.store") not in DEBTS
