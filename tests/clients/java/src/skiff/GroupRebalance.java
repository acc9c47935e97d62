package skiff;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;

/**
 * A classic-protocol consumer group of kafka-clients 4.x over a two-partition topic: member A
 * consumes and commits alone; member B joins (rebalance: one partition each, nothing re-delivered);
 * both consume new records, each only from its own partition, and commit; B leaves (rebalance: A
 * owns both again) and A resumes from B's commit. Committed offsets and the group's description are
 * checked with the Admin client.
 *
 * <p>Arguments: bootstrap, topic, group id, records per partition per round.
 */
public final class GroupRebalance {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        int perPartition = Integer.parseInt(args[3]);
        Checks checks = new Checks();
        checks.run("group_rebalance", () -> scenario(bootstrap, topic, group, perPartition));
        System.exit(checks.exitCode());
    }

    record Seen(int partition, long offset, String value) {}

    static void scenario(String bootstrap, String topic, String group, int n) throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = Admin.create(Checks.common(bootstrap));
             KafkaProducer<String, String> producer = Clients.stringProducer(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            produce(producer, topic, "r1", n);

            KafkaConsumer<String, String> a = consumer(bootstrap, group, "member-a");
            Tracker trackerA = new Tracker(a);
            a.subscribe(List.of(topic), trackerA);
            List<Seen> seenA = new ArrayList<>();
            pollUntil(a, seenA, () -> seenA.size() >= 2 * n);
            expectRound(seenA, Set.of(0, 1), "r1", 0, n);
            a.commitSync();
            Checks.equal(Set.of(p0, p1), a.assignment(), "A's assignment alone");

            // B joins from its own thread; A keeps polling so it takes part in the rebalance.
            ConcurrentLinkedQueue<Seen> seenB = new ConcurrentLinkedQueue<>();
            AtomicReference<Set<TopicPartition>> assignmentB = new AtomicReference<>(Set.of());
            AtomicBoolean stopB = new AtomicBoolean();
            AtomicReference<Throwable> errorB = new AtomicReference<>();
            Thread threadB = new Thread(() -> {
                try (KafkaConsumer<String, String> b = consumer(bootstrap, group, "member-b")) {
                    b.subscribe(List.of(topic));
                    while (!stopB.get()) {
                        for (ConsumerRecord<String, String> r : b.poll(Duration.ofMillis(100))) {
                            seenB.add(new Seen(r.partition(), r.offset(), r.value()));
                        }
                        assignmentB.set(Set.copyOf(b.assignment()));
                    }
                    b.commitSync();
                } catch (Throwable error) {
                    errorB.set(error);
                }
            }, "member-b");
            threadB.start();
            List<Seen> afterJoinA = new ArrayList<>();
            pollUntil(a, afterJoinA, () -> a.assignment().size() == 1 && assignmentB.get().size() == 1);
            Checks.check(trackerA.revocations >= 1, "A saw its partitions revoked when B joined");
            Checks.equal(List.of(), afterJoinA, "records re-delivered to A after the rebalance");
            Checks.equal(List.of(), List.copyOf(seenB), "records re-delivered to B after the rebalance");
            Set<TopicPartition> union = new HashSet<>(a.assignment());
            union.addAll(assignmentB.get());
            Checks.equal(Set.of(p0, p1), union, "A and B together own both partitions");

            produce(producer, topic, "r2", n);
            pollUntil(a, afterJoinA, () -> afterJoinA.size() + seenB.size() >= 2 * n);
            int partitionA = a.assignment().iterator().next().partition();
            expectRound(afterJoinA, Set.of(partitionA), "r2", n, n);
            expectRound(new ArrayList<>(seenB), Set.of(1 - partitionA), "r2", n, n);
            a.commitSync();
            stopB.set(true); // B commits and leaves (LeaveGroup)
            threadB.join(Checks.POLL_DEADLINE_MS);
            if (errorB.get() != null) {
                throw new AssertionError("member B failed", errorB.get());
            }
            Checks.check(!threadB.isAlive(), "member B closed");

            produce(producer, topic, "r3", n);
            List<Seen> afterLeaveA = new ArrayList<>();
            pollUntil(a, afterLeaveA, () -> afterLeaveA.size() >= 2 * n);
            Checks.equal(Set.of(p0, p1), a.assignment(), "A's assignment after B left");
            expectRound(afterLeaveA, Set.of(0, 1), "r3", 2 * n, n);
            a.commitSync();
            Map<TopicPartition, OffsetAndMetadata> committed = a.committed(Set.of(p0, p1));
            Checks.equal(3L * n, committed.get(p0).offset(), "A's committed offset of p0");
            Checks.equal(3L * n, committed.get(p1).offset(), "A's committed offset of p1");

            ConsumerGroupDescription live = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            Checks.equal(GroupState.STABLE, live.groupState(), "group state with A");
            Checks.equal(1, live.members().size(), "members with A");
            a.close();

            ConsumerGroupDescription empty = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            Checks.equal(GroupState.EMPTY, empty.groupState(), "group state after A left");
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Checks.equal(3L * n, offsets.get(p0).offset(), "Admin's committed offset of p0");
            Checks.equal(3L * n, offsets.get(p1).offset(), "Admin's committed offset of p1");
        }
    }

    /** Counts revocations; commits what the member consumed before it gives partitions up. */
    static final class Tracker implements ConsumerRebalanceListener {
        private final KafkaConsumer<String, String> consumer;
        int revocations;

        Tracker(KafkaConsumer<String, String> consumer) {
            this.consumer = consumer;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revocations++;
            consumer.commitSync();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
    }

    static void pollUntil(KafkaConsumer<String, String> consumer, List<Seen> into,
                          java.util.function.BooleanSupplier done) {
        long deadline = System.currentTimeMillis() + Checks.POLL_DEADLINE_MS;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out; seen " + into.size() + ", assignment " + consumer.assignment());
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                into.add(new Seen(r.partition(), r.offset(), r.value()));
            }
        }
    }

    /** {@code seen} holds exactly round {@code round}'s records of {@code partitions}, in order per partition. */
    static void expectRound(List<Seen> seen, Set<Integer> partitions, String round, long firstOffset, int n) {
        List<Seen> expected = new ArrayList<>();
        for (int partition : partitions) {
            for (int i = 0; i < n; i++) {
                expected.add(new Seen(partition, firstOffset + i, round + "-" + partition + "-" + i));
            }
        }
        List<Seen> actual = new ArrayList<>(seen);
        // Records of one partition arrive in order; the two partitions may interleave.
        actual.sort((x, y) -> x.partition() != y.partition()
                ? Integer.compare(x.partition(), y.partition()) : Long.compare(x.offset(), y.offset()));
        expected.sort((x, y) -> x.partition() != y.partition()
                ? Integer.compare(x.partition(), y.partition()) : Long.compare(x.offset(), y.offset()));
        Checks.equal(expected, actual, "records of round " + round);
        for (int partition : partitions) {
            long previous = -1;
            for (Seen s : seen) {
                if (s.partition() == partition) {
                    Checks.check(s.offset() > previous, "in-order delivery on partition " + partition);
                    previous = s.offset();
                }
            }
        }
    }

    static void produce(KafkaProducer<String, String> producer, String topic, String round, int n) throws Exception {
        for (int partition = 0; partition < 2; partition++) {
            for (int i = 0; i < n; i++) {
                producer.send(new ProducerRecord<>(topic, partition, "k" + i, round + "-" + partition + "-" + i));
            }
        }
        producer.flush();
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String clientId) {
        Properties props = Clients.classicGroupProps(bootstrap, group);
        props.put("client.id", clientId);
        props.put("session.timeout.ms", "10000");
        props.put("heartbeat.interval.ms", "500");
        props.put("max.poll.interval.ms", "30000");
        return new KafkaConsumer<>(props);
    }
}
