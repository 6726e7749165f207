"""``room_new`` and ``room_join``: two people read four words and end up in a room of two.

The inviter opens a slot, shows the code at once (a stream op: first line the invite, the last
the result), and runs a pairing actor until the joiner's offer opens. Then it adopts the joiner
as a contact, records the room of two with its key, creates the room on the relay and adds the
joiner (the relay allows that add because the two just met in its slot). The joiner runs the
same actor, adopts the inviter and the room, waits for the relay's invitation and accepts it.
Nothing is adopted unless the words matched; every write happens in one transaction.
"""

from __future__ import annotations

import functools
import socket
import sqlite3
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Protocol

import nacl.utils
import trio

from crosstalk import crypto, sim_hooks
from crosstalk.actors.children import DynamicKind
from crosstalk.actors.pairing import Paired, PairingActor, PairingOutcome
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.router import RoutePairing, WatchInvitation
from crosstalk.actors.supervisor import Restart
from crosstalk.core.invite import Invite
from crosstalk.core.words import BYTES_PER_WORD
from crosstalk.errors import NotInvited, RelayKeyMismatch, RelayUnreachable, RemoteProtocolError
from crosstalk.features.caps import (
    FollowsRosters,
    Identified,
    Linked,
    MakesIdentity,
    MovesRelay,
    Routed,
    SendsOps,
    Stored,
    Supervises,
)
from crosstalk.features.feature import Plugs, op, stream_op
from crosstalk.features.membership.history import (
    add_after_create,
    create_frame,
    request_change,
    with_statement,
)
from crosstalk.features.membership.lifecycle import relay_room_state, relay_says_joined
from crosstalk.hosting.local_relay import (
    ensure_relay_at,
    hosted_port,
    is_local_default,
    lan_address,
)
from crosstalk.hosting.tunnel import open_tunnel, require_cloudflared
from crosstalk.store.rooms import (
    Contact,
    Room,
    RoomMember,
    add_member,
    add_room,
    set_room_state,
    upsert_contact,
)
from crosstalk.wire import relay as w
from crosstalk.wire.control.params import RoomJoinParams, RoomNewParams
from crosstalk.wire.control.replies.rooms import InviteLine, JoinedLine
from crosstalk.wire.control.table import ROOM_JOIN, ROOM_NEW
from crosstalk.wire.pairing import Offer, Purpose, Role, RoomGrant

INVITATION_WAIT = 60.0
ACCEPT_PAUSES = (0.5, 1.0, 2.0, 4.0, 8.0)  # seconds between accepts refused as uninvited
PAIRINGS = DynamicKind(
    "pairing-<slot>", "features/pairing, one per pairing in progress (ends with its outcome)",
    Restart.TRANSIENT,
)


class Pairer(Identified, Linked, Routed, Supervises, Protocol):
    """What running a pairing takes: our identity (if any), the relay, the router and a
    supervisor for the pairing actor (``link`` runs the same exchange)."""


class Host(Pairer, Stored, SendsOps, MakesIdentity, MovesRelay, FollowsRosters, Protocol):
    """What ``room new`` and ``room join`` use: pairing, then a room of two and its relay."""


def make_offer(
    daemon: Pairer,
    keys: crypto.Keys,
    *,
    agent: bool,
    room: RoomGrant | None,
    label: str | None = None,
    bundle: bytes | None = None,
) -> Offer:
    """Our side of a pairing: who we are and, for the inviter, what we grant."""
    link = daemon.link_status()
    assert link is not None and link.relay_key is not None
    identity = daemon.identity
    return Offer(
        label=label or (identity.label if identity else "new machine"),
        machine=identity.machine if identity else socket.gethostname(),
        agent=agent,
        ed_pub=keys.ed_pub,
        x_pub=keys.x_pub,
        relay_url=link.url,
        relay_key=bytes.fromhex(link.relay_key),
        room=room,
        identity_bundle=bundle,
    )


async def run_pairing(
    daemon: Pairer,
    *,
    role: Role,
    slot: str,
    words: tuple[str, ...],
    offer: Offer,
    deadline: float,
    purpose: Purpose = Purpose.ROOM,
) -> Paired:
    """Run a pairing actor for ``slot`` to its outcome; raise its error if it failed."""
    send, receive = trio.open_memory_channel[PairingOutcome](1)
    actor = PairingActor(
        relay=await daemon.relay(),
        role=role,
        purpose=purpose,
        slot=slot,
        words=words,
        offer=offer,
        outcome=send,
        deadline=deadline,
    )
    name = PAIRINGS.instance(slot)
    # Pushes that beat the route to the router are held there until it appears.
    inbox = await daemon.supervisor.start_actor(name, actor, restart=Restart.TRANSIENT)
    await daemon.router.send(RoutePairing(slot, inbox))
    try:
        with trio.fail_after(max(0.0, deadline - trio.current_time()) + 30):
            outcome = await receive.receive()
    finally:
        await daemon.router.send(RoutePairing(slot, None))
        await daemon.supervisor.stop_actor(name)
    if not isinstance(outcome, Paired):
        raise outcome.error
    return outcome


def _adopt(
    conn: sqlite3.Connection,
    offer: Offer,
    grant: RoomGrant,
    *,
    state: str,
    me: crypto.Keys,
    my_label: str,
) -> Contact:
    """Record the peer, the room of two and its key, and both members; one transaction."""
    now = time.time()
    contact = upsert_contact(
        conn,
        Contact(
            fingerprint=crypto.fingerprint(offer.ed_pub),
            label=offer.label,
            machine=offer.machine,
            signing_key=offer.ed_pub,
            box_key=offer.x_pub,
            is_agent=offer.agent,
            added_at=now,
        ),
    )
    add_room(conn, Room(grant.room_id, contact.label, "direct", state, 0, now), grant.key)
    add_member(
        conn,
        RoomMember(grant.room_id, contact.fingerprint, contact.label, offer.ed_pub, offer.x_pub),
    )
    add_member(conn, RoomMember(grant.room_id, me.fingerprint, my_label, me.ed_pub, me.x_pub))
    return contact


async def _host_relay(daemon: Host, *, public: bool) -> tuple[str, int]:
    """Start a relay others can reach and move this identity onto it; (host, port) to invite.

    ``--host`` binds it to this machine's LAN address; ``--public`` keeps it on loopback and
    puts a Cloudflare quick tunnel in front of it (wss on port 443).
    """
    port = hosted_port()
    if public:
        require_cloudflared()
        start = functools.partial(ensure_relay_at, "127.0.0.1", port, behind_tunnel=True)
        await trio.to_thread.run_sync(start)
        await daemon.use_relay(f"ws://127.0.0.1:{port}")
        host, tunnel = await trio.to_thread.run_sync(open_tunnel, port)
        daemon.tunnels.append(tunnel)
        return host, 443
    address = await trio.to_thread.run_sync(lan_address)
    await trio.to_thread.run_sync(ensure_relay_at, address, port)
    await daemon.use_relay(f"ws://{address}:{port}")
    return address, port


def _local_only_note(daemon: Host, hosted: bool) -> str | None:
    """Say so when only this machine can join: the invite points at the local relay."""
    link = daemon.link_status()
    if hosted or link is None or not is_local_default(link.url):
        return None
    return (
        "This uses the local relay on this machine, so only this machine can join. "
        "Use --host to let someone on your network join."
    )


async def _create_room_of_two(
    relay: RelayClient, keys: crypto.Keys, room: str, their: Offer
) -> None:
    """Create the room on the relay and add the joiner (allowed: we just met in its slot).

    The room is adopted here before this, so a connection that drops under either request
    is asked again once the link is back, as the joiner's accept is: giving up would leave a
    room of two this side holds and the joiner never gets (sim seed 270). Before asking again
    we look whether the request took with its answer lost: the same create or add sent twice
    would be refused."""
    create, created = create_frame(keys, room)
    await _until_taken(relay, create, functools.partial(_taken, relay, room, None))
    add = add_after_create(keys, room, created, their.ed_pub, their.x_pub)
    joiner = crypto.fingerprint(their.ed_pub)
    await _until_taken(relay, add, functools.partial(_taken, relay, room, joiner))


async def _until_taken(
    relay: RelayClient, frame: w.Create | w.Add, taken: Callable[[], Awaitable[bool]]
) -> None:
    for pause in (*ACCEPT_PAUSES, None):
        try:
            await relay.request(frame, w.Ok)
            return
        except RelayUnreachable:
            if pause is None:
                raise
            sim_hooks.probe("pairing.create_retried")
            await trio.sleep(pause)
        try:
            if await taken():
                return
        except RelayUnreachable:
            continue  # still away: the next pause


async def _taken(relay: RelayClient, room: str, joiner: str | None) -> bool:
    """Whether the relay has us in ``room`` and, if ``joiner`` is named, lists them too."""
    if await relay_room_state(relay, room) != "joined":
        return False
    if joiner is None:
        return True
    roster = await relay.request(w.GetRoster(0, room), w.Roster)
    return any(m.fingerprint == joiner for m in roster.members)


async def room_new(
    daemon: Host, params: RoomNewParams
) -> AsyncGenerator[InviteLine | JoinedLine, None]:
    """Show an invite at once, then pair with whoever joins and make the room of two."""
    if params.public:
        require_cloudflared()  # before anything is created
    keys = await daemon.ensure_identity(params.label)
    hosted = params.host or params.public
    where = await _host_relay(daemon, public=params.public) if hosted else None
    relay = await daemon.relay()
    slot = await relay.request_paid(lambda work: w.SlotOpen(0, work), w.Slot)
    deadline = trio.current_time() + slot.expires_in
    invite = Invite.new(
        slot.slot,
        nacl.utils.random(4 * BYTES_PER_WORD),
        purpose=Purpose.ROOM,
        host=where[0] if where else None,
        port=where[1] if where else None,
    )
    grant = RoomGrant(room_id=nacl.utils.random(16).hex(), key=nacl.utils.random(32))
    offer = make_offer(daemon, keys, agent=params.agent, room=grant)
    yield InviteLine(invite.format(), int(slot.expires_in), _local_only_note(daemon, hosted))
    paired = await run_pairing(
        daemon, role=Role.INVITER, slot=slot.slot, words=invite.words, offer=offer,
        deadline=deadline,
    )
    label = daemon.require_identity().label
    contact = await daemon.store.write(
        lambda c: _adopt(c, paired.offer, grant, state="joined", me=keys, my_label=label)
    )
    await _create_room_of_two(relay, keys, grant.room_id, paired.offer)
    await daemon.room_inbox(grant.room_id)
    yield JoinedLine(contact.label, grant.room_id, contact.fingerprint, keys.fingerprint)


def _granted_room(their: Offer, ours: Offer) -> RoomGrant:
    """The room the inviter's offer grants, once its relay key matches the one we saw."""
    if their.relay_key != ours.relay_key:
        raise RelayKeyMismatch(
            "The inviter's relay key differs from the one this relay showed us: someone may "
            "be in the middle. Nothing was adopted."
        )
    if their.room is None:
        raise RemoteProtocolError("The inviter's offer carries no room.")
    return their.room


async def _wait_for_invitation(daemon: Host, room: str) -> None:
    """Wait (a bounded while) for the relay's invitation; the accept says if it never came."""
    send, receive = trio.open_memory_channel[None](1)
    await daemon.router.send(WatchInvitation(room, send))
    with trio.move_on_after(INVITATION_WAIT):
        await receive.receive()


async def _accept_room_of_two(daemon: Host, relay: RelayClient, room: str, fp: str) -> None:
    """Accept the inviter's room. On a relay of several nodes the accept can reach a node that
    has not yet taken in the inviter's add (the stream reaches the nodes a moment apart, later
    under load), so a refusal for want of an invitation is asked again after short pauses
    before it is the answer; an accept that already took (its answer lost) counts as done. A
    connection that drops under the accept is asked again the same way, once the link is back:
    the room is adopted by then, and giving up would leave it half made (the inviter holds a
    room of two this side never accepted; sim seed 189)."""
    for pause in (*ACCEPT_PAUSES, None):
        try:
            await request_change(daemon, room, "accept", fp, with_statement(w.Accept(0, room)),
                                 fetch_first=True, relay=relay)
            return
        except RelayUnreachable:
            if pause is None:
                raise
            sim_hooks.probe("pairing.accept_retried")
            await trio.sleep(pause)
        except NotInvited:
            if await relay_says_joined(relay, room):
                return
            if pause is None:
                raise NotInvited(
                    "You paired with the inviter, but their relay never recorded your "
                    "invitation to the room; ask them to run `crosstalk room new` again."
                ) from None
            await trio.sleep(pause)


async def room_join(daemon: Host, params: RoomJoinParams) -> JoinedLine:
    """Pair with the inviter by the code's words, then accept the room of two."""
    invite = Invite.parse(params.code, purpose=Purpose.ROOM)
    keys = await daemon.ensure_identity(params.label)
    if invite.host is not None and invite.port is not None:
        scheme = "wss" if invite.port == 443 else "ws"
        await daemon.use_relay(f"{scheme}://{invite.host}:{invite.port}")
    relay = await daemon.relay()
    await relay.request(w.ListRooms(0), w.RoomList)  # waits until the link is ready
    offer = make_offer(daemon, keys, agent=params.agent, room=None)
    paired = await run_pairing(
        daemon, role=Role.JOINER, slot=invite.slot, words=invite.words, offer=offer,
        deadline=trio.current_time() + 15 * 60,
    )
    grant = _granted_room(paired.offer, offer)
    label = daemon.require_identity().label
    contact = await daemon.store.write(
        lambda c: _adopt(c, paired.offer, grant, state="invited", me=keys, my_label=label)
    )
    await _wait_for_invitation(daemon, grant.room_id)
    await _accept_room_of_two(daemon, relay, grant.room_id, keys.fingerprint)
    await daemon.store.write(lambda c: set_room_state(c, grant.room_id, "joined"))
    await daemon.room_inbox(grant.room_id)
    return JoinedLine(contact.label, grant.room_id, contact.fingerprint, keys.fingerprint)


def plug(daemon: Host) -> Plugs:
    """The ``room_new`` and ``room_join`` ops."""
    return Plugs(ops=(
        stream_op(ROOM_NEW, functools.partial(room_new, daemon)),
        op(ROOM_JOIN, functools.partial(room_join, daemon)),
    ))
