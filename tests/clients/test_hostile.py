"""Hostile frames: each gets an error response or a clean close, and the broker keeps serving other
connections. No panic on anything a client sends."""

import socket
import struct

import pytest

from clients import expected, kp_consume, kp_produce
from conftest import messages


def connect(broker):
    sock = socket.create_connection((broker.host, broker.port), timeout=10)
    return sock


def header(api_key, version, correlation_id=7, client_id=b"hostile"):
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def frame(body):
    return struct.pack(">i", len(body)) + body


def read_response(sock):
    """Returns the response body, or None if the broker closed the connection."""
    prefix = b""
    while len(prefix) < 4:
        chunk = sock.recv(4 - len(prefix))
        if not chunk:
            return None
        prefix += chunk
    (size,) = struct.unpack(">i", prefix)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def closed_or_answered(sock):
    """The answer, or None if the broker closed the connection. Neither within the socket's
    timeout is a hang, and fails the test."""
    try:
        return read_response(sock)
    except ConnectionResetError:
        return None
    except socket.timeout:
        raise AssertionError("the broker neither answered nor closed the connection") from None


HOSTILE = {
    "huge_size_prefix": struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 16,
    "negative_size_prefix": struct.pack(">i", -5),
    "metadata_huge_topic_count": frame(header(3, 1) + b"\x7f\xff\xff\xff"),
    "produce_huge_topic_count": frame(header(0, 3) + b"\xff\xff" + struct.pack(">hi", 1, 1000)
                                      + b"\x7f\xff\xff\xff"),
    "fetch_truncated_body": frame(header(1, 4) + b"\xff\xff\xff\xff\x00\x00"),
    "unknown_api_key": frame(header(9999, 0)),
    "garbage_after_valid_header": frame(header(18, 0) + b"\xde\xad\xbe\xef" * 8),
    "truncated_header": frame(b"\x00\x03\x00"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_frame_gets_an_error_or_a_close_and_others_keep_working(broker, name):
    msgs = messages(20, prefix=name)
    kp_produce(broker.bootstrap, "steady", msgs)
    with connect(broker) as sock:
        sock.sendall(HOSTILE[name])
        answer = closed_or_answered(sock)
        if answer is not None:
            (correlation_id,) = struct.unpack(">i", answer[:4])
            assert correlation_id == 7
    assert broker.alive()
    assert kp_consume(broker.bootstrap, "steady", 20) == expected(msgs)


def test_unsupported_api_versions_request_gets_a_v0_answer_with_the_version_list(broker):
    with connect(broker) as sock:
        sock.sendall(frame(header(18, 99)))
        answer = read_response(sock)
    (correlation_id, error_code, count) = struct.unpack(">ihi", answer[:10])
    assert correlation_id == 7
    assert error_code == 35
    assert count > 5


def test_client_disconnecting_mid_response_does_not_hurt_the_broker(broker):
    msgs = messages(2000, prefix="bulk", value_bytes=1000)
    kp_produce(broker.bootstrap, "bulk", msgs)
    fetch_v1 = (header(1, 1) + struct.pack(">iii", -1, 100, 1) + struct.pack(">i", 1)
                + struct.pack(">h", 4) + b"bulk" + struct.pack(">i", 1)
                + struct.pack(">iqi", 0, 0, 50_000_000))
    for _ in range(5):
        with connect(broker) as sock:
            sock.sendall(frame(fetch_v1))
            sock.recv(1000)
    assert broker.alive()
    assert kp_consume(broker.bootstrap, "bulk", 2000, api_version=(0, 9)) == expected(msgs)
