"""The relay serves wss:// with --tls-cert/--tls-key."""

from __future__ import annotations

import datetime
import ipaddress
import signal
import ssl
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from trio_websocket import wrap_client_stream

from crosstalk.wire import relay as w
from tests.relay.client import Identity, handshake
from tests.relay.process import RelayProcess

pytestmark = pytest.mark.e2e


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(
            "127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_relay_serves_wss_with_a_certificate(tmp_path: Path) -> None:
    """The listening line says wss://, and an authenticated handshake works over TLS."""
    cert, key = _self_signed(tmp_path)
    relay = RelayProcess(tmp_path / "data", tmp_path / "relay.stderr",
                         "--tls-cert", str(cert), "--tls-key", str(key))
    relay.start()
    try:
        context = ssl.create_default_context(cafile=str(cert))
        with trio.fail_after(20):
            stream = await trio.open_ssl_over_tcp_stream("127.0.0.1", relay.port,
                                                         ssl_context=context)
            try:
                async with trio.open_nursery() as nursery:
                    ws = await wrap_client_stream(nursery, stream, "127.0.0.1", "/ws")
                    client = await handshake(ws, Identity(), "tls")
                    assert isinstance(await client.ok(w.ListRooms(client.next_req())), w.RoomList)
                    await ws.aclose()
            finally:
                await stream.aclose()
    finally:
        relay.kill(signal.SIGTERM)
    assert relay.url == f"wss://127.0.0.1:{relay.port}"
