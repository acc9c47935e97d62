package skiff.legacy;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * An old kafka-clients release on one topic of a cluster, one step per run (uses only API that 0.9
 * already had, so it compiles against every legacy release):
 *
 * <ul>
 *   <li>{@code produce <bootstrap> <topic> <partition> <file>}: an acks=all producer writes the
 *       file's {@code key<TAB>value} lines to the partition and prints {@code ACK <offset>} for each;
 *   <li>{@code consume <bootstrap> <topic> <partitions, comma-separated> <count>}: a consumer
 *       assigned those partitions reads from offset 0 until it has {@code count} records (or 30 s),
 *       printing {@code REC <partition> <offset> <key> <value>} (tab-separated) for each.
 * </ul>
 *
 * Exits 0 when the step finished, 1 (after a stack trace) when it failed.
 */
public final class PartitionClient {
    static final long DEADLINE_MS = 30_000;

    private PartitionClient() {}

    public static void main(String[] args) {
        try {
            if (args[0].equals("produce")) {
                produce(args[1], args[2], Integer.parseInt(args[3]), args[4]);
            } else {
                consume(args[1], args[2], args[3].split(","), Integer.parseInt(args[4]));
            }
            System.out.flush();
            System.exit(0);
        } catch (Throwable error) {
            error.printStackTrace();
            System.out.flush();
            System.exit(1);
        }
    }

    static void produce(String bootstrap, String topic, int partition, String file) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("linger.ms", "5");
        props.put("request.timeout.ms", "15000");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        KafkaProducer<String, String> producer = new KafkaProducer<String, String>(props);
        try {
            BufferedReader lines = new BufferedReader(new InputStreamReader(new FileInputStream(file), "UTF-8"));
            try {
                for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                    String[] fields = line.split("\t", 2);
                    sent.add(producer.send(new ProducerRecord<String, String>(topic, partition, fields[0], fields[1])));
                }
            } finally {
                lines.close();
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                System.out.println("ACK " + future.get(30, TimeUnit.SECONDS).offset());
            }
        } finally {
            producer.close();
        }
    }

    static void consume(String bootstrap, String topic, String[] partitions, int count) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        // No group.id: partitions are assigned. 0.9/0.10.0 consumers still look up the coordinator
        // of the empty group on every poll (FindCoordinator v0 with an empty key).
        props.put("enable.auto.commit", "false");
        props.put("request.timeout.ms", "15000");
        props.put("session.timeout.ms", "10000");
        props.put("check.crcs", "true");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<String, String>(props);
        try {
            List<TopicPartition> assigned = new ArrayList<>();
            for (String partition : partitions) {
                assigned.add(new TopicPartition(topic, Integer.parseInt(partition)));
            }
            consumer.assign(assigned);
            for (TopicPartition tp : assigned) {
                consumer.seek(tp, 0);
            }
            int seen = 0;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(200)) {
                    System.out.println("REC\t" + record.partition() + "\t" + record.offset() + "\t"
                            + (record.key() == null ? "null" : record.key()) + "\t" + record.value());
                    seen++;
                }
            }
        } finally {
            consumer.close();
        }
    }
}
