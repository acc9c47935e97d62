package skiff.eco;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The word count of Kafka Streams' own examples, {@code exactly_once_v2} (issue 38): lines of the
 * input topic split into words, counted per word, each count update written to the output topic
 * (key the word, value the count as a long). {@code <bootstrap> <application id> <input topic>
 * <output topic> <state dir> <replication factor of the internal topics>}.
 *
 * <p>It prints {@code STATE <new state>} on each state change; SIGTERM closes it (a shutdown hook)
 * and it then prints {@code CLOSED}. Every count it wrote is in a transaction with the input offsets
 * and the changelog update that produced it, so a reader of the output with read_committed sees
 * each word's counts rise one committed step at a time to the exact total, whatever broker dies.
 */
public final class WordCountEos {
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(30);
    static final int COMMIT_INTERVAL_MS = 200;

    private WordCountEos() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Integer.parseInt(args[5]));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, COMMIT_INTERVAL_MS);
        // A broker killed mid-run: requests to it time out and are retried elsewhere within seconds.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG), 10_000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[2])
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.setUncaughtExceptionHandler(error -> {
            say("UNCAUGHT " + error.toString().replace('\n', ' '));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(CLOSE_TIMEOUT);
            say("CLOSED");
        }));
        streams.start();
        Thread.currentThread().join();
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
