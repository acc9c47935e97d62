package skiff;

import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A producer that dies mid-transaction (issue 38's hanging transaction): {@code <bootstrap> <topic>
 * <transactional.id> <transaction.timeout.ms> <records>}. It commits one transaction of
 * {@code records} records, then begins a second, sends {@code records} more, and prints
 * {@code OPEN <partition> <offset of the open transaction's first record>}, then waits for the
 * test to SIGKILL it; the transaction stays open on the broker until its (long) timeout, or an
 * operator aborts it with kafka-transactions.sh.
 */
public final class TxnHang {
    private TxnHang() {}

    public static void main(String[] args) throws Exception {
        Properties props = Checks.common(args[0]);
        props.put("transactional.id", args[2]);
        props.put("transaction.timeout.ms", args[3]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        int records = Integer.parseInt(args[4]);
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        producer.initTransactions();
        producer.beginTransaction();
        for (int i = 0; i < records; i++) {
            producer.send(new ProducerRecord<>(args[1], 0, "committed-" + i, "committed-" + i));
        }
        producer.commitTransaction();
        producer.beginTransaction();
        RecordMetadata first = null;
        for (int i = 0; i < records; i++) {
            RecordMetadata sent = producer.send(new ProducerRecord<>(args[1], 0, "open-" + i, "open-" + i)).get();
            first = first == null ? sent : first;
        }
        System.out.println("OPEN " + first.partition() + " " + first.offset());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
