import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The load of bench/scripts/transactions.py (issue 38), with Apache Kafka's Java client (the
 * kafka-clients of the jars it is compiled against):
 *
 * <pre>
 * produce idempotent    BOOTSTRAP TOPIC RECORDS RECORD_BYTES BATCH_BYTES LINGER_MS
 * produce transactional BOOTSTRAP TOPIC RECORDS RECORD_BYTES BATCH_BYTES LINGER_MS TXN_RECORDS TXN_ID
 * consume read_committed|read_uncommitted BOOTSTRAP TOPIC
 * </pre>
 *
 * A producer sends asynchronously with acks=all; the transactional one wraps every TXN_RECORDS
 * records in a transaction (begin, send, commit, which flushes), as a transactional application
 * does. A consumer reads every partition of TOPIC from its start to the end offsets of its
 * isolation level. Each prints one line {@code RESULT records=<n> bytes=<n> seconds=<s>}.
 */
public final class TxnPerf {
    static final Duration POLL = Duration.ofMillis(500);
    static final long CONSUME_DEADLINE_MS = 600_000;

    private TxnPerf() {}

    public static void main(String[] args) throws Exception {
        if (args[0].equals("produce")) {
            produce(args);
        } else {
            consume(args[1], args[2], args[3]);
        }
    }

    static void produce(String[] args) throws Exception {
        boolean transactional = args[1].equals("transactional");
        String topic = args[3];
        long records = Long.parseLong(args[4]);
        int recordBytes = Integer.parseInt(args[5]);
        Properties props = new Properties();
        props.put("bootstrap.servers", args[2]);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("batch.size", args[6]);
        props.put("linger.ms", args[7]);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        int txnRecords = transactional ? Integer.parseInt(args[8]) : 0;
        if (transactional) {
            props.put("transactional.id", args[9]);
        }
        byte[] value = new byte[recordBytes];
        for (int i = 0; i < value.length; i++) {
            value[i] = (byte) ('a' + i % 26);
        }
        AtomicReference<Exception> failed = new AtomicReference<>();
        long started;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (transactional) {
                producer.initTransactions();
            }
            started = System.nanoTime();
            for (long sent = 0; sent < records; ) {
                if (transactional) {
                    producer.beginTransaction();
                }
                long end = transactional ? Math.min(records, sent + txnRecords) : records;
                for (; sent < end; sent++) {
                    producer.send(new ProducerRecord<>(topic, value), (meta, error) -> {
                        if (error != null) {
                            failed.compareAndSet(null, error);
                        }
                    });
                }
                if (transactional) {
                    producer.commitTransaction();
                }
            }
            producer.flush();
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        if (failed.get() != null) {
            throw failed.get();
        }
        System.out.printf("RESULT records=%d bytes=%d seconds=%.3f%n", records, records * recordBytes, seconds);
    }

    static void consume(String isolation, String bootstrap, String topic) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("isolation.level", isolation);
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long records = 0;
            long bytes = 0;
            long started = System.nanoTime();
            long deadline = System.currentTimeMillis() + CONSUME_DEADLINE_MS;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("not at " + end + " within " + CONSUME_DEADLINE_MS + " ms");
                }
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(POLL);
                records += batch.count();
                for (var record : batch) {
                    bytes += record.serializedValueSize();
                }
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.printf("RESULT records=%d bytes=%d seconds=%.3f%n", records, bytes, seconds);
        }
    }

    static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> entry : end.entrySet()) {
            if (consumer.position(entry.getKey()) < entry.getValue()) {
                return false;
            }
        }
        return true;
    }
}
