package skiff;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An idempotent acks=all producer of kafka-clients 4.x (InitProducerId, then Produce with producer
 * id, epoch and sequences), once per codec, each into its own topic; then a consumer reads every
 * record back and compares offset, key, value, timestamp and header exactly, and nothing more.
 *
 * <p>Arguments: bootstrap, topic prefix, records per codec.
 */
public final class IdempotentCodecs {
    static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int count = Integer.parseInt(args[2]);
        Checks checks = new Checks();
        try (Admin admin = Admin.create(Checks.common(bootstrap))) {
            List<NewTopic> topics = new ArrayList<>();
            for (String codec : CODECS) {
                topics.add(new NewTopic(prefix + "-" + codec, 1, (short) 1));
            }
            admin.createTopics(topics).all().get();
        }
        for (String codec : CODECS) {
            checks.run("idempotent_" + codec, () -> roundTrip(bootstrap, prefix + "-" + codec, codec, count));
        }
        System.exit(checks.exitCode());
    }

    static void roundTrip(String bootstrap, String topic, String codec, int count) throws Exception {
        Properties props = Checks.common(bootstrap);
        props.remove("default.api.timeout.ms");
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("max.in.flight.requests.per.connection", "5");
        props.put("compression.type", codec);
        props.put("linger.ms", "5");
        props.put("batch.size", "16384");
        props.put("delivery.timeout.ms", "30000");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        long baseTimestamp = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            // Two rounds with a flush between them: the second round continues the sequence numbers
            // of the same producer id on a partition that already has batches.
            for (int round = 0; round < 2; round++) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                int from = round * count / 2;
                int to = round == 0 ? count / 2 : count;
                for (int i = from; i < to; i++) {
                    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, 0, baseTimestamp + i,
                            Checks.key(codec, i), Checks.value(codec, i, 200));
                    record.headers().add("index", Integer.toString(i).getBytes());
                    sent.add(producer.send(record));
                }
                producer.flush();
                for (int i = from; i < to; i++) {
                    Checks.equal((long) i, sent.get(i - from).get().offset(), "offset of record " + i);
                }
            }
        }

        Properties consumerProps = Checks.common(bootstrap);
        consumerProps.put("key.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps.put("value.deserializer", ByteArrayDeserializer.class.getName());
        consumerProps.put("enable.auto.commit", "false");
        consumerProps.put("check.crcs", "true");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            List<ConsumerRecord<byte[], byte[]>> seen = new ArrayList<>();
            long deadline = System.currentTimeMillis() + Checks.POLL_DEADLINE_MS;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(seen::add);
            }
            // One more poll: a record beyond the expected ones would be a duplicate write.
            consumer.poll(Duration.ofMillis(300)).forEach(seen::add);
            Checks.equal(count, seen.size(), "records read back");
            for (int i = 0; i < count; i++) {
                ConsumerRecord<byte[], byte[]> record = seen.get(i);
                Checks.equal((long) i, record.offset(), "offset");
                Checks.check(Arrays.equals(Checks.key(codec, i), record.key()), "key of record " + i);
                Checks.check(Arrays.equals(Checks.value(codec, i, 200), record.value()), "value of record " + i);
                Checks.equal(baseTimestamp + i, record.timestamp(), "timestamp of record " + i);
                Header header = record.headers().lastHeader("index");
                Checks.check(header != null && Arrays.equals(Integer.toString(i).getBytes(), header.value()),
                        "header of record " + i);
            }
            Checks.equal((long) count, consumer.endOffsets(List.of(partition)).get(partition), "end offset");
        }
    }
}
