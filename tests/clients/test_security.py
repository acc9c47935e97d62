"""Real clients over Skiff's SSL, SASL_PLAINTEXT and SASL_SSL listeners: kafka-python, confluent-kafka
and kcat with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; legacy clients (kafka-python 0.10.1 and
kafka-node) with SASL/PLAIN through SaslHandshake v0 and bare tokens; wrong passwords refused while
others keep working; ACLs (topic, group and cluster errors, Metadata hiding, a consumer group's
broker-side pattern resolved to the describable topics only, super users, a reload without
restart). The certificate is made by the test (openssl), never committed."""

import logging
import pathlib
import subprocess
import threading
import time

import pytest

from clients import (ck_consume, ck_produce, expected, kcat_consume, kcat_produce, kp_consume,
                     kp_produce, node)
from conftest import BROKER_BIN, messages

USERS = {"alice": "alice-secret", "bob": "bob-secret", "legacy": "legacy-secret",
         "mallory": "mallory-secret", "root": "root-secret"}
# The broker's group.consumer.heartbeat.interval.ms in these tests (the ACL test sets it).
CONSUMER_HEARTBEAT_S = 1
ALL_LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (keystore = certificate + key) and a credentials
    file written by `skiff sasl-credential`."""
    folder = tmp_path_factory.mktemp("security")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    keystore = folder / "keystore.pem"
    keystore.write_bytes(cert.read_bytes() + key.read_bytes())
    users = folder / "users.txt"
    lines = []
    for user, password in USERS.items():
        result = subprocess.run([BROKER_BIN, "sasl-credential", user], input=password + "\n",
                                check=True, capture_output=True, text=True, timeout=30)
        lines.append(result.stdout)
    users.write_text("".join(lines))
    assert "alice-secret" not in users.read_text(), "the credentials file must not hold passwords"
    return {"cert": str(cert), "keystore": str(keystore), "users": str(users), "folder": folder}


@pytest.fixture
def secure_broker(broker_factory, material):
    def make(*settings):
        return broker_factory(
            f"listeners={ALL_LISTENERS}",
            f"ssl.keystore.location={material['keystore']}",
            f"skiff.sasl.credentials.file={material['users']}",
            *settings,
        )
    return make


def kp_security(protocol, material, mechanism=None, user="alice", password=None):
    """kafka-python settings for a listener."""
    settings = {"security_protocol": protocol}
    if "SSL" in protocol:
        settings["ssl_cafile"] = material["cert"]
    if "SASL" in protocol:
        settings.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                        sasl_plain_password=password or USERS[user])
    return settings


def ck_security(protocol, material, mechanism=None, user="alice", password=None):
    """librdkafka settings (confluent-kafka and kcat) for a listener."""
    settings = {"security.protocol": protocol}
    if "SSL" in protocol:
        settings["ssl.ca.location"] = material["cert"]
    if "SASL" in protocol:
        settings.update({"sasl.mechanisms": mechanism, "sasl.username": user,
                         "sasl.password": password or USERS[user]})
    return settings


def kcat_args(settings):
    args = []
    for key, value in settings.items():
        args += ["-X", f"{key}={value}"]
    return args


CASES = [
    ("SSL", None),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


@pytest.mark.parametrize("protocol,mechanism", CASES)
def test_every_client_over_every_secure_listener(secure_broker, material, protocol, mechanism):
    broker = secure_broker()
    address = broker.listeners[protocol]
    topic = f"sec-{protocol}-{mechanism}".lower().replace("_", "-")
    confluent = ck_security(protocol, material, mechanism, user="alice")
    python = kp_security(protocol, material, mechanism, user="bob")
    kcat = kcat_args(ck_security(protocol, material, mechanism, user="bob"))

    first = messages(60, prefix=f"{topic}-ck")
    ck_produce(address, topic, first, **confluent)
    second = messages(60, prefix=f"{topic}-kp")
    kp_produce(address, topic, second, **python)
    third = messages(60, prefix=f"{topic}-kcat")
    kcat_produce(address, topic, third, extra=kcat)
    everything = first + second + third

    seen, errors = ck_consume(address, topic, len(everything), **confluent)
    assert not errors
    assert seen == expected(everything)
    assert kp_consume(address, topic, len(everything), **python) == expected(everything)
    seen, _ = kcat_consume(address, topic, len(everything), extra=kcat)
    assert seen == expected(everything)
    # Legacy fetches (kcat as a 0.9-era client: Fetch v0, down-converted) through the same
    # listener; over TLS the converted chunks are encrypted in user space.
    if mechanism in (None, "PLAIN"):
        legacy = kcat_args(ck_security(protocol, material, mechanism, user="bob"))
        legacy += ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.10.0"]
        seen, _ = kcat_consume(address, topic, len(everything), extra=legacy)
        assert seen == expected(everything)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_legacy_kafka_python_uses_handshake_v0_and_bare_plain_tokens(secure_broker, material,
                                                                      protocol):
    broker = secure_broker()
    address = broker.listeners[protocol]
    topic = f"legacy-sasl-{protocol}".lower().replace("_", "-")
    settings = kp_security(protocol, material, "PLAIN", user="legacy")
    msgs = messages(80, prefix=topic)
    kp_produce(address, topic, msgs, api_version=(0, 10, 1), **settings)
    seen = kp_consume(address, topic, len(msgs), api_version=(0, 10, 1), **settings)
    assert seen == expected(msgs)


def test_kafka_node_over_sasl_plain_with_bare_tokens(secure_broker, material):
    # Capped at 0.10.2 so kafka-node sees SaslHandshake v0 only and sends a bare PLAIN token.
    broker = secure_broker("skiff.advertised.kafka.version=0.10.2")
    address = broker.listeners["SASL_PLAINTEXT"]
    topic = "node-sasl"
    msgs = messages(50, prefix=topic)
    sasl = {"mechanism": "plain", "username": "legacy", "password": USERS["legacy"]}
    text = [[key.decode(), value.decode()] for key, value in msgs]
    node("produce", bootstrap=address, topic=topic, messages=text, sasl=sasl)
    answer = node("consume", bootstrap=address, topic=topic, count=len(msgs), sasl=sasl)
    assert answer["messages"] == [[o, k.decode(), v.decode()] for o, k, v in expected(msgs)]


def test_wrong_passwords_are_refused_while_others_keep_working(secure_broker, material, caplog):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaConsumer

    caplog.set_level(logging.WARNING, logger="kafka")
    broker = secure_broker()
    topic = "sec-refusals"
    msgs = messages(30, prefix=topic)
    for round_index, protocol in enumerate(("SASL_PLAINTEXT", "SASL_SSL")):
        address = broker.listeners[protocol]
        good = ck_security(protocol, material, "SCRAM-SHA-256", user="alice")
        ck_produce(address, topic, msgs, **good)

        # confluent-kafka: the error callback reports an authentication failure.
        errors = []
        bad = ck_security(protocol, material, "SCRAM-SHA-256", user="alice", password="wrong")
        producer = Producer({"bootstrap.servers": address, "error_cb": errors.append, **bad})
        producer.produce(topic, value=b"must not arrive")
        producer.flush(5)
        assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors

        # kcat with an unknown user: non-zero exit and the broker's message.
        unknown = kcat_args(ck_security(protocol, material, "PLAIN", user="mallory",
                                        password="alice-secret"))
        result = subprocess.run(["kcat", "-b", address, "-L", "-m", "5", *unknown],
                                capture_output=True, timeout=60)
        assert result.returncode != 0
        assert b"Authentication failed" in result.stderr, result.stderr

        # kafka-python with a wrong password: every connection is refused with error 58 (it keeps
        # retrying, and `topics()` has no timeout, so it runs in a thread and the log is checked).
        caplog.clear()
        consumer = KafkaConsumer(
            bootstrap_servers=address, api_version=(2, 0), request_timeout_ms=5000,
            **kp_security(protocol, material, "PLAIN", user="bob", password="wrong"))
        threading.Thread(target=consumer.topics, daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "SaslAuthenticationFailedError" not in caplog.text:
            time.sleep(0.1)
        consumer.close()
        assert "SaslAuthenticationFailedError" in caplog.text, caplog.text

        # The good client still reads everything, and nothing from the refused ones arrived.
        seen, errors = ck_consume(address, topic, len(msgs) * (round_index + 1), **good)
        assert not errors
        assert seen == expected(msgs * (round_index + 1))
    # Nothing from the refused clients arrived: the log ends after the good producers' messages.
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.listeners["SSL"], "group.id": "unused",
                         **ck_security("SSL", material)})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    assert (low, high) == (0, 2 * len(msgs))


ACLS = """
# alice runs the show; bob may only read the shared- topics in bob- groups; mallory has no ACL.
allow User:alice all topic:*
allow User:alice all group:*
allow User:bob read topic:prefixed:shared-
allow User:bob read group:prefixed:bob-
deny User:bob read topic:shared-secret
"""


def test_acls_refuse_with_kafkas_errors_hide_topics_and_reload(secure_broker, material):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaConsumer

    acl_file = material["folder"] / "acls.txt"
    acl_file.write_text(ACLS)
    broker = secure_broker(f"skiff.acl.file={acl_file}", "skiff.acl.reload.interval.ms=200",
                           "super.users=User:root", "group.consumer.min.heartbeat.interval.ms=1000",
                           f"group.consumer.heartbeat.interval.ms={CONSUMER_HEARTBEAT_S * 1000}")
    address = broker.listeners["SASL_PLAINTEXT"]

    def conf(user):
        return ck_security("SASL_PLAINTEXT", material, "SCRAM-SHA-512", user=user)

    for topic in ("shared-data", "shared-secret", "private-data"):
        ck_produce(address, topic, messages(20, prefix=topic), **conf("alice"))

    # bob reads what his ACLs allow, in an allowed group, and nothing else.
    seen, errors = ck_consume(address, "shared-data", 20, **conf("bob"), **{"group.id": "bob-1"})
    assert not errors and len(seen) == 20
    # shared-secret: bob may describe it (read on shared-* implies describe) but a deny on read
    # wins, so the fetch is refused.
    seen, errors = ck_consume(address, "shared-secret", 20, **conf("bob"), **{"group.id": "bob-1"})
    assert not seen
    assert {error.code() for error in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}, errors
    # private-data: no ACL at all, so even its metadata is refused (kcat prints the error).
    result = subprocess.run(
        ["kcat", "-b", address, "-C", "-t", "private-data", "-o", "beginning", "-e",
         *kcat_args(conf("bob"))], capture_output=True, timeout=60)
    assert result.stdout == b""
    assert b"Topic authorization failed" in result.stderr, result.stderr

    # bob may not write, not even to a topic he reads.
    failures = []
    producer = Producer({"bootstrap.servers": address, **conf("bob")})
    producer.produce("shared-data", value=b"from bob",
                     on_delivery=lambda error, _message: failures.append(error))
    producer.flush(20)
    assert [error.code() for error in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # A group bob has no ACL for: committing there is GROUP_AUTHORIZATION_FAILED (kafka-python
    # raises it from the coordinator lookup; librdkafka would only keep waiting for a coordinator).
    from kafka import TopicPartition as KpPartition
    from kafka.errors import GroupAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata
    consumer = KafkaConsumer(bootstrap_servers=address, group_id="other-group",
                             enable_auto_commit=False, api_version=(2, 0),
                             **kp_security("SASL_PLAINTEXT", material, "PLAIN", user="bob"))
    partition = KpPartition("shared-data", 0)
    consumer.assign([partition])
    with pytest.raises(GroupAuthorizationFailedError):
        consumer.commit({partition: OffsetAndMetadata(5, None, -1)})
    consumer.close()

    # Metadata hides what a principal may not describe.
    def visible_topics(user):
        consumer = KafkaConsumer(bootstrap_servers=address, api_version=(2, 0),
                                 **kp_security("SASL_PLAINTEXT", material, "PLAIN", user=user))
        try:
            return consumer.topics()
        finally:
            consumer.close()

    assert {"shared-data", "shared-secret", "private-data"} <= visible_topics("alice")
    # A deny on read does not deny describe: bob still sees shared-secret, as in Kafka.
    assert visible_topics("bob") == {"shared-data", "shared-secret"}
    assert visible_topics("mallory") == set()
    assert {"shared-data", "shared-secret", "private-data"} <= visible_topics("root")

    # A consumer group (KIP-848) member's broker-side pattern resolves only to topics it may
    # describe: bob's pattern matches private-data too, which he may not see (Kafka 4.1.1 filters
    # the resolution by the refreshing member's ACLs).
    assert pattern_assignment(address, "^.*-data$", "bob-848", conf("bob")) == {"shared-data"}
    assert pattern_assignment(address, "^.*-data$", "alice-848", conf("alice")) == {
        "shared-data", "private-data"}

    # A reload without restart: mallory gets read on private-data.
    acl_file.write_text(ACLS + "allow User:mallory read topic:private-data\n"
                        "allow User:mallory read group:mallory\n")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        seen, errors = ck_consume(address, "private-data", 20, **conf("mallory"),
                                  **{"group.id": "mallory"})
        if len(seen) == 20:
            break
        time.sleep(0.5)
    assert len(seen) == 20, errors
    # Meanwhile the others were never interrupted.
    seen, errors = ck_consume(address, "shared-data", 20, **conf("bob"), **{"group.id": "bob-1"})
    assert not errors and len(seen) == 20


def pattern_assignment(address, pattern, group, settings):
    """The topics a confluent-kafka consumer-protocol member subscribed to `pattern` (which
    librdkafka sends to the broker as the heartbeat's SubscribedTopicRegex) is assigned, once its
    assignment has held still for two heartbeat intervals."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": address, "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False, **settings})
    owned = set()
    consumer.subscribe([pattern],
                       on_assign=lambda c, parts: owned.update(p.topic for p in parts),
                       on_revoke=lambda c, parts: owned.difference_update(p.topic for p in parts))
    try:
        deadline, last_change, last = time.monotonic() + 30, time.monotonic(), set()
        while time.monotonic() < deadline:
            consumer.poll(0.2)
            if owned != last:
                last, last_change = set(owned), time.monotonic()
            if owned and time.monotonic() - last_change > 2 * CONSUMER_HEARTBEAT_S:
                return set(owned)  # a copy: closing revokes, emptying `owned`
        raise AssertionError(f"no settled assignment for {pattern} in {group}: {owned}")
    finally:
        consumer.close()


def make_keystore(folder, name, subject="/CN=localhost"):
    """A self-signed keystore (certificate + a new key) for 127.0.0.1 under `subject`; returns
    (keystore path, certificate PEM)."""
    key, cert = folder / f"{name}-key.pem", folder / f"{name}-cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", subject,
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    keystore = folder / f"{name}-keystore.pem"
    keystore.write_bytes(cert.read_bytes() + key.read_bytes())
    return keystore, cert.read_text()


def served_certificate(address):
    """The certificate a new TLS connection to `address` is served, as DER."""
    import ssl

    host, port = address.rsplit(":", 1)
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, int(port)), timeout=10))


def der(pem):
    import ssl

    return ssl.PEM_cert_to_DER_cert(pem)


def test_a_listener_keystore_is_replaced_live_per_broker(secure_broker, material):
    """Kafka's dynamic keystore update: `listener.name.ssl.ssl.keystore.location` set for this
    broker through IncrementalAlterConfigs (confluent-kafka's admin client); new connections get
    the new certificate within a second, a connection already open keeps working, the other TLS
    listener keeps its keystore; a keystore of another subject and the cluster-wide form are
    refused with Kafka's errors; a file rewritten in place is read again when the same path is
    set again."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    from test_admin_quotas import alter_broker_default

    from confluent_kafka import Producer

    folder = material["folder"]
    second, second_pem = make_keystore(folder, "rotated")
    other, _ = make_keystore(folder, "other", subject="/CN=impostor")
    rewritten, rewritten_pem = make_keystore(folder, "in-place")
    original = pathlib.Path(material["cert"]).read_text()
    # Each certificate is self-signed: clients trust the three this test serves.
    trusted = folder / "rotation-trusted.pem"
    trusted.write_text(original + second_pem + rewritten_pem)
    confluent = {**ck_security("SSL", material), "ssl.ca.location": str(trusted)}
    broker = secure_broker()
    assert served_certificate(broker.listeners["SSL"]) == der(original)
    admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
    key = "listener.name.ssl.ssl.keystore.location"

    def set_keystore(path):
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(key, str(path), incremental_operation=AlterConfigOpType.SET)])
        return admin.incremental_alter_configs([resource])[resource].result(30)

    def wait_served(pem):
        deadline = time.monotonic() + 1.0
        while served_certificate(broker.listeners["SSL"]) != der(pem):
            assert time.monotonic() < deadline, "the new certificate is not served within 1 s"
            time.sleep(0.02)

    # A producer connected before the change keeps its connection and goes on producing.
    producer = Producer({"bootstrap.servers": broker.listeners["SSL"], "linger.ms": 5, **confluent})
    before, after = messages(20, prefix="rotation-before"), messages(20, prefix="rotation-after")
    for message_key, value in before:
        producer.produce("rotation", key=message_key, value=value, partition=0)
    assert producer.flush(30) == 0
    set_keystore(second)
    wait_served(second_pem)
    assert served_certificate(broker.listeners["SASL_SSL"]) == der(original), "its own keystore"
    for message_key, value in after:
        producer.produce("rotation", key=message_key, value=value, partition=0)
    assert producer.flush(30) == 0
    seen, errors = ck_consume(broker.listeners["SSL"], "rotation", 40, **confluent)
    assert not errors and seen == expected(before + after)

    with pytest.raises(KafkaException) as refused:
        set_keystore(other)
    assert "DistinguishedName" in str(refused.value), refused.value
    assert served_certificate(broker.listeners["SSL"]) == der(second_pem)
    assert alter_broker_default(broker.listeners["PLAINTEXT"], key, str(second)) == 42  # INVALID_REQUEST

    # Rotated in place: the same path, a new file, set again.
    second.write_bytes(rewritten.read_bytes())
    set_keystore(second)
    wait_served(rewritten_pem)
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entry = list(described.values())[0].result(30)[key]
    assert entry.value == str(second) and entry.source == 2, entry  # DYNAMIC_BROKER_CONFIG
