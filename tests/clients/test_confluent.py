"""confluent-kafka (librdkafka 2.16) against Skiff: modern produce/consume with every codec, zstd
batches that modern consumers read while legacy ones get a clear error, and list_topics() of every
topic (issue 14 item 1: its second, pipelined Metadata v12 has 3 bytes after the schema)."""

import pytest

from clients import ck_consume, ck_produce, expected, kp_consume
from conftest import messages


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips(broker, codec):
    topic = f"ck-{codec}"
    msgs = messages(400, prefix=codec, value_bytes=250)
    ck_produce(broker.bootstrap, topic, msgs, **{"compression.codec": codec})
    seen, errors = ck_consume(broker.bootstrap, topic, 400)
    assert not errors
    assert seen == expected(msgs)


def test_zstd_is_a_clear_error_for_legacy_consumers(broker):
    from kafka.errors import UnsupportedCompressionTypeError

    msgs = messages(50, prefix="zstd")
    ck_produce(broker.bootstrap, "ck-zstd-legacy", msgs, **{"compression.codec": "zstd"})
    with pytest.raises(UnsupportedCompressionTypeError):
        kp_consume(broker.bootstrap, "ck-zstd-legacy", 50, api_version=(0, 10, 1))
    seen, errors = ck_consume(broker.bootstrap, "ck-zstd-legacy", 50)
    assert not errors and seen == expected(msgs)


def test_list_topics_of_every_topic(broker):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    ck_produce(broker.bootstrap, "ck-listed", messages(3, prefix="listed"))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert "ck-listed" in admin.list_topics(timeout=10).topics
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    assert "ck-listed" in producer.list_topics(timeout=10).topics
    producer.flush(10)
