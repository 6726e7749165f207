"""docs/architecture.md names only modules that exist: every path (``actors/fanout.py``,
``features/ui/``) and dotted name (``crosstalk.client.ensure_daemon``) it puts in backticks is
found in the tree, so a module that moves or goes away fails here until the page follows.

Paths are looked up from the repository root and from ``crosstalk/`` and ``relay/`` (the page
writes ``actors/room.py`` for ``crosstalk/actors/room.py``); a dotted name must be a module, or a
module and a name defined at its top level.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
BASES = (ROOT, ROOT / "crosstalk", ROOT / "relay")
CODE = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[\w./-]+(\.py|/)$")
DOTTED = re.compile(r"^(crosstalk|relay)(\.\w+)+$")
# The walk-through's example feature ("Add a feature: where each part goes") is one that does
# not exist; its paths are the only ones allowed not to.
EXAMPLE = re.compile(r"(^|/)(features/pins/|store/pins\.py|cmd_pins\.py)")


def named(text: str) -> tuple[list[str], list[str]]:
    """The paths and the dotted names a page puts in backticks (not in fenced code blocks)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    spans = CODE.findall(prose)
    paths = [s for s in spans if "/" in s and PATH.match(s) and not s.startswith(("/", "~"))
             and not EXAMPLE.search(s)]
    return paths, [s for s in spans if DOTTED.match(s)]


def path_exists(path: str) -> bool:
    return any((base / path).exists() for base in BASES)


def _top_level_names(source: Path) -> set[str]:
    tree = ast.parse(source.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def dotted_exists(name: str) -> bool:
    """A module (file or package), or a module and one top-level name in it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        source = base.with_suffix(".py")
        if not source.exists():
            source = base / "__init__.py"
        if source.exists():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and rest[0] in _top_level_names(source))
    return False


def test_every_module_the_architecture_page_names_exists() -> None:
    """Each backticked path and dotted name in docs/architecture.md is in the tree."""
    paths, dotted = named(PAGE.read_text(encoding="utf-8"))
    assert len(paths) > 20, "the page names its modules; the pattern finds too few"
    missing = [p for p in paths if not path_exists(p)] + [d for d in dotted if not dotted_exists(d)]
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_the_check_finds_a_module_that_is_gone() -> None:
    """The check can fail: a page naming a missing module, or a missing name in a real one, is
    caught; real ones pass."""
    paths, dotted = named(
        "the `actors/fanout.py` and `actors/gone.py`; `crosstalk.client.ensure_daemon`, "
        "`crosstalk.client.no_such_thing`, `crosstalk.nowhere`\n```\n`not/checked.py`\n```\n"
    )
    assert paths == ["actors/fanout.py", "actors/gone.py"]
    assert [p for p in paths if not path_exists(p)] == ["actors/gone.py"]
    assert [d for d in dotted if not dotted_exists(d)] == [
        "crosstalk.client.no_such_thing", "crosstalk.nowhere",
    ]
