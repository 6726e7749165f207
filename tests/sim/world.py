"""The simulated world: N real daemons and the relay in one ``trio.run``, faults from the seed.

Each node is a real :class:`~crosstalk.daemon.tree.Daemon` with every feature of ``FEATURES``
plugged in (its own :class:`OpTable`: ``daemon.ops``), its own ``state.db`` in a temp dir (SQLite
run inline through ``Store(run_sync=...)``), and its relay link connected to :class:`SimRelay`
through the ``connect`` seam. A crash cancels the node's nursery and every op a client has in
flight on it (their replies are lost: ``info``); the restart reopens the same SQLite file. Planted
bugs are world composition: ``plants`` edit a daemon's appliers/listeners lists before it starts.
"""

from __future__ import annotations

import functools
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from crosstalk import crypto, sim_hooks
from crosstalk.actors.control import ControlServer, OpTable
from crosstalk.actors.control_gate import OpGate
from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.tree import Daemon
from crosstalk.paths import Home
from crosstalk.store.db import Store, connect
from crosstalk.store.identity import IdentityRecord, save_identity
from tests.sim.determinism import EPOCH, NODE, Entropy, inline_run_sync
from tests.sim.door import Door, forget_newest_send
from tests.sim.history import History
from tests.sim.nats_relay import SimNodes
from tests.sim.net import SimRelay

HEARTBEAT = 5.0
HANG_UP_STEPS = 60  # a client hangs up within this many scheduler steps of its request
MAX_INCARNATIONS = 8  # bounds the keeper loop: crashes per node per run are capped below this

Plant = Callable[[Daemon], None]


class ActorCrash(Exception):
    """Raised at a hand-off by the ``actor_crash`` fault: one actor of a node crashes there (its
    supervisor restarts it), not the whole daemon."""


def keys_for(seed: int, names: tuple[str, ...] | list[str]) -> dict[str, crypto.Keys]:
    """Each node's identity keys, derived from the seed."""
    rng = random.Random(f"{seed}/keys")
    return {name: crypto.Keys(rng.randbytes(32), rng.randbytes(32)) for name in names}


class Node:
    """One home: its files, keys, and the daemon of its current incarnation (if up)."""

    def __init__(self, name: str, root: Path, keys: crypto.Keys) -> None:
        self.name = name
        self.home = Home(root / name)
        self.home.root.mkdir(parents=True)
        self.keys = keys
        # A checkout for the file reservations: a directory with ``.git`` in it is what
        # ``crosstalk.project.repo_root`` looks for, so no ``git init`` (no subprocess in a run).
        # Every node's is named ``proj``: the same repository, as reservations name it.
        self.repo = root / "repos" / name / "proj"
        (self.repo / ".git").mkdir(parents=True)
        record = IdentityRecord(
            label=name, machine=name, signing_seed=self.keys.ed_seed,
            box_secret=self.keys.x_secret, created_at=EPOCH,
        )
        save_identity(self.home.identity, record, keyring=False)
        self.daemon: Daemon | None = None
        self.ops: OpTable | None = None
        self.door = Door()  # its control socket: clients connect through it (tests/sim/door.py)
        self.ready = trio.Event()
        self.crashed = trio.Event()
        self.op_scopes: set[trio.CancelScope] = set()
        self.incarnation = 0
        self.crashes = 0

    @property
    def fp(self) -> str:
        return self.keys.fingerprint

    def is_up(self) -> bool:
        return self.daemon is not None and not self.crashed.is_set()


def _new_databases(root: Path, paths: list[Path]) -> None:
    """Each node's new ``state.db``: a copy of one made here as a daemon makes it (the schema
    in one transaction), so each node's first open finds it current. A copy costs half of
    making one."""
    template = root / "new-state.db"
    connect(template).close()  # closing the last connection folds the WAL into the file
    for path in paths:
        shutil.copyfile(template, path)


class World:
    """Nodes, relay, clocks, BUGGIFY, history: everything one seed runs."""

    def __init__(
        self, seed: int, n: int, root: Path, entropy: Entropy, *,
        plants: dict[str, list[Plant]] | None = None, max_crashes: int = 3,
        leaky_relay: bool = False, undo_on_hangup: bool = False, relay_nodes: int = 1,
    ) -> None:
        self.seed = seed
        self.entropy = entropy
        # One relay (the shell on memory storage), or two relay nodes on a NATS stand-in.
        self.relay = (SimNodes(seed, leak=leaky_relay, count=self.count) if relay_nodes == 2
                      else SimRelay(seed, leak=leaky_relay, count=self.count))
        self.coverage: dict[str, int] = {"relay:two_nodes": 1} if relay_nodes == 2 else {}
        names = [f"n{i}" for i in range(n)]
        keys = keys_for(seed, names)
        self.nodes = {name: Node(name, root, keys[name]) for name in names}
        _new_databases(root, [node.home.database for node in self.nodes.values()])
        self.relay.fps = {name: k.fingerprint for name, k in keys.items()}
        self.history = History()
        self.plants = plants or {}
        self.undo_on_hangup = undo_on_hangup  # the planted bug of that name (tests/sim/plants.py)
        self.crash_budget = max_crashes
        self.faults_on = False
        self._bug_rng = random.Random(f"{seed}/buggify")
        # FoundationDB's scheme: each point is on or off for the whole run, then fires by chance.
        self._bug_on = {
            name: self._bug_rng.random() < 0.5
            for name in ("store.after_commit", "store.slow")
        }
        # Storage faults draw from a stream of their own, so adding them moved no older draw.
        self._disk_rng = random.Random(f"{seed}/storage")
        self._disk_on = {
            name: self._disk_rng.random() < 0.5
            for name in ("store.commit_fails", "store.slow_fsync")
        }
        self.disk_full: dict[str, float] = {}  # node -> virtual time its disk has room again
        self.commit_fails: dict[str, float] = {}  # node -> time its COMMITs succeed again
        self._late_rng = random.Random(f"{seed}/handoffs")
        self._late_on: dict[str, bool] = {}  # per hand-off point: sometimes late this run, or never
        self._reply_rng = random.Random(f"{seed}/replies")
        self._replies_lost = self._reply_rng.random() < 0.5
        self._reader_rng = random.Random(f"{seed}/readers")
        self._slow_readers = self._reader_rng.random() < 0.5
        # node -> (hand-off point, times): one of its actors crashes at each of its next
        # ``times`` passes there (``actor_crash``)
        self.crash_at: dict[str, tuple[str, int]] = {}

    def by_fp(self, fp: str) -> str | None:
        return next((n.name for n in self.nodes.values() if n.fp == fp), None)

    def count(self, what: str) -> None:
        self.coverage[what] = self.coverage.get(what, 0) + 1

    # --- BUGGIFY -----------------------------------------------------------------------------

    def _choose(self, name: str) -> bool:
        if name.startswith("store.") and name not in self._bug_on:
            return self._choose_disk(name)
        if name.startswith("handoff."):
            return self._crash_here(name) or self._choose_late(name)
        if not self.faults_on or not self._bug_on.get(name, False):
            return False
        node = self.nodes.get(NODE.get())
        if node is None or not node.is_up():
            return False
        if name == "store.after_commit":
            return self.crash_budget > 0 and self._bug_rng.random() < 0.01
        return self._bug_rng.random() < 0.05

    def _choose_disk(self, name: str) -> bool:
        """The storage faults: a full disk (a scheduled window per node), a failed COMMIT, a
        slow fsync. Each is counted here: the store raises or delays without calling back."""
        node = self.nodes.get(NODE.get())
        if not self.faults_on or node is None or not node.is_up():
            return False
        if name == "store.disk_full":
            fired = self.disk_full.get(node.name, -1.0) > trio.current_time()
        elif self.commit_fails.get(node.name, -1.0) > trio.current_time():
            fired = name == "store.commit_fails"  # a placed window: every COMMIT fails
        else:
            chance = 0.01 if name == "store.commit_fails" else 0.05
            fired = self._disk_on.get(name, False) and self._disk_rng.random() < chance
        if fired and name != "store.slow_fsync":  # counted when the delay is carried out
            self.count(f"buggify:{name}")
        return fired

    def _crash_here(self, name: str) -> bool:
        node = NODE.get()
        armed = self.crash_at.get(node)
        return (self.faults_on and armed is not None and armed[0] == name
                and self.nodes[node].is_up())

    def _choose_late(self, name: str) -> bool:
        if not self.faults_on:
            return False
        on = self._late_on.get(name)
        if on is None:
            on = self._late_on[name] = self._late_rng.random() < 0.5
        return on and self._late_rng.random() < 0.05

    def _crash_actor(self, name: str) -> None:
        where = NODE.get()
        point, times = self.crash_at.pop(where)
        if times > 1:
            self.crash_at[where] = (point, times - 1)
        self.count(f"crash:{name}")
        self.history.add(where, "actor_crash", "info", {"at": name}, None)
        raise ActorCrash(f"sim: an actor of {where} crashed at {name}")

    def hang_up(self) -> int | None:
        """After how many scheduler steps the client of the next op hangs up, reading nothing
        (None: it reads its reply). Steps, not seconds: an op runs in little or no virtual
        time, so steps are what put the hang-up inside it (or just after it)."""
        if not (self.faults_on and self._replies_lost and self._reply_rng.random() < 0.03):
            return None
        return self._reply_rng.randint(0, HANG_UP_STEPS)

    def slow_reader(self) -> bool:
        """Whether the client of the next op reads its reply slowly (a lockstep connection)."""
        return self.faults_on and self._slow_readers and self._reader_rng.random() < 0.1

    async def _fire(self, name: str) -> None:
        if self._crash_here(name):
            self._crash_actor(name)
        self.count(f"buggify:{name}")
        node = self.nodes.get(NODE.get())
        if node is not None and name == "store.after_commit":
            self.crash(node, why=name)
        if name == "store.slow_fsync":
            await trio.sleep(self._disk_rng.uniform(0.05, 2.0))
        elif name.startswith("handoff."):
            await trio.sleep(self._late_rng.uniform(0.001, 0.5))
        await trio.lowlevel.checkpoint()

    async def run_sync(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """The stores' runner: inline SQLite, sometimes slow (virtual time) when BUGGIFY says."""
        if self._choose("store.slow"):
            self.count("buggify:store.slow")
            await trio.sleep(self._bug_rng.uniform(0.001, 0.2))
        return await inline_run_sync(fn, *args, **kw)

    def install_hooks(self) -> None:
        sim_hooks.install(self._choose, self._fire, lambda name: self.count(f"probe:{name}"))

    # --- nodes -------------------------------------------------------------------------------

    def crash(self, node: Node, *, why: str) -> bool:
        """Kill ``node`` now (like kill -9); its keeper restarts it after a seeded downtime."""
        if not node.is_up() or self.crash_budget <= 0:
            return False
        self.crash_budget -= 1
        node.crashes += 1
        self.count(f"crash:{why}")
        self.history.add(node.name, "crash", "info", {"why": why}, None)
        node.crashed.set()
        # Waiters on the dead incarnation wake up and wait for the next one.
        dead, node.ready = node.ready, trio.Event()
        dead.set()
        for scope in list(node.op_scopes):
            scope.cancel()
        return True

    async def keep(self, node: Node, downtime: Callable[[], float]) -> None:
        """Run ``node``'s incarnations until the world ends (restart after each crash)."""
        NODE.set(node.name)
        for incarnation in range(MAX_INCARNATIONS):
            node.incarnation = incarnation
            node.crashed = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_node, node)
                await node.crashed.wait()
                nursery.cancel_scope.cancel()
            await trio.sleep(downtime())
            if incarnation:
                self.history.add(node.name, "restart", "info", {"n": incarnation}, None)
        await trio.sleep_forever()

    async def _run_node(self, node: Node) -> None:
        store = await Store.open(node.home.database, run_sync=self.run_sync)
        try:
            async with trio.open_nursery() as nursery:
                supervisor = Supervisor(heartbeat=HEARTBEAT)
                await nursery.start(supervisor.run)
                # The control socket first, behind its gate, as crosstalk.daemon.start does.
                if self.undo_on_hangup:
                    node.door.on_hangup = functools.partial(forget_newest_send, store)
                gate = OpGate(str(node.home.root))
                server = ControlServer(node.home.socket, gate, listen=node.door.listen)
                await supervisor.start_actor("control", server)
                daemon = Daemon(node.home, store, supervisor, HEARTBEAT, connect=self.relay.connect)
                ops = daemon.ops
                for plant in self.plants.get(node.name, []):
                    plant(daemon)
                await daemon.start()
                gate.open(ops)
                node.daemon, node.ops = daemon, ops
                node.ready.set()
                await trio.sleep_forever()
        finally:
            node.daemon = node.ops = None
            node.door.listener = None
            with trio.CancelScope(shield=True):
                await store.close()

    async def up(self, node: Node) -> tuple[Daemon, OpTable]:
        """The node's daemon and ops once it is up (waits through a restart)."""
        # Bounded: a node restarts at most MAX_INCARNATIONS times.
        for _ in range(MAX_INCARNATIONS + 1):
            if node.daemon is not None and node.ops is not None and not node.crashed.is_set():
                break
            await node.ready.wait()
        assert node.daemon is not None and node.ops is not None, f"{node.name} never came up"
        return node.daemon, node.ops
