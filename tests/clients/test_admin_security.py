"""ACLs and SCRAM users through Kafka's admin APIs, stored in the metadata store (issue 39 items 1-3,
6, 7), on a 3-broker cluster over the shared etcd: Kafka's own kafka-acls.sh (add, list, remove:
literal, prefixed, host) and kafka-configs.sh --entity-type users (SCRAM add and delete), a Java
client (Kafka's tools) and librdkafka logging in with the new user through other brokers,
Admin.describeCluster() (kafka-cluster.sh cluster-id, and list-endpoints --include-fenced-brokers:
DescribeCluster v2), an ACL added through broker 0 enforced by
broker 2 and a deleted user refused by every broker, with the propagation times over 20 changes
each; the files as a bootstrap; and a broker whose store is unreachable: the admin APIs answer
REQUEST_TIMED_OUT while the last ACLs and users stay enforced. Kafka's tools run in one JVM per
batch (skiff.ToolRunner)."""

import statistics
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion,
                                   ScramCredentialInfo)

from conftest import BROKER_BIN, SUMMARY_LINES, Broker
from java_programs import run_tools
from test_cluster import SkiffCluster

ACLS = "org.apache.kafka.tools.AclCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
CLUSTER = "org.apache.kafka.tools.ClusterTool"
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
AUTHORIZER = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The file users: imported by the first broker, ignored (with a warning) by the others.
FILE_USERS = {"boot": "boot-secret"}
CHANGES = 20
PROPAGATION_BOUND_S = 1.0


def credentials_file(folder):
    path = folder / "users.txt"
    lines = [subprocess.run([BROKER_BIN, "sasl-credential", user], input=password + "\n", check=True,
                            capture_output=True, text=True, timeout=30).stdout
             for user, password in FILE_USERS.items()]
    path.write_text("".join(lines))
    return path


def sasl(broker):
    return broker.listeners["SASL_PLAINTEXT"]


def client_as(address, user, password, mechanism="SCRAM-SHA-512"):
    return AdminClient({"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanisms": mechanism, "sasl.username": user,
                        "sasl.password": password})


def can_log_in(address, user, password, mechanism="SCRAM-SHA-512"):
    """Whether librdkafka authenticates as `user` (a Metadata request succeeds)."""
    try:
        client = client_as(address, user, password, mechanism)
        client.list_topics(timeout=5)
        return True
    except KafkaException as error:
        if error.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT,
                                    KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
            return False
        raise


def java_properties(folder, user, password, mechanism="SCRAM-SHA-512"):
    path = folder / f"{user}-{mechanism}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username=\"{user}\" password=\"{password}\";\n")
    return path


@pytest.fixture(scope="module")
def secured(etcd, tmp_path_factory):
    """Three brokers with SASL, the authorizer on, ANONYMOUS (the PLAINTEXT tools) a super user;
    broker 0 alone has an ACL file, every broker the credentials file (SASL listeners need one)."""
    folder = tmp_path_factory.mktemp("admin-security")
    users = credentials_file(folder)
    acl_file = folder / "acls.txt"
    acl_file.write_text("allow User:boot describe topic:prefixed:boot-\n")
    common = (f"listeners={LISTENERS}", f"skiff.sasl.credentials.file={users}", AUTHORIZER,
              "super.users=User:ANONYMOUS", "default.replication.factor=3")
    cluster = SkiffCluster(etcd, 3, common)
    cluster.brokers[0].extra_settings.append(f"skiff.acl.file={acl_file}")
    cluster.start()
    yield cluster, folder
    cluster.stop()


def acl_lines(out):
    return sorted(line.strip() for line in out.splitlines() if "principal=" in line)


def test_the_files_are_a_bootstrap(secured):
    cluster, _ = secured
    logs = ["".join(broker.log_lines) for broker in cluster.brokers]
    assert "ACL file imported into the metadata store" in logs[0], logs[0][-3000:]
    assert "SASL credentials file imported into the metadata store" in logs[0], logs[0][-3000:]
    for log in logs[1:]:
        assert "skiff.sasl.credentials.file is ignored" in log, log[-3000:]
        assert "kafka-configs.sh --entity-type users" in log
    # The imported user logs in through a broker that did not import it.
    assert can_log_in(sasl(cluster.brokers[2]), "boot", FILE_USERS["boot"])
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    bindings = admin.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert [(b.name, b.resource_pattern_type, b.principal) for b in bindings] == [
        ("boot-", ResourcePatternType.PREFIXED, "User:boot")]


def test_kafka_tools_manage_acls_and_users_through_every_broker(secured, java_classes):
    cluster, folder = secured
    b0, b1, b2 = cluster.brokers
    carol = java_properties(folder, "carol", "carol-secret")
    bs0, bs1 = ["--bootstrap-server", b0.bootstrap], ["--bootstrap-server", b1.bootstrap]
    commands = {
        "create": [TOPICS, *bs0, "--create", "--topic", "orders", "--partitions", 1],
        "add_literal": [ACLS, *bs0, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                        "--topic", "orders"],
        "add_prefixed": [ACLS, *bs0, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                         "--topic", "logs-", "--resource-pattern-type", "prefixed"],
        "add_host": [ACLS, *bs0, "--add", "--deny-principal", "User:bob", "--deny-host", "10.1.2.3",
                     "--operation", "Read", "--topic", "orders"],
        "add_carol": [ACLS, *bs0, "--add", "--allow-principal", "User:carol", "--operation", "Describe",
                      "--topic", "orders"],
        "list_orders": [ACLS, *bs1, "--list", "--topic", "orders"],
        "list_match": [ACLS, *bs1, "--list", "--topic", "logs-today", "--resource-pattern-type", "match"],
        "remove_host": [ACLS, *bs1, "--remove", "--deny-principal", "User:bob", "--deny-host", "10.1.2.3",
                        "--operation", "Read", "--topic", "orders", "--force"],
        "list_after_remove": [ACLS, *bs0, "--list", "--topic", "orders"],
        "add_user": [CONFIGS, *bs0, "--alter", "--entity-type", "users", "--entity-name", "carol",
                     "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret],"
                                     "SCRAM-SHA-512=[password=carol-secret]"],
        # A Java client logs in as carol through another broker and sees the topic she may describe.
        "carol_lists": [TOPICS, "--bootstrap-server", sasl(b2), "--command-config", carol, "--list"],
        "cluster_id": [CLUSTER, "cluster-id", *bs1],
        # DescribeCluster v2 (KIP-1073): every broker, none fenced.
        "endpoints": [CLUSTER, "list-endpoints", "--include-fenced-brokers", *bs1],
    }
    runs = dict(zip(commands, run_tools(java_classes, list(commands.values()))))

    def ok(name):
        status, out, err = runs[name]
        assert status == 0, f"{name} exited {status}:\n{out}\n{err}"
        return out

    for name in ("create", "add_literal", "add_prefixed", "add_host", "add_carol", "remove_host"):
        ok(name)
    orders = acl_lines(ok("list_orders"))
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in orders, orders
    assert "(principal=User:bob, host=10.1.2.3, operation=READ, permissionType=DENY)" in orders, orders
    match = ok("list_match")
    assert "name=logs-, patternType=PREFIXED" in match and "operation=WRITE" in match, match
    assert not any("User:bob" in line for line in acl_lines(ok("list_after_remove")))
    ok("add_user")
    assert "orders" in ok("carol_lists").split()
    cluster_id = ok("cluster_id")
    assert "Cluster ID: " in cluster_id, cluster_id
    endpoints = ok("endpoints")
    rows = [line.split() for line in endpoints.strip().splitlines()[1:] if line.strip()]
    assert sorted(row[0] for row in rows) == ["0", "1", "2"], endpoints
    assert "STATE" in endpoints.splitlines()[0], endpoints
    assert all("unfenced" in row and "fenced" not in row for row in rows), endpoints

    # librdkafka logs in as carol through the third broker with either mechanism.
    assert can_log_in(sasl(b1), "carol", "carol-secret", "SCRAM-SHA-256")
    assert can_log_in(sasl(b2), "carol", "carol-secret", "SCRAM-SHA-512")
    assert not can_log_in(sasl(b2), "carol", "wrong-secret")
    admin2 = AdminClient({"bootstrap.servers": b2.bootstrap})
    described = {"carol": admin2.describe_user_scram_credentials(["carol"])["carol"].result(10)}
    infos = sorted((info.mechanism, info.iterations) for info in described["carol"].scram_credential_infos)
    assert infos == [(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)], infos

    # Deleting the user stops new logins on every broker, the Java tools' included.
    commands = {
        "delete_user": [CONFIGS, *bs1, "--alter", "--entity-type", "users", "--entity-name", "carol",
                        "--delete-config", "SCRAM-SHA-256,SCRAM-SHA-512"],
        "acl_list_again": [ACLS, *bs0, "--list", "--topic", "orders"],
        "carol_refused": [TOPICS, "--bootstrap-server", sasl(b2), "--command-config", carol, "--list"],
    }
    runs = dict(zip(commands, run_tools(java_classes, list(commands.values()))))
    ok("delete_user")
    status, out, err = runs["carol_refused"]
    assert status != 0 and "Authentication failed" in out + err, f"{status}\n{out}\n{err}"
    for broker in cluster.brokers:
        assert not can_log_in(sasl(broker), "carol", "carol-secret")


def authorized(admin, topic):
    """Whether the client's principal may describe `topic` (Metadata through its broker)."""
    metadata = admin.list_topics(topic=topic, timeout=5)
    error = metadata.topics[topic].error
    return error is None or error.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED


def seconds_until(condition, bound_s, what):
    """Seconds from now until `condition()` holds, polled every 5 ms (a tighter grain than
    wait_for's), failing past `bound_s`."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > bound_s:
            raise AssertionError(f"{what} not within {bound_s} s")
        time.sleep(0.005)
    return time.monotonic() - start


def distribution(samples):
    ordered = sorted(samples)
    return (f"min {ordered[0] * 1000:.1f} ms, median {statistics.median(ordered) * 1000:.1f} ms, "
            f"p90 {ordered[int(len(ordered) * 0.9) - 1] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms")


def test_changes_through_broker_0_apply_on_broker_2_within_a_second(secured):
    cluster, _ = secured
    b0, _, b2 = cluster.brokers
    admin0 = AdminClient({"bootstrap.servers": b0.bootstrap})
    admin0.create_topics([NewTopic(
        "propagation", 1)])["propagation"].result(30)
    admin0.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "watcher", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"watcher-secret")])["watcher"].result(10)
    watcher = client_as(sasl(b2), "watcher", "watcher-secret")
    fields = (ResourceType.TOPIC, "propagation", ResourcePatternType.LITERAL, "User:watcher", "*",
              AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    binding, matching = AclBinding(*fields), AclBindingFilter(*fields)
    acl_times = []
    for change in range(CHANGES):
        adding = change % 2 == 0
        if adding:
            admin0.create_acls([binding])[binding].result(10)
        else:
            assert len(admin0.delete_acls([matching])[matching].result(10)) == 1
        acl_times.append(seconds_until(lambda: authorized(watcher, "propagation") == adding,
                                       PROPAGATION_BOUND_S, f"change {change} enforced by broker 2"))

    user_times = []
    for change in range(CHANGES):
        user = f"user-{change}"
        # A client that already retries its login every 5-10 ms: it gets in at the first retry
        # after broker 2 has the user.
        probe = AdminClient({"bootstrap.servers": sasl(b2), "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user,
                             "sasl.password": "secret", "reconnect.backoff.ms": 5,
                             "reconnect.backoff.max.ms": 10, "log_level": 0})
        admin0.alter_user_scram_credentials([UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret")])[user].result(10)
        written = time.monotonic()
        probe.list_topics(timeout=PROPAGATION_BOUND_S)
        user_times.append(time.monotonic() - written)
    admin0.alter_user_scram_credentials([UserScramCredentialDeletion(
        f"user-{change}", ScramMechanism.SCRAM_SHA_256) for change in range(CHANGES)])
    SUMMARY_LINES.append(f"ACL propagation broker 0 -> broker 2 over {CHANGES} changes: {distribution(acl_times)}")
    SUMMARY_LINES.append(f"SCRAM user propagation broker 0 -> broker 2 over {CHANGES} changes: {distribution(user_times)}")
    assert max(acl_times) < PROPAGATION_BOUND_S and max(user_times) < PROPAGATION_BOUND_S


def test_acl_and_scram_admin_errors_as_kafka(secured):
    cluster, _ = secured
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:x",
                     "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([bad])[bad].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in refused.value.args[0].str()
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024), b"pw"),
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(KafkaException) as few:
        futures["few"].result(10)
    assert few.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException) as nobody:
        futures["nobody"].result(10)
    assert nobody.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_a_topic_below_its_min_isr_is_created_with_a_warning(secured):
    cluster, _ = secured
    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    # On a cluster min.insync.replicas defaults to 2 (Kafka's default is 1).
    admin.create_topics([NewTopic("below-min-isr", 1, replication_factor=1)])["below-min-isr"].result(30)
    logs = "".join("".join(broker.log_lines) for broker in cluster.brokers)
    assert ("topic below-min-isr has replication factor 1, below its min.insync.replicas 2" in logs), \
        logs[-3000:]


def test_an_unreachable_store_times_out_the_admin_apis_and_keeps_enforcing(tmp_path):
    from etcd_cluster import EtcdCluster

    store = EtcdCluster(size=1).start()
    users = credentials_file(tmp_path)
    broker = Broker(str(tmp_path / "data"), [
        "node.id=1", f"skiff.metadata.store={store.address}", "skiff.cluster.name=unreachable",
        f"listeners={LISTENERS}", f"skiff.sasl.credentials.file={users}", AUTHORIZER,
        "super.users=User:ANONYMOUS", "default.replication.factor=1", "min.insync.replicas=1",
        "broker.session.timeout.ms=3000", "controlled.shutdown.enable=false"])
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(
            "kept", 1)])["kept"].result(30)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dora", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dora-secret")])["dora"].result(10)
        allowed = AclBinding(ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, "User:dora", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        admin.create_acls([allowed])[allowed].result(10)
        store.kill(0)
        other = AclBinding(ResourceType.TOPIC, "other", ResourcePatternType.LITERAL, "User:dora", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        with pytest.raises(KafkaException) as timed_out:
            admin.create_acls([other], request_timeout=30)[other].result(40)
        assert timed_out.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT, timed_out.value
        futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "dora", ScramMechanism.SCRAM_SHA_512)], request_timeout=30)
        with pytest.raises(KafkaException) as user_timed_out:
            futures["dora"].result(40)
        assert user_timed_out.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT
        # The last users and ACLs stay in force.
        dora = client_as(sasl(broker), "dora", "dora-secret")
        assert authorized(dora, "kept")
        assert not can_log_in(sasl(broker), "dora", "wrong")
    finally:
        broker.stop()
        store.stop()
