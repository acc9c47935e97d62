package skiff;

import java.util.Properties;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** The producer and the group consumer the test programs share, with bounded timeouts (Checks). */
final class Clients {
    private Clients() {}

    /** kafka-clients 4.x defaults: acks=all and idempotence on. */
    static KafkaProducer<String, String> stringProducer(String bootstrap) {
        Properties props = Checks.common(bootstrap);
        props.remove("default.api.timeout.ms"); // a consumer/admin setting: the producer warns on it
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(props);
    }

    /** A member of {@code group} on the classic protocol (JoinGroup/SyncGroup), committing by hand. */
    static Properties classicGroupProps(String bootstrap, String group) {
        Properties props = Checks.common(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", "classic");
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        return props;
    }

    static KafkaConsumer<String, String> classicGroupConsumer(String bootstrap, String group) {
        return new KafkaConsumer<>(classicGroupProps(bootstrap, group));
    }
}
