"""The Prometheus endpoint (`skiff.metrics.listener`): a scrape after a legacy fetch shows the
down-conversion figures moved, per-API request counts, bytes and connections."""

import re
import socket
import struct
import time

from clients import expected, kp_consume, kp_produce
from conftest import messages

METRICS_LINE = re.compile(r"skiff metrics on (\S+):(\d+)")


def scrape(broker, path="/metrics"):
    for line in broker.log_lines:
        match = METRICS_LINE.search(line)
        if match:
            address = (match.group(1), int(match.group(2)))
            break
    else:
        raise AssertionError("the broker did not print its metrics address")
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: skiff\r\n\r\n".encode())
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return head.decode(), body.decode()


def value(body, name):
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} missing from the scrape")


def test_scrape_after_a_legacy_fetch_shows_conversions(broker_factory):
    broker = broker_factory("skiff.metrics.listener=127.0.0.1:0")
    head, before = scrape(broker)
    assert head.startswith("HTTP/1.1 200")
    assert value(before, "skiff_down_conversions_total") == 0

    msgs = messages(200, prefix="metrics")
    kp_produce(broker.bootstrap, "metrics", msgs)
    assert kp_consume(broker.bootstrap, "metrics", 200, api_version=(0, 10, 1)) == expected(msgs)

    _, after = scrape(broker)
    assert value(after, "skiff_down_conversions_total") >= 1
    assert value(after, "skiff_down_converted_records_total") >= 200
    assert value(after, 'skiff_down_converted_records_by_topic_total{topic="metrics"}') >= 200
    assert value(after, "skiff_down_conversion_temporary_bytes_total") > 0
    assert value(after, "skiff_down_conversion_time_us_count") >= 1
    assert value(after, "skiff_converted_bytes_in_flight_peak") > 0
    assert value(after, "skiff_request_bytes_total") > 0
    assert re.search(r'skiff_request_latency_ms_count\{api="Fetch"\} [1-9]', after), after
    assert re.search(r'skiff_request_latency_ms_count\{api="Produce"\} [1-9]', after)


def api_versions_connection(broker):
    """A Kafka connection the broker has surely accepted: its ApiVersions v0 was answered."""
    sock = socket.create_connection((broker.host, broker.port), timeout=10)
    client_id = b"metrics"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    sock.sendall(struct.pack(">i", len(body)) + body)
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    assert len(sock.recv(size, socket.MSG_WAITALL)) == size
    return sock


def test_the_connection_gauge_follows_connections(broker_factory):
    broker = broker_factory("skiff.metrics.listener=127.0.0.1:0")
    baseline = value(scrape(broker)[1], "skiff_connections")
    held = [api_versions_connection(broker) for _ in range(3)]
    assert value(scrape(broker)[1], "skiff_connections") == baseline + 3
    for sock in held:
        sock.close()
    deadline = time.monotonic() + 10
    while value(scrape(broker)[1], "skiff_connections") != baseline:
        assert time.monotonic() < deadline, "closed connections are still counted"
        time.sleep(0.05)


def test_unknown_paths_and_methods_are_refused(broker_factory):
    broker = broker_factory("skiff.metrics.listener=127.0.0.1:0")
    assert scrape(broker, "/nothing")[0].startswith("HTTP/1.1 404")
