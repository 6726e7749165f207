"""Two relay nodes on NATS (``relay/node*.py``) in place of the single relay, on one stand-in
stream (:mod:`tests.sim.nats_stream`).

Each node is the real :class:`~relay.node.NodeServer` (its request path, feed and presence)
behind the real shell's ``handle_stream``, exactly as :class:`~tests.sim.net.SimRelay` serves
the single relay; storage is :class:`~relay.nats_store.NatsStorage` with the stand-in as its
backend, so every compare-and-set, reload and RePublish goes through the node code as in
production. Each daemon's connection lands on one node (its *home*); a reconnect may land on the
other (a load balancer), and always does while its home is down.

Ground truth is the stream: each message stored is recorded, as it is stored, with the writes
it carries (one relay step each). ``storage.load()`` is a fresh node's load of the stream.

Faults, drawn from streams of their own (so a seed's other draws do not move): the fault
schedule's ``relay_crash`` crashes one node (its connections reset, its cache lost; it restarts
from the stream); and while faults are on, node crashes of their own, a node's feed delayed for
a while (the RePublish reaching it late), and a crash between a publish stored and its answer
(the write in doubt that a restarted or reloading node must settle). Every other fault of the
single relay (drops, delays, cuts, freezes, busy) acts on both nodes' connections.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import trio

from relay.nats_layout import Layout
from relay.nats_store import JetStream, NatsStorage, StreamMessage
from relay.node import NodeServer
from relay.server import RelayServer
from relay.storage import Snapshot
from tests.sim.determinism import NODE
from tests.sim.nats_stream import SimBackend, SimConnection, SimJetStream, SimStream
from tests.sim.net import TIMINGS, SimRelay

NAMESPACE = "sim"
NODES = ("relay-a", "relay-b")
SWITCH = 0.25  # the chance a reconnect lands on the other node while both are up
CHAOS_GAP = 45.0  # mean virtual seconds between the pair's own faults while faults are on
CRASH_IN_PUBLISH = 0.01  # a node dies between a publish stored and its answer
MAX_NODE_CRASHES = 4  # of the pair's own, per run
START_UP = 0.5  # at most this many virtual seconds between a node's load and its feed


class _Clock:
    """The stream's clock (TTLs): virtual time, and the last one seen once the run is over
    (the checkers load the stream after ``trio.run`` returned)."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self) -> float:
        try:
            self.last = trio.current_time()
        except RuntimeError:
            pass
        return self.last


class StreamStorage:
    """The stream as the checkers read it: what a node starting now would load."""

    def __init__(self, stream: SimStream) -> None:
        self._stream = stream

    def load(self) -> Snapshot:
        return NatsStorage("", namespace=NAMESPACE, backend=SimBackend(self._stream, "check")
                           ).load()


class _NodeBackend(SimBackend):
    """A node's way into the stream, where the node may die between a publish stored and its
    answer (``fault`` decides)."""

    def __init__(self, stream: SimStream, name: str, fault: Callable[[], Awaitable[None]]
                 ) -> None:
        super().__init__(stream, name)
        self._fault = fault

    def connection(self, on_reconnect: Callable[[], None]) -> tuple[SimConnection, JetStream]:
        conn, _ = super().connection(on_reconnect)
        return conn, SimJetStream(self.stream, after_publish=self._fault)


class _Node:
    """One relay node process: its incarnation's shell, nursery and connection."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server: NodeServer | None = None
        self.nursery: trio.Nursery | None = None
        self.backend: _NodeBackend | None = None
        self.down = trio.Event()  # set by a crash, for the incarnation to end
        self.up = trio.Event()  # set by a restart

    @property
    def running(self) -> bool:
        return self.server is not None and self.nursery is not None and not self.down.is_set()


class SimNodes(SimRelay):
    """Two relay nodes sharing one stream, behind the single relay's network and fault knobs."""

    def __init__(self, seed: int, *, leak: bool = False,
                 count: Callable[[str], None] = lambda _: None) -> None:
        super().__init__(seed, leak=leak, count=count)
        self.stream = SimStream(Layout(NAMESPACE), _Clock())
        self.stream.on_stored = self._stored
        self.storage = StreamStorage(self.stream)  # type: ignore[assignment]  # load() only
        self.nodes = {name: _Node(name) for name in NODES}
        self._home: dict[str, str] = {}  # daemon -> the node its connections land on
        self._route_rng = random.Random(f"{seed}/relay-nodes-route")
        self._chaos_rng = random.Random(f"{seed}/relay-nodes-chaos")
        self._own_crashes = MAX_NODE_CRASHES
        self.feed_delays: dict[str, float] = {}  # node -> its feed's delay now
        self._chaos_nursery: trio.Nursery | None = None  # restarts after the pair's own crashes

    # --- the node processes -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for node in self.nodes.values():
                await nursery.start(self._keep, node)
            nursery.start_soon(self._chaos)
            task_status.started()

    async def _keep(self, node: _Node, *,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run ``node``'s incarnations: each lasts until a crash, the next starts at the
        restart and loads the stream."""
        NODE.set(node.name)
        while True:
            node.backend = _NodeBackend(self.stream, node.name, self._crash_in_publish)
            storage = NatsStorage("", namespace=NAMESPACE, backend=node.backend)
            node.server = NodeServer(storage, self.key_seed, config=self._config(),
                                     timings=TIMINGS, node=node.name)
            # A feed made late before the crash stays late.
            self._set_feed_delay(node.name, self.feed_delays.get(node.name, 0.0))
            try:
                async with trio.open_nursery() as nursery:
                    node.nursery = nursery
                    # A start-up takes a moment between the node's load and its feed: what the
                    # other node stores meanwhile is what FedServer._catch_up is there for.
                    await trio.sleep(self._chaos_rng.uniform(0.0, START_UP))
                    await nursery.start(node.server.run)
                    task_status.started()
                    task_status = trio.TASK_STATUS_IGNORED
                    await node.down.wait()
                    nursery.cancel_scope.cancel()
            except BaseExceptionGroup:
                if not node.down.is_set():  # a killed process raises nothing (net.py)
                    raise
            node.down, node.nursery, node.server = trio.Event(), None, None
            await node.up.wait()
            node.up = trio.Event()

    def _stored(self, message: StreamMessage) -> None:
        """A message reached the stream: its writes are ground truth (one relay step)."""
        stored = self.stream.layout.decode(message.subject, message.headers, message.data)
        if stored is not None and stored.writes:
            self.committed(stored.writes)

    # --- where connections land ---------------------------------------------------------------

    def _accepting(self, node: str) -> tuple[trio.Nursery, RelayServer, str] | None:
        up = [n for n in self.nodes.values() if n.running]
        if not up:
            return None
        home = self._home.get(node)
        if home is None or not self.nodes[home].running or (
                len(up) > 1 and self._route_rng.random() < SWITCH):
            if home is None:
                home = self._route_rng.choice(up).name
            else:
                home = next((n.name for n in up if n.name != home), up[0].name)
                self._count("relay:moved_node")  # a reconnect that lands on the other node
            self._home[node] = home
        target = self.nodes[home]
        assert target.nursery is not None and target.server is not None
        return target.nursery, target.server, target.name

    @property
    def server(self) -> RelayServer | None:
        """The first running node's shell (lies and the leak plant act on it)."""
        return next((n.server for n in self.nodes.values() if n.running), None)

    @server.setter
    def server(self, value: RelayServer | None) -> None:
        del value  # set by SimRelay.__init__ only; each node keeps its own

    def _reconfigure(self) -> None:
        for node in self.nodes.values():
            if node.server is not None:
                node.server.core.config = self._config()

    # --- faults ---------------------------------------------------------------------------------

    def crash(self, which: str | None = None) -> None:
        """One node dies (``which``, or one drawn): its connections reset, its cache lost."""
        up = [n for n in self.nodes.values() if n.running]
        if not up:
            return
        node = self.nodes[which] if which is not None else self._chaos_rng.choice(up)
        if not node.running:
            return
        self.crashes += 1
        self._count("fault:node_crash")
        assert node.nursery is not None
        node.nursery.cancel_scope.cancel()
        node.down.set()
        for _, up_pipe, down_pipe, relay in self.pipes:
            if relay == node.name:
                up_pipe.break_()
                down_pipe.break_()

    def restart(self) -> None:
        """Every node that is down starts again from the stream."""
        for node in self.nodes.values():
            if not node.running:
                node.up.set()

    @property
    def down(self) -> bool:
        """Whether some node is down (heal restarts it)."""
        return not all(n.running for n in self.nodes.values())

    async def _crash_in_publish(self) -> None:
        """Between a publish stored and its answer: sometimes the node dies there."""
        name = NODE.get()
        if not (self.faults_on and self._own_crashes and name in self.nodes
                and self._chaos_rng.random() < CRASH_IN_PUBLISH):
            return
        self._own_crashes -= 1
        self._count("buggify:node.crash_in_publish")
        self.crash(name)
        self._later(self._chaos_rng.uniform(0.5, 10.0), name)
        await trio.sleep_forever()  # cancelled with the rest of the incarnation

    def _later(self, downtime: float, name: str) -> None:
        """Restart ``name`` after ``downtime`` virtual seconds."""
        async def restart() -> None:
            await trio.sleep(downtime)
            self.nodes[name].up.set()

        assert self._chaos_nursery is not None
        self._chaos_nursery.start_soon(restart)

    async def _chaos(self) -> None:
        """The pair's own faults while faults are on: a node crash, or a node's feed late."""
        rng = self._chaos_rng
        async with trio.open_nursery() as nursery:
            self._chaos_nursery = nursery
            while True:
                await trio.sleep(rng.expovariate(1.0 / CHAOS_GAP))
                if not self.faults_on:
                    continue
                if rng.random() < 0.4:
                    if self._own_crashes and not self.down:
                        self._own_crashes -= 1
                        name = rng.choice(NODES)
                        self.crash(name)
                        self._later(rng.uniform(0.5, 10.0), name)
                else:
                    nursery.start_soon(self._feed_late, rng.choice(NODES),
                                       rng.uniform(0.05, 3.0), rng.uniform(1.0, 30.0))

    async def _feed_late(self, name: str, delay: float, length: float) -> None:
        self._count("fault:feed_delay")
        self._set_feed_delay(name, delay)
        await trio.sleep(length)
        self._set_feed_delay(name, 0.0)

    def _set_feed_delay(self, name: str, delay: float) -> None:
        if delay:
            self.feed_delays[name] = delay
        else:
            self.feed_delays.pop(name, None)
        backend = self.nodes[name].backend
        if backend is not None and backend.conn is not None:
            backend.conn.delay = delay
