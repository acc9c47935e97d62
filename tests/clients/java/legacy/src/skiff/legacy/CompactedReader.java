package skiff.legacy;

import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * An old kafka-clients release reading one partition of a compacted topic (uses only API that 0.9
 * already had, so it compiles against every legacy release):
 * {@code <bootstrap> <topic> <partition> <last offset> <start offset>...} assigns the partition and,
 * for each start offset in turn (one may fall in a gap the cleaner left), prints {@code FROM
 * <start>}, seeks there and reads until it has a record at or past the last offset (or 30 s),
 * printing {@code REC <offset> <key> <value>} (tab-separated; {@code <null>} for a missing key or
 * value) for each. One JVM for every read. Exits 0 when every read got there, 1 otherwise.
 */
public final class CompactedReader {
    static final long DEADLINE_MS = 30_000;
    static final String NULL = "<null>";

    private CompactedReader() {}

    public static void main(String[] args) {
        try {
            long[] starts = new long[args.length - 4];
            for (int index = 0; index < starts.length; index++) {
                starts[index] = Long.parseLong(args[4 + index]);
            }
            boolean reached = read(args[0], args[1], Integer.parseInt(args[2]), Long.parseLong(args[3]), starts);
            System.out.flush();
            System.exit(reached ? 0 : 1);
        } catch (Throwable error) {
            error.printStackTrace();
            System.out.flush();
            System.exit(1);
        }
    }

    static boolean read(String bootstrap, String topic, int partition, long last, long[] starts) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("enable.auto.commit", "false");
        props.put("request.timeout.ms", "15000");
        props.put("session.timeout.ms", "10000");
        props.put("check.crcs", "true");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<String, String>(props);
        try {
            TopicPartition tp = new TopicPartition(topic, partition);
            consumer.assign(Collections.singletonList(tp));
            for (long start : starts) {
                System.out.println("FROM\t" + start);
                consumer.seek(tp, start);
                if (!readUntil(consumer, last)) {
                    return false;
                }
            }
            return true;
        } finally {
            consumer.close();
        }
    }

    /** Polls until a record at or past {@code last} (records after it in the same poll are dropped). */
    static boolean readUntil(KafkaConsumer<String, String> consumer, long last) {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> record : consumer.poll(200)) {
                System.out.println("REC\t" + record.offset() + "\t" + (record.key() == null ? NULL : record.key())
                        + "\t" + (record.value() == null ? NULL : record.value()));
                if (record.offset() >= last) {
                    return true;
                }
            }
        }
        return false;
    }
}
