package skiff;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Apache Kafka's transactional producer and read_committed consumer against a broker (issue 38):
 * {@code <bootstrap> <replication factor> <topic prefix>}. Checks, each a RESULT line (Checks):
 * <ul>
 * <li>{@code commit-abort}: three transactions on one topic, committed, aborted, committed; a
 * read_committed consumer sees exactly the committed records in order, a read_uncommitted one sees
 * all three transactions' records (and neither sees a control batch).</li>
 * <li>{@code open-transaction-holds-read-committed}: while a transaction is open (sent, flushed, not
 * ended) read_committed stops before it (the last stable offset) and read_uncommitted reads it;
 * its commit releases it.</li>
 * <li>{@code consume-transform-produce}: a group member's transaction writes transformed records
 * and its offsets with sendOffsetsToTransaction; aborted, neither the output nor the group's
 * committed offset moves; committed, both do, and the output holds every record exactly once.</li>
 * <li>{@code zombie-fenced}: a second producer with the same transactional.id fences the first
 * (ProducerFencedException or InvalidProducerEpochException, as Kafka 4.x raises it), whose open
 * transaction is aborted; the new producer commits.</li>
 * </ul>
 * Every read is bounded: a consumer reads to the end offsets of its own isolation level.
 */
public final class Transactions {
    static final int RECORDS_PER_TXN = 10;
    static final int CTP_RECORDS = 50;
    static final Duration POLL = Duration.ofMillis(200);
    /** How long a read waits for the transaction markers of a transaction that already ended. */
    static final long SETTLE_MS = 15_000;
    static final long SETTLE_POLL_MS = 200;

    private final String bootstrap;
    private final short replicas;
    private final String prefix;

    private Transactions(String bootstrap, short replicas, String prefix) {
        this.bootstrap = bootstrap;
        this.replicas = replicas;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        Transactions program = new Transactions(args[0], Short.parseShort(args[1]), args[2]);
        Checks checks = new Checks();
        checks.run("commit-abort", program::commitAbort);
        checks.run("open-transaction-holds-read-committed", program::openTransactionHoldsReadCommitted);
        checks.run("consume-transform-produce", program::consumeTransformProduce);
        checks.run("zombie-fenced", program::zombieFenced);
        System.exit(checks.exitCode());
    }

    void commitAbort() throws Exception {
        String topic = createTopic("commit-abort", 1);
        try (KafkaProducer<String, String> producer = producer("commit-abort")) {
            producer.initTransactions();
            sendTransaction(producer, topic, "c1", true);
            sendTransaction(producer, topic, "a1", false);
            sendTransaction(producer, topic, "c2", true);
        }
        settled(expected("c1", "c2"), () -> values(topic, "read_committed"), "read_committed");
        Checks.equal(expected("c1", "a1", "c2"), values(topic, "read_uncommitted"), "read_uncommitted");
    }

    void openTransactionHoldsReadCommitted() throws Exception {
        String topic = createTopic("open", 1);
        try (KafkaProducer<String, String> producer = producer("open")) {
            producer.initTransactions();
            sendTransaction(producer, topic, "before", true);
            producer.beginTransaction();
            for (int i = 0; i < RECORDS_PER_TXN; i++) {
                producer.send(new ProducerRecord<>(topic, "open-" + i, "open-" + i));
            }
            producer.flush();
            settled(expected("before"), () -> values(topic, "read_committed"), "read_committed while open");
            settled(expected("before", "open"), () -> values(topic, "read_uncommitted"), "read_uncommitted while open");
            producer.commitTransaction();
        }
        settled(expected("before", "open"), () -> values(topic, "read_committed"), "read_committed after the commit");
    }

    void consumeTransformProduce() throws Exception {
        String input = createTopic("ctp-in", 2);
        String output = createTopic("ctp-out", 2);
        String group = prefix + "-ctp";
        try (KafkaProducer<String, String> plain = Clients.stringProducer(bootstrap)) {
            for (int i = 0; i < CTP_RECORDS; i++) {
                plain.send(new ProducerRecord<>(input, i % 2, "k" + i, "in-" + i)).get();
            }
        }
        Properties props = Clients.classicGroupProps(bootstrap, group);
        props.put("isolation.level", "read_committed");
        props.put("auto.offset.reset", "earliest");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
             KafkaProducer<String, String> producer = producer("ctp");
             Admin admin = Admin.create(Checks.common(bootstrap))) {
            consumer.subscribe(List.of(input));
            producer.initTransactions();
            List<ConsumerRecord<String, String>> batch = pollAll(consumer, CTP_RECORDS);
            transformInTransaction(producer, consumer, output, batch, false);
            settled(Map.of(), () -> committedOffsets(admin, group), "the group's offsets after an abort");
            awaitStable(output);
            Checks.equal(List.of(), values(output, "read_committed"), "the output after an abort");
            for (TopicPartition partition : consumer.assignment()) {
                consumer.seek(partition, 0);
            }
            batch = pollAll(consumer, CTP_RECORDS);
            transformInTransaction(producer, consumer, output, batch, true);
            Map<TopicPartition, Long> want = new HashMap<>();
            for (int p = 0; p < 2; p++) {
                want.put(new TopicPartition(input, p), (long) CTP_RECORDS / 2);
            }
            settled(want, () -> committedOffsets(admin, group), "the group's offsets after the commit");
            List<String> wantOut = new ArrayList<>();
            for (int i = 0; i < CTP_RECORDS; i++) {
                wantOut.add("out-" + i);
            }
            wantOut.sort(null);
            settled(wantOut, () -> values(output, "read_committed").stream().sorted().collect(Collectors.toList()),
                    "the output after the commit (each record once)");
            settled(2 * CTP_RECORDS, () -> values(output, "read_uncommitted").size(),
                    "read_uncommitted output holds the aborted and the committed copies");
        }
    }

    void zombieFenced() throws Exception {
        String topic = createTopic("zombie", 1);
        KafkaProducer<String, String> zombie = producer("zombie");
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, "zombie", "zombie-0")).get();
            try (KafkaProducer<String, String> successor = producer("zombie")) {
                successor.initTransactions();
                Exception fenced = null;
                try {
                    zombie.send(new ProducerRecord<>(topic, "zombie", "zombie-1")).get();
                    zombie.commitTransaction();
                } catch (Exception error) {
                    fenced = error;
                }
                Checks.check(fenced != null, "the zombie's send and commit succeeded after it was fenced");
                Throwable fencing = fencingCause(fenced);
                Checks.check(fencing != null, "the zombie failed with " + Checks.oneLine(fenced)
                        + ", not ProducerFencedException / InvalidProducerEpochException");
                System.out.println("NOTE zombie-fenced-by " + fencing.getClass().getSimpleName());
                successor.beginTransaction();
                successor.send(new ProducerRecord<>(topic, "successor", "successor-0")).get();
                successor.commitTransaction();
            }
        } finally {
            zombie.close(Duration.ZERO);
        }
        settled(List.of("successor-0"), () -> values(topic, "read_committed"), "read_committed after the fencing");
    }

    /** A read that depends on markers: the coordinator writes them after EndTxn answered (Kafka
     * answers EndTxn once PrepareCommit/PrepareAbort is logged), so a read right after a commit may
     * still stop at the last stable offset before it; re-read until {@code expected} or the deadline. */
    static <T> void settled(T expected, Read<T> read, String what) throws Exception {
        long deadline = System.currentTimeMillis() + SETTLE_MS;
        T actual = read.get();
        while (!expected.equals(actual) && System.currentTimeMillis() < deadline) {
            Thread.sleep(SETTLE_POLL_MS);
            actual = read.get();
        }
        Checks.equal(expected, actual, what);
    }

    /** Until no transaction on {@code topic} is open: read_committed's end offsets (the last
     * stable offsets) equal read_uncommitted's (the high watermarks). */
    void awaitStable(String topic) throws Exception {
        settled(endOffsets(topic, "read_uncommitted"), () -> endOffsets(topic, "read_committed"),
                "the last stable offsets of " + topic + " up to the high watermarks");
    }

    Map<TopicPartition, Long> endOffsets(String topic, String isolation) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(isolation))) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(info -> new TopicPartition(topic, info.partition())).collect(Collectors.toList());
            return consumer.endOffsets(partitions);
        }
    }

    Properties consumerProps(String isolation) {
        Properties props = Checks.common(bootstrap);
        props.put("isolation.level", isolation);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        return props;
    }

    interface Read<T> {
        T get() throws Exception;
    }

    /** The ProducerFencedException or InvalidProducerEpochException in {@code error}'s causes, or null. */
    static Throwable fencingCause(Throwable error) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof ProducerFencedException || cause instanceof InvalidProducerEpochException) {
                return cause;
            }
        }
        return null;
    }

    void transformInTransaction(KafkaProducer<String, String> producer, KafkaConsumer<String, String> consumer,
                                String output, List<ConsumerRecord<String, String>> batch, boolean commit)
            throws Exception {
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> record : batch) {
            producer.send(new ProducerRecord<>(output, record.partition(), record.key(),
                    record.value().replace("in-", "out-")));
            offsets.put(new TopicPartition(record.topic(), record.partition()), new OffsetAndMetadata(record.offset() + 1));
        }
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        if (commit) {
            producer.commitTransaction();
        } else {
            // Delivered before the abort: abortTransaction fails the sends still queued or being
            // retried, and the aborted copies must be in the log for read_committed to hide them.
            producer.flush();
            producer.abortTransaction();
        }
    }

    static List<ConsumerRecord<String, String>> pollAll(KafkaConsumer<String, String> consumer, int count) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + Checks.POLL_DEADLINE_MS;
        while (got.size() < count) {
            Checks.check(System.currentTimeMillis() < deadline, "polled " + got.size() + " of " + count + " records");
            consumer.poll(POLL).forEach(got::add);
        }
        Checks.equal(count, got.size(), "records polled");
        return got;
    }

    Map<TopicPartition, Long> committedOffsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        // require_stable: while a transactional commit is pending the broker answers
        // UNSTABLE_OFFSET_COMMIT (retried by the admin client), so an aborted commit is seen gone.
        ListConsumerGroupOffsetsOptions stable = new ListConsumerGroupOffsetsOptions().requireStable(true);
        admin.listConsumerGroupOffsets(group, stable).partitionsToOffsetAndMetadata().get()
                .forEach((partition, offset) -> {
                    if (offset != null) {
                        offsets.put(partition, offset.offset());
                    }
                });
        return offsets;
    }

    KafkaProducer<String, String> producer(String transactionalId) {
        Properties props = Checks.common(bootstrap);
        props.put("transactional.id", prefix + "-" + transactionalId);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("max.block.ms", String.valueOf(Checks.API_TIMEOUT_MS));
        props.put("delivery.timeout.ms", String.valueOf(Checks.API_TIMEOUT_MS));
        return new KafkaProducer<>(props);
    }

    static void sendTransaction(KafkaProducer<String, String> producer, String topic, String tag, boolean commit)
            throws Exception {
        producer.beginTransaction();
        for (int i = 0; i < RECORDS_PER_TXN; i++) {
            producer.send(new ProducerRecord<>(topic, tag + "-" + i, tag + "-" + i));
        }
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.flush();
            producer.abortTransaction();
        }
    }

    static List<String> expected(String... tags) {
        List<String> values = new ArrayList<>();
        for (String tag : tags) {
            for (int i = 0; i < RECORDS_PER_TXN; i++) {
                values.add(tag + "-" + i);
            }
        }
        return values;
    }

    String createTopic(String name, int partitions) throws Exception {
        String topic = prefix + "-" + name;
        try (Admin admin = Admin.create(Checks.common(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
        }
        return topic;
    }

    /** Every value of `topic` from its start to the end offsets `isolation` reads up to, in partition order. */
    List<String> values(String topic, String isolation) {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(isolation))) {
            List<TopicPartition> partitions = consumer.partitionsFor(topic).stream()
                    .map(info -> new TopicPartition(topic, info.partition())).sorted(
                            (a, b) -> Integer.compare(a.partition(), b.partition()))
                    .collect(Collectors.toList());
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            Map<TopicPartition, List<String>> seen = new HashMap<>();
            long deadline = System.currentTimeMillis() + Checks.POLL_DEADLINE_MS;
            while (!reached(consumer, end.keySet(), end)) {
                Checks.check(System.currentTimeMillis() < deadline, "reading " + topic + " to " + end + " (" + isolation + ")");
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    seen.computeIfAbsent(new TopicPartition(record.topic(), record.partition()), p -> new ArrayList<>())
                            .add(record.value());
                }
            }
            List<String> values = new ArrayList<>();
            partitions.forEach(p -> values.addAll(seen.getOrDefault(p, List.of())));
            return values;
        }
    }

    static boolean reached(KafkaConsumer<String, String> consumer, Set<TopicPartition> partitions,
                           Map<TopicPartition, Long> end) {
        for (TopicPartition partition : partitions) {
            if (consumer.position(partition) < end.get(partition)) {
                return false;
            }
        }
        return true;
    }
}
