import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One rebalance measurement (issue 40, "Performance"), driven by bench/scripts/rebalance.py.
 *
 * A group of MEMBERS consumers (threads of this JVM) shares a topic of PARTITIONS partitions
 * while a producer sends RATE records a second spread over every partition. Each round a new
 * member joins; the round ends when the group consumes every partition again: each partition
 * has exactly one owner and has delivered a record to that owner after the owner got it and
 * after the round began, and the new member owns at least one partition. Then the new member
 * leaves and the group settles before the next round. Per round it prints one JSON line: the
 * join time and each original member's longest gap between two records it received during the
 * round (the "stop-the-world" a rebalance costs the members that were not moving).
 *
 * Usage: RebalancePerf BOOTSTRAP TOPIC PARTITIONS MEMBERS MODE ROUNDS HEARTBEAT_MS RATE
 * MODE: eager (classic, RangeAssignor), cooperative (classic, CooperativeStickyAssignor),
 * consumer (KIP-848, the broker's assignor). HEARTBEAT_MS sets the classic consumers'
 * heartbeat.interval.ms; the consumer protocol takes the broker's
 * group.consumer.heartbeat.interval.ms, which the driver sets to the same value.
 */
public class RebalancePerf {
    static final int NO_OWNER = -1;
    /** A round that has not settled by then is reported as timed out, never waited on forever. */
    static final long ROUND_TIMEOUT_NS = Duration.ofSeconds(180).toNanos();
    static final long SETTLE_TIMEOUT_NS = Duration.ofSeconds(300).toNanos();

    final String bootstrap;
    final String topic;
    final int partitions;
    final String mode;
    final int heartbeatMs;
    final String group;
    /** Per partition: the member that owns it (NO_OWNER between a revocation and an assignment). */
    final AtomicIntegerArray owner;
    /** Per partition: when its owner got it. */
    final AtomicLongArray ownedSince;
    /** Per partition: the member that last received one of its records, and when. */
    final AtomicIntegerArray deliveredTo;
    final AtomicLongArray deliveredAt;
    final List<Member> members = new ArrayList<>();

    RebalancePerf(String bootstrap, String topic, int partitions, String mode, int heartbeatMs) {
        this.bootstrap = bootstrap;
        this.topic = topic;
        this.partitions = partitions;
        this.mode = mode;
        this.heartbeatMs = heartbeatMs;
        this.group = "rebalance-" + mode + "-" + System.nanoTime();
        owner = new AtomicIntegerArray(partitions);
        ownedSince = new AtomicLongArray(partitions);
        deliveredTo = new AtomicIntegerArray(partitions);
        deliveredAt = new AtomicLongArray(partitions);
        for (int p = 0; p < partitions; p++) {
            owner.set(p, NO_OWNER);
            deliveredTo.set(p, NO_OWNER);
        }
    }

    Properties consumerProperties() {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("auto.offset.reset", "latest");
        props.put("max.poll.records", "500");
        props.put("fetch.max.wait.ms", "100");
        if (mode.equals("consumer")) {
            props.put("group.protocol", "consumer");
        } else {
            props.put("group.protocol", "classic");
            props.put("heartbeat.interval.ms", Integer.toString(heartbeatMs));
            props.put("session.timeout.ms", Integer.toString(Math.max(10_000, heartbeatMs * 3)));
            props.put("partition.assignment.strategy", mode.equals("eager")
                ? "org.apache.kafka.clients.consumer.RangeAssignor"
                : "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        }
        return props;
    }

    /** One consumer on its own thread. */
    final class Member implements Runnable, ConsumerRebalanceListener {
        final int id;
        final AtomicBoolean running = new AtomicBoolean(true);
        final AtomicLong lastRecordAt = new AtomicLong(0);
        /** The longest gap between two records since the last reset (a round's start). */
        final AtomicLong longestGapNs = new AtomicLong(0);
        final Thread thread;
        volatile int owned;

        Member(int id) {
            this.id = id;
            thread = new Thread(this, "member-" + id);
            thread.start();
        }

        @Override
        public void run() {
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProperties())) {
                consumer.subscribe(List.of(topic), this);
                while (running.get()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(50));
                    long now = System.nanoTime();
                    for (ConsumerRecord<byte[], byte[]> record : records) {
                        deliveredTo.set(record.partition(), id);
                        deliveredAt.set(record.partition(), now);
                    }
                    if (!records.isEmpty()) {
                        noteRecordAt(now);
                    }
                }
            } catch (RuntimeException e) {
                System.err.println("member " + id + ": " + e);
            }
        }

        void noteRecordAt(long now) {
            long last = lastRecordAt.getAndSet(now);
            if (last != 0) {
                longestGapNs.accumulateAndGet(now - last, Math::max);
            }
        }

        /** Starts a round: the gap from the round's start to this member's next record counts. */
        void resetGap(long roundStart) {
            lastRecordAt.set(roundStart);
            longestGapNs.set(0);
        }

        /** The longest gap so far, counting the one still open at `now`. */
        long gapAt(long now) {
            return Math.max(longestGapNs.get(), now - lastRecordAt.get());
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
            long now = System.nanoTime();
            for (TopicPartition tp : assigned) {
                owner.set(tp.partition(), id);
                ownedSince.set(tp.partition(), now);
            }
            owned += assigned.size();
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
            release(revoked);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> lost) {
            release(lost);
        }

        void release(Collection<TopicPartition> released) {
            for (TopicPartition tp : released) {
                owner.compareAndSet(tp.partition(), id, NO_OWNER);
            }
            owned -= released.size();
        }

        void stop() throws InterruptedException {
            running.set(false);
            thread.join();
        }
    }

    /** Every partition owned and delivering to its owner since it got it and since `since`. */
    boolean consumingAll(long since) {
        for (int p = 0; p < partitions; p++) {
            int o = owner.get(p);
            if (o == NO_OWNER || deliveredTo.get(p) != o) {
                return false;
            }
            long at = deliveredAt.get(p);
            if (at < since || at < ownedSince.get(p)) {
                return false;
            }
        }
        return true;
    }

    /** Nanoseconds from `since` until the group consumes every partition (and `joiner`, if any,
     * owns some), or -1 past `timeoutNs`. */
    long waitConsumingAll(long since, Member joiner, long timeoutNs) throws InterruptedException {
        while (System.nanoTime() - since < timeoutNs) {
            if ((joiner == null || joiner.owned > 0) && consumingAll(since)) {
                return System.nanoTime() - since;
            }
            Thread.sleep(5);
        }
        return -1;
    }

    static Thread producer(String bootstrap, String topic, int partitions, int rate, AtomicBoolean running) {
        Thread thread = new Thread(() -> {
            Properties props = new Properties();
            props.put("bootstrap.servers", bootstrap);
            props.put("acks", "1");
            props.put("linger.ms", "5");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            byte[] value = new byte[100];
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
                long start = System.nanoTime();
                long sent = 0;
                while (running.get()) {
                    long due = (System.nanoTime() - start) * rate / 1_000_000_000L;
                    for (; sent < due; sent++) {
                        producer.send(new ProducerRecord<>(topic, (int) (sent % partitions), null, value));
                    }
                    Thread.sleep(1);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "producer");
        thread.start();
        return thread;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        String mode = args[4];
        int rounds = Integer.parseInt(args[5]);
        int heartbeatMs = Integer.parseInt(args[6]);
        int rate = Integer.parseInt(args[7]);
        RebalancePerf perf = new RebalancePerf(bootstrap, topic, partitions, mode, heartbeatMs);
        AtomicBoolean producing = new AtomicBoolean(true);
        Thread producer = producer(bootstrap, topic, partitions, rate, producing);
        long start = System.nanoTime();
        for (int i = 0; i < size; i++) {
            perf.members.add(perf.new Member(i));
        }
        long formed = perf.waitConsumingAll(start, null, SETTLE_TIMEOUT_NS);
        System.out.printf("{\"event\":\"formed\",\"members\":%d,\"ms\":%.1f}%n", size, formed / 1e6);
        if (formed >= 0) {
            perf.runRounds(size, rounds);
        }
        producing.set(false);
        producer.join();
        for (Member member : perf.members) {
            member.stop();
        }
    }

    void runRounds(int size, int rounds) throws InterruptedException {
        for (int round = 0; round < rounds; round++) {
            Thread.sleep(2 * heartbeatMs);
            long roundStart = System.nanoTime();
            for (Member member : members) {
                member.resetGap(roundStart);
            }
            Member joiner = new Member(size + round);
            long joinNs = waitConsumingAll(roundStart, joiner, ROUND_TIMEOUT_NS);
            long end = System.nanoTime();
            long longestGap = 0;
            for (Member member : members) {
                longestGap = Math.max(longestGap, member.gapAt(end));
            }
            joiner.stop();
            long leaveStart = System.nanoTime();
            long leaveNs = waitConsumingAll(leaveStart, null, SETTLE_TIMEOUT_NS);
            System.out.printf("{\"event\":\"round\",\"round\":%d,\"join_ms\":%.1f,\"longest_gap_ms\":%.1f,"
                + "\"leave_ms\":%.1f}%n", round, joinNs / 1e6, longestGap / 1e6, leaveNs / 1e6);
            if (joinNs < 0 || leaveNs < 0) {
                return;
            }
        }
    }
}
