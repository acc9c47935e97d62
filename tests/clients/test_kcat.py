"""kcat (Debian's, librdkafka 2.0.2) against Skiff, modern and legacy
(`api.version.request=false`, `broker.version.fallback=0.9.0`: Metadata v0, Produce v1, Fetch v1)."""

import pytest

from clients import expected, kcat_consume, kcat_produce
from conftest import messages


@pytest.mark.parametrize("legacy", [False, True], ids=["modern", "legacy"])
def test_produce_and_consume(broker, legacy):
    topic = "kcat-legacy" if legacy else "kcat-modern"
    msgs = messages(200, prefix=topic)
    kcat_produce(broker.bootstrap, topic, msgs, legacy=legacy)
    seen, stderr = kcat_consume(broker.bootstrap, topic, 200, legacy=legacy)
    assert seen == expected(msgs), stderr


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_legacy_produce_compressed_and_consume_both_ways(broker, codec):
    topic = f"kcat-{codec}"
    msgs = messages(300, prefix=codec, value_bytes=200)
    kcat_produce(broker.bootstrap, topic, msgs, legacy=True, codec=codec)
    for legacy in (True, False):
        seen, stderr = kcat_consume(broker.bootstrap, topic, 300, legacy=legacy)
        assert seen == expected(msgs), stderr


def test_legacy_and_modern_consumers_on_one_partition(broker):
    msgs = messages(150, prefix="shared")
    kcat_produce(broker.bootstrap, "kcat-shared", msgs)
    legacy, _ = kcat_consume(broker.bootstrap, "kcat-shared", 150, legacy=True)
    modern, _ = kcat_consume(broker.bootstrap, "kcat-shared", 150, legacy=False)
    assert legacy == modern == expected(msgs)
