package skiff;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The Admin client of kafka-clients 4.x over the admin APIs Skiff has: CreateTopics, Metadata
 * (list/describe topics), DescribeConfigs, DescribeCluster, ListOffsets, ListGroups, DescribeGroups,
 * OffsetFetch and DeleteTopics. One check per call; they run in order over one topic and one group.
 *
 * <p>Arguments: bootstrap, topic, group id.
 */
public final class AdminSupported {
    static final int PARTITIONS = 3;
    static final int RECORDS = 10;
    static final String RETENTION_MS = "3600000";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        Checks checks = new Checks();
        long[] timestamps = new long[RECORDS];
        try (Admin admin = Admin.create(Checks.common(bootstrap))) {
            int[] nodeId = {-1};
            checks.run("describe_cluster", () -> {
                DescribeClusterResult cluster = admin.describeCluster();
                Collection<Node> nodes = cluster.nodes().get();
                Checks.equal(1, nodes.size(), "nodes");
                Node node = nodes.iterator().next();
                nodeId[0] = node.id();
                Checks.equal("127.0.0.1", node.host(), "node host");
                Checks.check(cluster.clusterId().get() != null && !cluster.clusterId().get().isEmpty(), "cluster id");
                Checks.equal(node.id(), cluster.controller().get().id(), "controller");
            });
            checks.run("create_topics", () -> {
                NewTopic newTopic = new NewTopic(topic, PARTITIONS, (short) 1)
                        .configs(Map.of("retention.ms", RETENTION_MS));
                CreateTopicsResult created = admin.createTopics(List.of(newTopic));
                Checks.equal(PARTITIONS, created.numPartitions(topic).get(), "partitions of the new topic");
                Checks.equal(1, created.replicationFactor(topic).get(), "replication factor");
                Checks.check(created.topicId(topic).get() != null, "topic id");
                Checks.expectError(TopicExistsException.class,
                        () -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get());
                Checks.expectError(InvalidReplicationFactorException.class,
                        () -> admin.createTopics(List.of(new NewTopic(topic + "-rf3", 1, (short) 3))).all().get());
            });
            checks.run("list_topics", () -> {
                Set<String> names = admin.listTopics().names().get();
                Checks.check(names.contains(topic), "listTopics has " + topic + ": " + names);
                Checks.check(!names.contains(topic + "-rf3"), "the refused topic is not listed");
                Set<String> withInternal = admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
                Checks.check(withInternal.containsAll(names), "listInternal(true) is a superset");
            });
            checks.run("describe_topics", () -> {
                TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                Checks.equal(PARTITIONS, description.partitions().size(), "partitions");
                Checks.check(!description.isInternal(), "not internal");
                description.partitions().forEach(p -> {
                    Checks.equal(nodeId[0], p.leader().id(), "leader of partition " + p.partition());
                    Checks.equal(1, p.isr().size(), "isr of partition " + p.partition());
                });
                Checks.expectError(UnknownTopicOrPartitionException.class,
                        () -> admin.describeTopics(List.of(topic + "-missing")).allTopicNames().get());
            });
            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            checks.run("describe_configs", () -> {
                Config config = admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource);
                ConfigEntry retention = config.get("retention.ms");
                Checks.check(retention != null, "topic config retention.ms is described");
                Checks.equal(RETENTION_MS, retention.value(), "retention.ms");
                Checks.equal(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
                ConfigEntry segment = config.get("segment.bytes");
                Checks.check(segment != null && segment.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                        "segment.bytes is described with a default source: " + segment);
            });
            checks.run("describe_broker_configs", () -> {
                ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodeId[0]));
                Config config = admin.describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
                Checks.check(!config.entries().isEmpty(), "broker configs are described");
                Checks.check(config.get("log.retention.hours") != null || config.get("log.retention.ms") != null,
                        "the broker's retention default is described: " + config);
            });
            TopicPartition p0 = new TopicPartition(topic, 0);
            checks.run("list_offsets", () -> {
                long base = System.currentTimeMillis() - 100_000;
                try (KafkaProducer<String, String> producer = Clients.stringProducer(bootstrap)) {
                    for (int i = 0; i < RECORDS; i++) {
                        timestamps[i] = base + 1000L * i;
                        producer.send(new ProducerRecord<>(topic, 0, timestamps[i], "k" + i, "v" + i));
                    }
                    producer.flush();
                }
                Checks.equal(0L, offset(admin, p0, OffsetSpec.earliest()), "earliest");
                Checks.equal((long) RECORDS, offset(admin, p0, OffsetSpec.latest()), "latest");
                Checks.equal(0L, offset(admin, p0, OffsetSpec.forTimestamp(timestamps[0] - 1)), "offset for a timestamp before all");
                Checks.equal(-1L, offset(admin, p0, OffsetSpec.forTimestamp(timestamps[RECORDS - 1] + 1)), "offset after the last timestamp");
                Checks.equal(0L, offset(admin, new TopicPartition(topic, 1), OffsetSpec.latest()), "latest of an empty partition");
            });
            // Kafka answers a timestamp lookup with the first *record* whose timestamp is at least
            // the target, and max timestamp with the record holding it (KIP-734), both inside a
            // batch: these records were sent in one batch.
            checks.run("list_offsets_by_record_timestamp", () -> {
                ListOffsetsResultInfo at = admin.listOffsets(Map.of(p0, OffsetSpec.forTimestamp(timestamps[4]))).partitionResult(p0).get();
                Checks.equal(4L, at.offset(), "offset for record 4's timestamp");
                Checks.equal(timestamps[4], at.timestamp(), "timestamp answered for record 4's timestamp");
                Checks.equal(5L, offset(admin, p0, OffsetSpec.forTimestamp(timestamps[4] + 1)), "offset for a timestamp between records");
                ListOffsetsResultInfo max = admin.listOffsets(Map.of(p0, OffsetSpec.maxTimestamp())).partitionResult(p0).get();
                Checks.equal((long) RECORDS - 1, max.offset(), "offset of the max timestamp");
                Checks.equal(timestamps[RECORDS - 1], max.timestamp(), "max timestamp");
            });
            KafkaConsumer<String, String> member = Clients.classicGroupConsumer(bootstrap, group);
            checks.run("group_offsets_and_listing", () -> {
                member.subscribe(List.of(topic));
                int seen = 0;
                long deadline = System.currentTimeMillis() + Checks.POLL_DEADLINE_MS;
                while (seen < RECORDS && System.currentTimeMillis() < deadline) {
                    seen += member.poll(Duration.ofMillis(100)).count();
                }
                Checks.equal(RECORDS, seen, "records consumed by the group member");
                member.commitSync();
                Collection<GroupListing> groups = admin.listGroups().all().get();
                Checks.check(groups.stream().anyMatch(g -> g.groupId().equals(group)), "listGroups has the group: " + groups);
                Set<String> consumerGroups = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get().stream()
                        .map(GroupListing::groupId).collect(Collectors.toSet());
                Checks.check(consumerGroups.contains(group), "listGroups(forConsumerGroups) has the group: " + consumerGroups);
                ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                Checks.equal(GroupState.STABLE, description.groupState(), "state");
                Checks.equal(1, description.members().size(), "members");
                Checks.equal(PARTITIONS, description.members().iterator().next().assignment().topicPartitions().size(), "assigned partitions");
                Checks.check(!description.isSimpleConsumerGroup(), "a consumer group, not a simple one");
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                Checks.equal((long) RECORDS, offsets.get(new TopicPartition(topic, 0)).offset(), "committed offset of partition 0");
            });
            checks.run("describe_group_after_leave", () -> {
                member.close();
                ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                Checks.equal(GroupState.EMPTY, description.groupState(), "state after the member left");
                Checks.equal(0, description.members().size(), "members after the member left");
            });
            checks.run("delete_topics", () -> {
                admin.deleteTopics(List.of(topic)).all().get();
                Checks.check(!admin.listTopics().names().get().contains(topic), "deleted topic is not listed");
                Checks.expectError(UnknownTopicOrPartitionException.class,
                        () -> admin.deleteTopics(List.of(topic)).all().get());
            });
        }
        System.exit(checks.exitCode());
    }

    static long offset(Admin admin, TopicPartition partition, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(partition, spec)).partitionResult(partition).get().offset();
    }
}
