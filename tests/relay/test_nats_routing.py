"""The leader's table of other nodes' connections and the inter-node messages (no I/O)."""

from __future__ import annotations

import json

from crosstalk.wire import relay as w
from relay.effects import Close, Effect, Send
from relay.routing import (
    REMOTE_BASE,
    Event,
    Routes,
    event_body,
    parse_delivery,
    parse_event,
)
from relay.storage import RoomPut


def test_remote_connections_get_cluster_ids_that_map_back() -> None:
    """Ids start above every local id, are distinct per (node, conn) and are released on close."""
    routes = Routes()
    a, b = routes.open("n1", 1), routes.open("n2", 1)
    assert REMOTE_BASE < a < b
    assert (routes.find("n1", 1), routes.find("n2", 1), routes.find("n1", 2)) == (a, b, None)
    assert routes.close("n1", 1) == a
    assert (routes.close("n1", 1), routes.find("n1", 1), len(routes)) == (None, None, 1)


def test_split_keeps_local_effects_in_order_and_groups_the_rest_per_node() -> None:
    """Local sends and writes stay, in order; other nodes get encoded frames, and None to close."""
    routes = Routes()
    far, other = routes.open("n2", 7), routes.open("n3", 9)
    frame = w.Presence("aaaa-aaaa-aaaa-aaaa", True)
    batch: list[Effect] = [
        Send(1, frame), RoomPut("r"), Send(far, frame), Close(other, "bye"), Send(2, frame)
    ]
    local, per_node = routes.split(batch)
    assert local == [Send(1, frame), RoomPut("r"), Send(2, frame)]
    assert per_node == {"n2": [[7, w.encode_frame(frame)]], "n3": [[9, None]]}


def test_a_silent_node_is_forgotten_with_its_connections() -> None:
    """Only the node not heard from within the timeout is dropped, with all its ids."""
    routes = Routes()
    x1, x2, y = routes.open("x", 1), routes.open("x", 2), routes.open("y", 1)
    routes.heard("x", 10.0)
    routes.heard("y", 14.0)
    assert routes.silent(now=16.0, timeout=5.0) == {"x": [x1, x2]}
    assert (routes.find("x", 1), routes.find("y", 1)) == (None, y)
    assert routes.silent(now=16.0, timeout=5.0) == {}


def test_forget_all_names_every_connection_and_empties_the_table() -> None:
    """After a NATS reconnect the leader closes every remote connection it knew."""
    routes = Routes()
    g = routes.open("n2", 3)
    assert routes.forget_all() == {"n2": [(g, 3)]}
    assert (len(routes), routes.find("n2", 3)) == (0, None)


def test_events_round_trip_through_their_json_form() -> None:
    """Opened, text frame, binary frame and closed events parse back to what was sent."""
    cases = [
        (event_body("o", 4, source="10.0.0.9"), Event(5, "n2", "o", 4, "10.0.0.9", "")),
        (event_body("f", 4, data='{"t":"ack"}'), Event(5, "n2", "f", 4, "", '{"t":"ack"}')),
        (event_body("f", 4, data=b"\x00\xff"), Event(5, "n2", "f", 4, "", b"\x00\xff")),
        (event_body("x", 4), Event(5, "n2", "x", 4, "", "")),
    ]
    for body, expected in cases:
        raw = json.dumps({**body, "e": 5, "n": "n2"}).encode()
        assert parse_event(raw) == expected


def test_malformed_inter_node_messages_are_dropped_not_raised() -> None:
    """Garbage, unknown kinds, missing fields and bad base64 all parse to None."""
    for raw in [b"not json", b"[]", b'{"k":"z","n":"a","e":1}', b'{"k":"o","e":1}',
                b'{"k":"f","n":"a","e":1,"c":1,"b":"***"}', b'{"k":"o","n":"a","e":"1"}']:
        assert parse_event(raw) is None
    for raw in [b"{}", b'{"e":1,"i":[[1,2]]}', b'{"e":1,"i":[1]}', b'{"e":"1","i":[]}']:
        assert parse_delivery(raw) is None
    assert parse_delivery(b'{"e":3,"i":[[1,"x"],[2,null]]}') == (3, [(1, "x"), (2, None)])
