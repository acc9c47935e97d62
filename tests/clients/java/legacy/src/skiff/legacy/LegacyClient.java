package skiff.legacy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An old kafka-clients release (0.9 to 2.0: the legacy population of KIP-283) against Skiff: a
 * producer per codec, then a group consumer that reads the whole two-partition topic (records the
 * test wrote beforehand with a modern client, so stored as magic 2, plus this producer's) exactly,
 * commits and leaves; a second member of the same group resumes from the commit. Uses only API that
 * 0.9 already had, so one source compiles against every release (poll(long), subscribe(List)).
 *
 * <p>Arguments: bootstrap, topic (2 partitions), group, records per partition already written
 * ("pre-p&lt;partition&gt;" keys and values, see tests/clients/clients.py messages()), records per
 * codec per partition, codecs (comma-separated). Prints {@code RESULT legacy PASS} or
 * {@code RESULT legacy FAIL <why>} and exits 0 or 1.
 */
public final class LegacyClient {
    static final int PARTITIONS = 2;
    static final int VALUE_BYTES = 100;
    static final int TAIL = 3;
    static final long DEADLINE_MS = 30_000;

    public static void main(String[] args) {
        try {
            run(args[0], args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]), args[5].split(","));
            System.out.println("RESULT legacy PASS");
            System.out.flush();
            System.exit(0);
        } catch (Throwable error) {
            error.printStackTrace();
            System.out.println("RESULT legacy FAIL " + (error.getClass().getSimpleName() + ": " + error.getMessage()).replace('\n', ' '));
            System.out.flush();
            System.exit(1);
        }
    }

    static final class Expected {
        final int partition;
        final long offset;
        final byte[] key;
        final byte[] value;

        Expected(int partition, long offset, String prefix, int index) {
            this.partition = partition;
            this.offset = offset;
            this.key = (prefix + "-key-" + index).getBytes();
            String unit = prefix + "-value-" + index + "-";
            StringBuilder value = new StringBuilder();
            while (value.length() < VALUE_BYTES) {
                value.append(unit);
            }
            this.value = value.substring(0, VALUE_BYTES).getBytes();
        }
    }

    static void run(String bootstrap, String topic, String group, int pre, int perCodec, String[] codecs) throws Exception {
        List<List<Expected>> expected = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            List<Expected> partition = new ArrayList<>();
            for (int i = 0; i < pre; i++) {
                partition.add(new Expected(p, i, "pre-p" + p, i));
            }
            expected.add(partition);
        }
        for (String codec : codecs) {
            produce(bootstrap, topic, codec, codec + "-p", perCodec, expected);
        }
        consume(bootstrap, topic, group, expected, 0);
        long committedUpTo = expected.get(0).size();

        // A second member of the same group starts from the committed offsets: only the new tail.
        List<List<Expected>> tail = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tail.add(new ArrayList<Expected>());
        }
        produceInto(bootstrap, topic, "none", "tail-p", TAIL, expected, tail);
        consume(bootstrap, topic, group, tail, committedUpTo);
    }

    static void produce(String bootstrap, String topic, String codec, String prefix, int count,
                        List<List<Expected>> expected) throws Exception {
        produceInto(bootstrap, topic, codec, prefix, count, expected, expected);
    }

    /** Appends to {@code offsetsFrom}'s partitions' next offsets; records the expectation in {@code into}. */
    static void produceInto(String bootstrap, String topic, String codec, String prefix, int count,
                            List<List<Expected>> offsetsFrom, List<List<Expected>> into) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("compression.type", codec);
        props.put("linger.ms", "5");
        props.put("retries", "0");
        props.put("request.timeout.ms", "15000");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<byte[], byte[]>(props);
        try {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<Expected> wanted = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                long next = offsetsFrom.get(p).get(offsetsFrom.get(p).size() - 1).offset + 1;
                for (int i = 0; i < count; i++) {
                    Expected e = new Expected(p, next + i, prefix + p, i);
                    wanted.add(e);
                    sent.add(producer.send(new ProducerRecord<byte[], byte[]>(topic, p, e.key, e.value)));
                }
            }
            producer.flush();
            for (int i = 0; i < sent.size(); i++) {
                Expected e = wanted.get(i);
                long offset = sent.get(i).get().offset();
                if (offset != e.offset) {
                    throw new AssertionError(codec + " producer: record " + i + " of partition " + e.partition
                            + " got offset " + offset + ", expected " + e.offset);
                }
                into.get(e.partition).add(e);
            }
        } finally {
            producer.close();
        }
    }

    /** A group member reads exactly {@code expected} (from {@code firstOffset} on), commits and leaves. */
    static void consume(String bootstrap, String topic, String group, List<List<Expected>> expected, long firstOffset) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("session.timeout.ms", "10000");
        props.put("heartbeat.interval.ms", "1000");
        props.put("request.timeout.ms", "15000");
        props.put("check.crcs", "true");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<byte[], byte[]>(props);
        try {
            List<String> topics = new ArrayList<>();
            topics.add(topic);
            consumer.subscribe(topics);
            int total = 0;
            for (List<Expected> partition : expected) {
                total += partition.size();
            }
            List<List<ConsumerRecord<byte[], byte[]>>> seen = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                seen.add(new ArrayList<ConsumerRecord<byte[], byte[]>>());
            }
            int count = 0;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (count < total && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(200)) {
                    seen.get(record.partition()).add(record);
                    count++;
                }
            }
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(300)) {
                seen.get(record.partition()).add(record);
            }
            for (int p = 0; p < PARTITIONS; p++) {
                List<Expected> want = expected.get(p);
                List<ConsumerRecord<byte[], byte[]>> got = seen.get(p);
                if (got.size() != want.size()) {
                    throw new AssertionError("partition " + p + ": read " + got.size() + " records from offset "
                            + firstOffset + ", expected " + want.size() + describe(got));
                }
                for (int i = 0; i < want.size(); i++) {
                    Expected e = want.get(i);
                    ConsumerRecord<byte[], byte[]> r = got.get(i);
                    if (r.offset() != e.offset || !Arrays.equals(r.key(), e.key) || !Arrays.equals(r.value(), e.value)) {
                        throw new AssertionError("partition " + p + " record " + i + ": got offset " + r.offset()
                                + " key " + new String(r.key()) + ", expected offset " + e.offset + " key " + new String(e.key));
                    }
                }
            }
            consumer.commitSync();
            for (int p = 0; p < PARTITIONS; p++) {
                List<Expected> want = expected.get(p);
                long next = want.get(want.size() - 1).offset + 1;
                long committed = consumer.committed(new TopicPartition(topic, p)).offset();
                if (committed != next) {
                    throw new AssertionError("partition " + p + ": committed " + committed + ", expected " + next);
                }
            }
        } finally {
            consumer.close();
        }
    }

    static String describe(List<ConsumerRecord<byte[], byte[]>> records) {
        StringBuilder out = new StringBuilder(" (offsets");
        for (ConsumerRecord<byte[], byte[]> r : records) {
            out.append(' ').append(r.offset());
        }
        return out.append(')').toString();
    }
}
