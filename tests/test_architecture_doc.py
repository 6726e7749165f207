"""docs/architecture.md says what the code does, and these tests hold it to that.

- The tree drawn under "Inside the daemon" is the daemon's declared one: the names and order of
  ``Daemon.children`` (after ``control``, which run_daemon starts first), then of the kinds in
  ``Daemon.dynamic``.
- The page's table of who may import whom is the import table's rows
  (tests/test_import_table.py), so the two cannot drift apart.
- Features are handed their capabilities, never the ``Daemon``: what ``plug`` gets is a
  :class:`~crosstalk.daemon.caps.Granted`, whose members are exactly ``Capabilities``'.
- No actor holds a reference to another actor: no module under crosstalk/actors/ or
  crosstalk/features/ types anything as an actor class (an argument, a return, an attribute, a
  container of them) or keeps one it made on ``self``. Actors reach each other only through
  channels and doorbells, so nothing can call another actor's methods. The supervisor, whose
  job is holding actors, and ``crosstalk.actors.children``, which hands them to it, are exempt.

Each check has a planted-bug test showing it fails on what it is meant to catch.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.caps import Granted
from crosstalk.daemon.tree import Daemon
from crosstalk.features import caps
from crosstalk.features.feature import Feature, Plugs
from crosstalk.paths import Home
from crosstalk.store.db import open_store
from tests.test_import_table import ALLOWED, BASE

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
STARTED_BY_RUN_DAEMON = ("control",)  # before crosstalk.daemon.tree is even imported
EXEMPT = {"crosstalk/actors/supervisor.py", "crosstalk/actors/children.py"}


def drawn_tree(page: str) -> list[str]:
    """The supervisor's children as the page draws them, in order."""
    section = page[page.index("## Inside the daemon"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    return re.findall(r"^ │   [├└]─ (\S+)", block, flags=re.MULTILINE)


def drawn_imports(page: str) -> dict[str, set[str]]:
    """The page's table of who may import whom: area -> the areas it may import."""
    rows = re.findall(r"^ *\| `([\w.]+)` \| ([\w., ]+) \|$", page, flags=re.MULTILINE)
    # Only rows naming an area of the import table (the page has other tables of this shape).
    return {f"crosstalk.{area}": {f"crosstalk.{a.strip()}" for a in may.split(",")}
            if may != "nothing" else set() for area, may in rows
            if f"crosstalk.{area}" in ALLOWED}


def import_mismatches(drawn: dict[str, set[str]]) -> list[str]:
    """Where the page's table differs from the import table's rows (beyond BASE)."""
    return [f"{area}: page {sorted(may)}, table {sorted(ALLOWED[area] - BASE)}"
            for area, may in sorted(drawn.items()) if may != ALLOWED[area] - BASE]


async def test_the_drawn_tree_is_the_declared_one(tmp_path: Path) -> None:
    """The page draws control, then Daemon.children, then Daemon.dynamic, names and order."""
    async with open_store(tmp_path / "state.db") as store:
        daemon = Daemon(Home(tmp_path), store, Supervisor(heartbeat=5.0), 5.0)
        declared = [*STARTED_BY_RUN_DAEMON, *(c.name for c in daemon.children),
                    *(k.name for k in daemon.dynamic)]
    assert drawn_tree(PAGE.read_text()) == declared


def test_a_tree_drawn_out_of_order_is_caught() -> None:
    """The check can fail: two children swapped on the page no longer match."""
    page = PAGE.read_text()
    swapped = page.replace(" │   ├─ fanout ", " │   ├─ TMP ").replace(
        " │   ├─ router ", " │   ├─ fanout ").replace(" │   ├─ TMP ", " │   ├─ router ")
    drawn = drawn_tree(swapped)
    assert drawn != drawn_tree(page)
    assert drawn.index("router") < drawn.index("fanout")


def test_the_pages_import_rules_are_the_import_tables() -> None:
    """Every row of the page's table is its area's row of the import table, and the runtime's
    areas are all there."""
    drawn = drawn_imports(PAGE.read_text())
    assert {"crosstalk.core", "crosstalk.actors", "crosstalk.features"} <= drawn.keys()
    assert import_mismatches(drawn) == []


def test_an_import_rule_the_table_lacks_is_caught() -> None:
    """The check can fail: a page saying actors may import features does not match."""
    drawn = drawn_imports(PAGE.read_text())
    drawn["crosstalk.actors"] = drawn["crosstalk.actors"] | {"crosstalk.features"}
    assert [m for m in import_mismatches(drawn) if m.startswith("crosstalk.actors:")]


def _actor_classes(trees: dict[str, ast.Module]) -> set[str]:
    """Classes with ``async def run(self, ctx, ...)``: what the supervisor runs."""
    found = set()
    for tree in trees.values():
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef) or any(
                ast.unparse(base).endswith("Protocol") or "Protocol[" in ast.unparse(base)
                for base in cls.bases
            ):
                continue
            for item in cls.body:
                if isinstance(item, ast.AsyncFunctionDef) and item.name == "run" and [
                    a.arg for a in item.args.args[:2]
                ] == ["self", "ctx"]:
                    found.add(cls.name)
    return found


def _names(node: ast.AST) -> set[str]:
    """Every name an annotation mentions, string annotations included."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                names |= _names(ast.parse(sub.value, mode="eval"))
            except SyntaxError:
                pass  # a docstring or a plain string, not an annotation
    return names


def _holdings(tree: ast.Module) -> list[tuple[int, ast.AST]]:
    """(line, node) for every annotation, and every value kept on ``self``."""
    found: list[tuple[int, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            found += [(a.lineno, a.annotation) for a in
                      (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.annotation]
            if node.returns is not None:
                found.append((node.lineno, node.returns))
        elif isinstance(node, ast.AnnAssign):
            found.append((node.lineno, node.annotation))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
            isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self" for t in node.targets
        ):
            found.append((node.lineno, node.value.func))
    return found


def actor_references(trees: dict[str, ast.Module]) -> list[str]:
    """Where a module holds (types, or keeps on ``self``) an actor class."""
    actors = _actor_classes(trees)
    return [f"{path}:{line} holds {sorted(_names(node) & actors)}"
            for path, tree in sorted(trees.items()) if path not in EXEMPT
            for line, node in _holdings(tree) if _names(node) & actors]


def _runtime_trees() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(), filename=str(path))
        for area in ("crosstalk/actors", "crosstalk/features")
        for path in sorted((ROOT / area).rglob("*.py"))
    }


def test_no_actor_holds_a_reference_to_another_actor() -> None:
    """No module under actors/ or features/ types or keeps an actor: they talk by channels."""
    assert actor_references(_runtime_trees()) == []


def test_an_actor_held_by_another_is_caught() -> None:
    """The check can fail: the relay link applying through the room actors it held (the
    module issue 40 removed), and an actor kept on ``self``, are both found."""
    planted = {
        "crosstalk/actors/room.py": ast.parse(
            "class RoomActor:\n    async def run(self, ctx, *, task_status=None): ...\n"
        ),
        "crosstalk/actors/room_inbound.py": ast.parse(
            "def inbound_applier(actors: 'Mapping[str, RoomActor]') -> None:\n"
            "    for actor in actors.values():\n        actor.apply_within(None)\n"
        ),
        "crosstalk/features/x.py": ast.parse(
            "class Handle:\n    def __init__(self):\n        self.room = RoomActor()\n"
        ),
    }
    found = actor_references(planted)
    assert [f.split(" ")[0] for f in found] == [
        "crosstalk/actors/room_inbound.py:1", "crosstalk/features/x.py:3",
    ]


def plug_closures(trees: dict[str, ast.Module]) -> list[str]:
    """Where a feature's ``plug`` (or a function it calls to build a handler) makes a closure
    over the capabilities it was given: a nested function or lambda naming its first parameter.
    ``plug`` only wires module functions, with ``functools.partial``."""
    found = []
    for path, tree in sorted(trees.items()):
        for func in tree.body:
            if not isinstance(func, ast.FunctionDef) or not func.args.args:
                continue
            caps = func.args.args[0].arg
            if func.name != "plug" and caps != "daemon":
                continue
            for node in ast.walk(func):
                if node is not func and isinstance(
                    node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                ) and any(isinstance(n, ast.Name) and n.id == caps for n in ast.walk(node)):
                    found.append(f"{path}:{node.lineno} {func.name} closes over {caps}")
    return found


def test_plug_builds_no_closures_over_the_capabilities() -> None:
    """No feature's plug, nor a sync helper taking the capabilities, closes over them."""
    features = {p: t for p, t in _runtime_trees().items() if p.startswith("crosstalk/features")}
    assert plug_closures(features) == []


def test_a_closure_in_plug_is_caught() -> None:
    """The check can fail: a handler defined inside plug, naming the daemon, is found, and so
    is a listener factory; a module handler wired with partial is not."""
    planted = {"crosstalk/features/x/ops.py": ast.parse(
        "def plug(daemon):\n"
        "    async def show(params):\n        return await daemon.store.read(f)\n"
        "    return Plugs(ops=(op('show', P, show),))\n"
        "def listener_for(daemon):\n"
        "    return lambda applied: daemon.wake_room(applied[0].room_id)\n"
        "def plug_ok(daemon):\n"
        "    return Plugs(ops=(op('show', P, functools.partial(show, daemon)),))\n"
    )}
    assert [f.split(" ")[0] for f in plug_closures(planted)] == [
        "crosstalk/features/x/ops.py:2", "crosstalk/features/x/ops.py:6",
    ]


def capability_names() -> set[str]:
    """Every member the capability protocols declare (attributes, methods, properties)."""
    names: set[str] = set()
    for proto in caps.Capabilities.__mro__:
        if proto.__module__ == caps.__name__:
            names |= set(getattr(proto, "__annotations__", {}))
            names |= {n for n in vars(proto) if not n.startswith("_")}
    return names


def members(obj: object) -> set[str]:
    """The public members of ``obj``: its attributes and its class's properties and methods."""
    return {n for n in (*vars(obj), *vars(type(obj))) if not n.startswith("_")}


async def test_features_are_given_capabilities_not_the_daemon(tmp_path: Path) -> None:
    """plug gets a Granted (not the Daemon) with exactly the Capabilities' members."""
    given: list[object] = []

    def plug(host: caps.Capabilities) -> Plugs:
        given.append(host)
        return Plugs()

    async with open_store(tmp_path / "state.db") as store:
        daemon = Daemon(Home(tmp_path), store, Supervisor(heartbeat=5.0), 5.0,
                        features=(Feature("probe", plug),))
    [host] = given
    assert isinstance(host, Granted) and not isinstance(host, Daemon)
    assert members(host) == capability_names()
    assert members(daemon) - capability_names()  # the daemon has more than it grants


def test_a_capability_granted_beyond_the_protocols_is_caught() -> None:
    """The check can fail: an object with one member more than Capabilities does not match."""

    class Leaky:
        def __init__(self) -> None:
            for name in capability_names():
                setattr(self, name, None)
            self.seams = object()  # the daemon's internals, handed out by mistake

    assert members(Leaky()) - capability_names() == {"seams"}


def named_paths(page: str, section: str) -> set[str]:
    """The repository paths (in backticks) that one section of the page names."""
    text = page[page.index(f"## {section}"):]
    text = text[:text.index("\n## ", 4)]
    return set(re.findall(r"`((?:crosstalk|tests|docs)/[\w/.]+)`", text))


def test_the_add_a_feature_walk_through_names_real_places() -> None:
    """Every existing path the walk-through names exists (the example's own new files,
    those under features/pins/ and the pins store and CLI modules, are to be made)."""
    wanted = {p for p in named_paths(PAGE.read_text(), "Add a feature: where each part goes")
              if "pins" not in p}
    assert len(wanted) > 10
    assert sorted(p for p in wanted if not (ROOT / p).exists()) == []


def test_a_walk_through_naming_a_missing_file_is_caught() -> None:
    """The check can fail: a path that does not exist is listed as missing."""
    page = "## Add\n`crosstalk/features/caps.py` and `crosstalk/nowhere.py`\n## Next\n"
    paths = named_paths(page, "Add")
    assert sorted(p for p in paths if not (ROOT / p).exists()) == ["crosstalk/nowhere.py"]
