"""Cross-client scenarios: a message larger than the consumer's partition limit, a broker restart
between produce and consume, a legacy consumer next to a modern one on one partition."""

import pytest

from clients import ck_consume, expected, kcat_consume, kp_consume, kp_produce, node
from conftest import messages


@pytest.mark.parametrize("api_version", [None, (0, 10, 1), (0, 9)], ids=["modern", "0.10.1", "0.9"])
def test_message_larger_than_the_partition_limit_still_arrives(broker, api_version):
    small = messages(3, prefix="small")
    big = messages(1, prefix="big", value_bytes=200_000)
    kp_produce(broker.bootstrap, "big", small[:1] + big + small[1:])
    seen = kp_consume(broker.bootstrap, "big", 4, api_version=api_version,
                      max_partition_fetch_bytes=4096)
    assert seen == expected(small[:1] + big + small[1:])


def test_restart_between_produce_and_consume(broker):
    msgs = messages(1000, prefix="restart")
    kp_produce(broker.bootstrap, "restart", msgs[:500])
    broker.restart()
    kp_produce(broker.bootstrap, "restart", msgs[500:])
    broker.restart()
    assert kp_consume(broker.bootstrap, "restart", 1000, api_version=(0, 9)) == expected(msgs)
    seen, errors = ck_consume(broker.bootstrap, "restart", 1000)
    assert not errors and seen == expected(msgs)


def test_legacy_next_to_modern_on_one_partition(broker):
    msgs = messages(400, prefix="mixed")
    kp_produce(broker.bootstrap, "mixed", msgs[:200], compression="gzip")
    kp_produce(broker.bootstrap, "mixed", msgs[200:], api_version=(0, 9))
    want = expected(msgs)
    assert kp_consume(broker.bootstrap, "mixed", 400, api_version=(0, 10, 1)) == want
    assert kp_consume(broker.bootstrap, "mixed", 400) == want
    legacy, _ = kcat_consume(broker.bootstrap, "mixed", 400, legacy=True)
    assert legacy == want
    answer = node("consume", bootstrap=broker.bootstrap, topic="mixed", count=400)
    assert answer["messages"] == [[o, k.decode(), v.decode()] for o, k, v in want]
