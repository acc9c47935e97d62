package skiff.flink;

import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Flink's KafkaSink with {@code EXACTLY_ONCE} in a MiniCluster (issue 38):
 * {@code <bootstrap> <topic> <records> <transactional id prefix>}. The numbers 0..records-1 go to
 * the topic through a map that fails the job once half-way (after checkpoints were taken); Flink
 * restarts from the last checkpoint, so the records written since then were in transactions that
 * must be aborted, and a read_committed reader must see every number exactly once. Prints
 * {@code JOB FINISHED} when the job (and its final checkpoint's commit) ended.
 */
public final class ExactlyOnceJob {
    static final long CHECKPOINT_INTERVAL_MS = 300;
    static final int RECORDS_PER_PAUSE = 20;
    static final long PAUSE_MS = 1;
    static final AtomicBoolean FAILED_ONCE = new AtomicBoolean();

    private ExactlyOnceJob() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        long records = Long.parseLong(args[2]);
        Configuration config = new Configuration();
        config.setString("restart-strategy.type", "fixed-delay");
        config.setString("restart-strategy.fixed-delay.attempts", "3");
        config.setString("restart-strategy.fixed-delay.delay", "1 s");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, config);
        env.enableCheckpointing(CHECKPOINT_INTERVAL_MS);
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(topic)
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(args[3])
                .setProperty("transaction.timeout.ms", "60000")
                .build();
        long failAt = records / 2;
        env.fromSequence(0, records - 1)
                .map(new Paced(failAt))
                .sinkTo(sink);
        env.execute("skiff-exactly-once");
        System.out.println("JOB FINISHED failed-once=" + FAILED_ONCE.get());
    }

    /** Slows the stream so checkpoints fall inside it, and fails the job once at {@code failAt}. */
    static final class Paced implements MapFunction<Long, String> {
        private static final long serialVersionUID = 1L;
        private final long failAt;

        Paced(long failAt) {
            this.failAt = failAt;
        }

        @Override
        public String map(Long value) throws Exception {
            if (value % RECORDS_PER_PAUSE == 0) {
                Thread.sleep(PAUSE_MS);
            }
            if (value == failAt && FAILED_ONCE.compareAndSet(false, true)) {
                throw new IllegalStateException("the injected failure at " + value);
            }
            return Long.toString(value);
        }
    }
}
