package skiff;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * kafka-clients 4.x's producer (acks=all, idempotent) writing the records of a file,
 * one {@code key<TAB>value} a line, to one partition. Prints {@code ACK <offset>} for each record in
 * order, or throws (a non-zero exit under skiff.ToolRunner) when one is not acknowledged.
 *
 * <p>Arguments: bootstrap, topic, partition, file.
 */
public final class PartitionProducer {
    private PartitionProducer() {}

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int partition = Integer.parseInt(args[2]);
        List<String> lines = Files.readAllLines(Paths.get(args[3]), StandardCharsets.UTF_8);
        Properties props = Checks.common(args[0]);
        props.remove("default.api.timeout.ms");
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (String line : lines) {
                String[] fields = line.split("\t", 2);
                sent.add(producer.send(new ProducerRecord<>(topic, partition, fields[0], fields[1])));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                System.out.println("ACK " + future.get(Checks.API_TIMEOUT_MS, TimeUnit.MILLISECONDS).offset());
            }
        }
    }
}
