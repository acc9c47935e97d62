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
 * {@code <bootstrap> <topic> <partition> <start offset> <last offset>} assigns the partition, seeks
 * to the start offset (which may fall in a gap the cleaner left) and reads until it has a record
 * at or past the last offset (or 30 s), printing {@code REC <offset> <key> <value>} (tab-separated;
 * {@code <null>} for a missing key or value) for each. Exits 0 when it got there, 1 otherwise.
 */
public final class CompactedReader {
    static final long DEADLINE_MS = 30_000;
    static final String NULL = "<null>";

    private CompactedReader() {}

    public static void main(String[] args) {
        try {
            boolean reached = read(args[0], args[1], Integer.parseInt(args[2]), Long.parseLong(args[3]),
                    Long.parseLong(args[4]));
            System.out.flush();
            System.exit(reached ? 0 : 1);
        } catch (Throwable error) {
            error.printStackTrace();
            System.out.flush();
            System.exit(1);
        }
    }

    static boolean read(String bootstrap, String topic, int partition, long start, long last) {
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
            consumer.seek(tp, start);
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
        } finally {
            consumer.close();
        }
    }
}
