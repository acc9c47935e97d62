package skiff;

import java.util.Map;

import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;

/**
 * Sends every record without a partition of its own to the partition named by the producer setting
 * {@code skiff.partition}: lets Kafka's tools (kafka-console-producer, kafka-producer-perf-test),
 * which have no partition option, write one chosen partition
 * ({@code --command-property partitioner.class=skiff.FixedPartitioner skiff.partition=N}).
 */
public final class FixedPartitioner implements Partitioner {
    private int partition = -1;

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get("skiff.partition");
        if (value == null) {
            throw new IllegalArgumentException("skiff.FixedPartitioner needs the setting skiff.partition");
        }
        partition = Integer.parseInt(value.toString());
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes, Cluster cluster) {
        return partition;
    }

    @Override
    public void close() {}
}
