"""kafka-node 5.0.0, a strict legacy client (Produce v2 with magic 1; its plain Consumer always
fetches with Fetch v0 and refuses magic 2), against Skiff."""

import pytest

from clients import expected, kp_produce, node
from conftest import messages

CODEC_ATTRIBUTES = {"none": 0, "gzip": 1, "snappy": 2}


def as_text(msgs):
    return [[key.decode(), value.decode()] for key, value in msgs]


@pytest.mark.parametrize("codec", list(CODEC_ATTRIBUTES))
def test_produce_and_consume(broker, codec):
    topic = f"node-{codec}"
    msgs = messages(120, prefix=topic)
    node("produce", bootstrap=broker.bootstrap, topic=topic, messages=as_text(msgs),
         attributes=CODEC_ATTRIBUTES[codec])
    answer = node("consume", bootstrap=broker.bootstrap, topic=topic, count=120)
    assert answer["messages"] == [[o, k.decode(), v.decode()] for o, k, v in expected(msgs)]


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_reads_compressed_v2_batches_from_a_modern_producer(broker, codec):
    topic = f"node-modern-{codec}"
    msgs = messages(200, prefix=topic)
    kp_produce(broker.bootstrap, topic, msgs, compression=codec)
    answer = node("consume", bootstrap=broker.bootstrap, topic=topic, count=200)
    assert answer["messages"] == [[o, k.decode(), v.decode()] for o, k, v in expected(msgs)]
