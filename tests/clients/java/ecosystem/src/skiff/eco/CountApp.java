package skiff.eco;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * A stateful Kafka Streams application as its users write one: the count of records per key of
 * the input topic in a RocksDB store named {@code counts}, logged to its changelog topic (which
 * Streams creates compacted), at_least_once. {@code <bootstrap> <application id> <input topic>
 * <state dir> <changelog topic configs, k=v comma-separated>}.
 *
 * <p>It prints {@code STATE <new state>} on each state change and {@code RESTORED <topic-partition>
 * <records>} when a restoration from the changelog ends; on {@code dump} read from standard input
 * it prints {@code STORE k=v ...} from an interactive query of the store (or {@code STORE-UNAVAILABLE
 * <why>} while it is rebalancing). SIGTERM closes it gracefully (a shutdown hook, as the docs
 * advise), which commits; it then prints {@code CLOSED}.
 */
public final class CountApp {
    static final String STORE = "counts";
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);

    private CountApp() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        // No record cache: every count update goes to the changelog, which the cleaner then has
        // many superseded values to remove from.
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // A member killed without leaving is dropped after this (Streams does not leave its group
        // on close either), so a restarted instance gets its tasks within seconds.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
                .groupByKey()
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE)
                        .withLoggingEnabled(topicConfigs(args.length > 4 ? args[4] : "")));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.setGlobalStateRestoreListener(new Restores());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(CLOSE_TIMEOUT);
            say("CLOSED");
        }));
        streams.start();
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String command = commands.readLine(); command != null; command = commands.readLine()) {
            if (command.trim().equals("dump")) {
                say(dump(streams));
            }
        }
    }

    static Map<String, String> topicConfigs(String list) {
        Map<String, String> configs = new TreeMap<>();
        for (String pair : list.split(",")) {
            if (!pair.isEmpty()) {
                String[] parts = pair.split("=", 2);
                configs.put(parts[0], parts[1]);
            }
        }
        return configs;
    }

    static String dump(KafkaStreams streams) {
        try {
            ReadOnlyKeyValueStore<String, Long> store = streams.store(
                    StoreQueryParameters.fromNameAndType(STORE, QueryableStoreTypes.<String, Long>keyValueStore()));
            StringBuilder line = new StringBuilder("STORE");
            try (KeyValueIterator<String, Long> all = store.all()) {
                while (all.hasNext()) {
                    KeyValue<String, Long> entry = all.next();
                    line.append(' ').append(entry.key).append('=').append(entry.value);
                }
            }
            return line.toString();
        } catch (InvalidStateStoreException unavailable) {
            return "STORE-UNAVAILABLE " + unavailable.getMessage().replace('\n', ' ');
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static final class Restores implements StateRestoreListener {
        @Override
        public void onRestoreStart(TopicPartition partition, String store, long start, long end) {
            say("RESTORING " + partition + " " + start + " " + end);
        }

        @Override
        public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long records) {}

        @Override
        public void onRestoreEnd(TopicPartition partition, String store, long total) {
            say("RESTORED " + partition + " " + total);
        }
    }
}
