"""kafka-python 3.0.12 against Skiff: modern, and legacy with api_version (0, 10, 1) (Fetch v3, magic 1)
and (0, 9) (Fetch v1, magic 0) forced on the client."""

import pytest

from clients import expected, kp_consume, kp_produce
from conftest import messages

API_VERSIONS = [None, (0, 10, 1), (0, 9)]


@pytest.mark.parametrize("api_version", API_VERSIONS, ids=["modern", "0.10.1", "0.9"])
def test_produce_and_consume_in_order(broker, api_version):
    topic = f"kp-{'modern' if api_version is None else '-'.join(map(str, api_version))}"
    msgs = messages(300, prefix=topic)
    offsets = kp_produce(broker.bootstrap, topic, msgs, api_version=api_version)
    assert offsets == list(range(300))
    assert kp_consume(broker.bootstrap, topic, 300, api_version=api_version) == expected(msgs)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)], ids=["0.10.1", "0.9"])
def test_modern_compressed_batches_read_by_legacy_consumers(broker, codec, api_version):
    topic = f"kp-{codec}"
    msgs = messages(500, prefix=codec, value_bytes=300)
    kp_produce(broker.bootstrap, topic, msgs, compression=codec)
    seen = kp_consume(broker.bootstrap, topic, 500, api_version=api_version)
    assert seen == expected(msgs)


def test_fetch_offset_inside_a_batch(broker):
    msgs = messages(100, prefix="mid")
    kp_produce(broker.bootstrap, "kp-mid", msgs)
    for api_version in API_VERSIONS:
        seen = kp_consume(broker.bootstrap, "kp-mid", 63, api_version=api_version, offset=37)
        assert seen == expected(msgs)[37:], api_version
