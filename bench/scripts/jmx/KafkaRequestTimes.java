// Reads Apache Kafka's request-time histograms over JMX for `skiff-bench latency --service-time-jmx`
// (bench/src/latency/service_time.rs): connects once to host:port (the broker's JMX_PORT), then
// answers every line on stdin with one JSON line
//   {"Produce":{"TotalTimeMs":{"Count":..,"Mean":..,"50thPercentile":..,...},...},"Fetch":{...}}
// for the request names given after the address. JDK classes only (javax.management.remote).
//
// Usage: javac -d DIR KafkaRequestTimes.java && java -cp DIR KafkaRequestTimes 127.0.0.1:9999 Produce Fetch

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Locale;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.InstanceNotFoundException;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class KafkaRequestTimes {
    // The parts of TotalTimeMs (kafka.network.RequestChannel's updateRequestMetrics), and it.
    static final String[] HISTOGRAMS = {
        "TotalTimeMs", "RemoteTimeMs", "LocalTimeMs", "RequestQueueTimeMs",
        "ResponseQueueTimeMs", "ResponseSendTimeMs", "ThrottleTimeMs",
    };
    static final String[] ATTRIBUTES = {
        "Count", "Mean", "50thPercentile", "99thPercentile", "999thPercentile", "Max",
    };

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: KafkaRequestTimes host:port Request...");
            System.exit(2);
        }
        JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + args[0] + "/jmxrmi");
        try (JMXConnector connector = JMXConnectorFactory.connect(url)) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            while (in.readLine() != null) {
                System.out.println(read(server, args));
                System.out.flush();
            }
        }
    }

    static String read(MBeanServerConnection server, String[] args) throws Exception {
        StringBuilder json = new StringBuilder("{");
        for (int r = 1; r < args.length; r++) {
            if (r > 1) json.append(',');
            json.append('"').append(args[r]).append("\":{");
            boolean first = true;
            for (String histogram : HISTOGRAMS) {
                ObjectName name = new ObjectName(
                    "kafka.network:type=RequestMetrics,name=" + histogram + ",request=" + args[r]);
                AttributeList values;
                try {
                    values = server.getAttributes(name, ATTRIBUTES);
                } catch (InstanceNotFoundException absent) {
                    continue;
                }
                if (!first) json.append(',');
                first = false;
                json.append('"').append(histogram).append("\":{");
                boolean firstValue = true;
                for (Object item : values) {
                    Attribute attribute = (Attribute) item;
                    if (!firstValue) json.append(',');
                    firstValue = false;
                    Number value = (Number) attribute.getValue();
                    json.append('"').append(attribute.getName()).append("\":")
                        .append(String.format(Locale.ROOT, "%s", finite(value)));
                }
                json.append('}');
            }
            json.append('}');
        }
        return json.append('}').toString();
    }

    // JSON has no NaN: an empty histogram's Mean is 0.
    static Number finite(Number value) {
        double d = value.doubleValue();
        return Double.isNaN(d) || Double.isInfinite(d) ? Double.valueOf(0) : value;
    }
}
