package skiff;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

/**
 * One member of a KIP-848 consumer group ({@code group.protocol=consumer}, or {@code classic} when
 * the fifth argument says so: a classic member of the same group) that runs until told to
 * stop, for tests that kill, restart and watch members: it prints one JSON object per line on
 * stdout and takes commands on stdin. Each poll's records are printed ({@code rec}: topic,
 * partition, offset, the wall-clock millisecond they were returned), then committed with
 * {@code commitSync} and the committed positions printed ({@code commit}); every assignment change
 * is printed ({@code assigned}: when, and the whole assignment after the callback).
 *
 * <p>Arguments: bootstrap, group id, subscription ({@code topics:a,b}, {@code pattern:RE2J} for a
 * broker-side {@link SubscriptionPattern}, {@code javapattern:regex} for the client-side
 * {@link Pattern}), the static instance id or {@code -}, optionally the group protocol
 * ({@code consumer}, the default, or {@code classic}: Kafka's default assignors, heartbeats every
 * second and a 10 s session).
 *
 * <p>Commands, one per line: {@code stop} (commit, close: leave the group, exit 0), {@code restart}
 * (close, then a new consumer with the same settings joins: a static member comes back with its
 * instance id), {@code describe} ({@code Admin.describeConsumerGroups} of the group, printed as
 * {@code describe}).
 */
public final class ConsumerProtocolMember {
    private static final Duration POLL = Duration.ofMillis(100);
    /** Commits of one poll's records before giving up (see {@link #commit}). */
    private static final int COMMIT_ATTEMPTS = 20;
    private static final long COMMIT_RETRY_MS = 50;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String group = args[1];
        String subscription = args[2];
        String instanceId = args[3].equals("-") ? null : args[3];
        String protocol = args.length > 4 ? args[4] : "consumer";
        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> readCommands(commands));
        reader.setDaemon(true);
        reader.start();
        try (Admin admin = Admin.create(Checks.common(bootstrap))) {
            boolean running = true;
            while (running) {
                KafkaConsumer<String, String> consumer = consumer(bootstrap, group, instanceId, protocol);
                subscribe(consumer, subscription);
                emit("{\"e\":\"start\"}");
                String command = consume(consumer, commands, admin, group);
                consumer.close();
                emit("{\"e\":\"closed\"}");
                running = command.equals("restart");
            }
        } catch (Exception error) {
            emit("{\"e\":\"error\",\"msg\":" + quote(Checks.oneLine(error)) + "}");
            System.exit(1);
        }
        System.exit(0);
    }

    private static void readCommands(LinkedBlockingQueue<String> commands) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                commands.add(line.trim());
            }
        } catch (Exception error) {
            // stdin gone: the test ended; stop like a `stop`.
        }
        commands.add("stop");
    }

    private static KafkaConsumer<String, String> consumer(
            String bootstrap, String group, String instanceId, String protocol) {
        Properties props = Clients.classicGroupProps(bootstrap, group);
        props.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            props.put("session.timeout.ms", "10000");
            props.put("heartbeat.interval.ms", "1000");
        }
        // A client-side pattern sees new topics at the next metadata refresh: every second here.
        props.put("metadata.max.age.ms", "1000");
        if (instanceId != null) {
            props.put("group.instance.id", instanceId);
        }
        return new KafkaConsumer<>(props);
    }

    private static void subscribe(KafkaConsumer<String, String> consumer, String subscription) {
        String[] kind = subscription.split(":", 2);
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                emit("{\"e\":\"assigned\",\"ms\":" + System.currentTimeMillis()
                        + ",\"parts\":" + partitionList(consumer.assignment()) + "}");
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                emit("{\"e\":\"lost\",\"parts\":" + partitionList(partitions) + "}");
            }
        };
        switch (kind[0]) {
            case "topics" -> consumer.subscribe(List.of(kind[1].split(",")), listener);
            case "pattern" -> consumer.subscribe(new SubscriptionPattern(kind[1]), listener);
            case "javapattern" -> consumer.subscribe(Pattern.compile(kind[1]), listener);
            default -> throw new IllegalArgumentException("subscription " + subscription);
        }
    }

    /** Polls, prints and commits until a command ends this consumer; returns that command. */
    private static String consume(
            KafkaConsumer<String, String> consumer,
            LinkedBlockingQueue<String> commands,
            Admin admin,
            String group) throws Exception {
        while (true) {
            String command = commands.poll();
            if (command != null) {
                if (command.equals("describe")) {
                    emit(describe(admin, group));
                    continue;
                }
                consumer.commitSync();
                return command;
            }
            ConsumerRecords<String, String> records = consumer.poll(POLL);
            if (records.isEmpty()) {
                continue;
            }
            long now = System.currentTimeMillis();
            Map<TopicPartition, Long> next = new LinkedHashMap<>();
            StringBuilder lines = new StringBuilder();
            for (ConsumerRecord<String, String> r : records) {
                lines.append("{\"e\":\"rec\",\"t\":").append(quote(r.topic()))
                        .append(",\"p\":").append(r.partition())
                        .append(",\"o\":").append(r.offset())
                        .append(",\"ms\":").append(now).append("}\n");
                next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
            }
            emitRaw(lines.toString());
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            next.forEach((tp, offset) -> offsets.put(tp, new OffsetAndMetadata(offset)));
            commit(consumer, offsets);
            List<String> committed = new ArrayList<>();
            next.forEach((tp, offset) -> committed.add(
                    "[" + quote(tp.topic()) + "," + tp.partition() + "," + offset + "]"));
            emit("{\"e\":\"commit\",\"parts\":[" + String.join(",", committed) + "]}");
        }
    }

    /**
     * Commits before the next poll, so a partition is never released with records read past its
     * commit. Kafka's coordinator refuses a commit whose member epoch is not the member's current
     * one (STALE_MEMBER_EPOCH, which kafka-clients surfaces as a CommitFailedException): a commit
     * sent just before a heartbeat that moved the member to a new epoch. The epoch the client then
     * holds is the new one, so the commit is sent again (bounded; each retry printed). A classic
     * member's commit during a rebalance is refused likewise (REBALANCE_IN_PROGRESS) and retried.
     */
    private static void commit(KafkaConsumer<String, String> consumer, Map<TopicPartition, OffsetAndMetadata> offsets)
            throws InterruptedException {
        for (int attempt = 1; ; attempt++) {
            try {
                consumer.commitSync(offsets);
                return;
            } catch (CommitFailedException | RebalanceInProgressException error) {
                if (attempt >= COMMIT_ATTEMPTS) {
                    throw error;
                }
                emit("{\"e\":\"commit_retry\",\"msg\":" + quote(Checks.oneLine(error)) + "}");
                Thread.sleep(COMMIT_RETRY_MS);
            }
        }
    }

    private static String describe(Admin admin, String group) throws Exception {
        ConsumerGroupDescription description =
                admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<String> members = new ArrayList<>();
        for (MemberDescription member : description.members()) {
            String target = member.targetAssignment()
                    .map(assignment -> partitionList(assignment.topicPartitions()))
                    .orElse("null");
            members.add("{\"id\":" + quote(member.consumerId())
                    + ",\"instance\":" + member.groupInstanceId().map(ConsumerProtocolMember::quote).orElse("null")
                    + ",\"client\":" + quote(member.clientId())
                    + ",\"host\":" + quote(member.host())
                    + ",\"epoch\":" + member.memberEpoch().map(String::valueOf).orElse("null")
                    + ",\"assignment\":" + partitionList(member.assignment().topicPartitions())
                    + ",\"target\":" + target + "}");
        }
        return "{\"e\":\"describe\",\"type\":" + quote(String.valueOf(description.type()))
                + ",\"state\":" + quote(String.valueOf(description.groupState()))
                + ",\"assignor\":" + quote(description.partitionAssignor())
                + ",\"epoch\":" + description.groupEpoch().map(String::valueOf).orElse("null")
                + ",\"members\":[" + String.join(",", members) + "]}";
    }

    private static String partitionList(Collection<TopicPartition> partitions) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            out.add("[" + quote(tp.topic()) + "," + tp.partition() + "]");
        }
        return "[" + String.join(",", out) + "]";
    }

    private static String quote(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static synchronized void emit(String line) {
        emitRaw(line + "\n");
    }

    private static synchronized void emitRaw(String lines) {
        System.out.print(lines);
        System.out.flush();
    }
}
