package skiff;

import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

import org.apache.kafka.common.security.ssl.SslPrincipalMapper;

/**
 * What Apache Kafka names an SSL client, for tests/clients/test_ssl_principal.py to compare with
 * {@code skiff ssl-principal}. Each standard-input line is {@code rules TAB CERT TAB pem-path} or
 * {@code rules TAB NAME TAB rfc2253-name}; each output line is the subject's RFC 2253 name as the JDK
 * gives it ({@code X509Certificate.getSubjectX500Principal().getName()}, what Kafka's default principal
 * builder maps), then TAB and the user name Kafka's {@link SslPrincipalMapper} makes of it, both as
 * UTF-8 hex, or instead of the user name {@code NO_MATCH} (no rule applies), {@code INVALID_RULES}
 * (the constructor refuses the rules) or {@code FAILED} (applying a rule threw).
 */
public final class SslPrincipalNames {
    private SslPrincipalNames() {}

    public static void main(String[] args) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", 3);
            String subject;
            if (parts[1].equals("CERT")) {
                try (InputStream pem = Files.newInputStream(Paths.get(parts[2]))) {
                    X509Certificate certificate = (X509Certificate) factory.generateCertificate(pem);
                    subject = certificate.getSubjectX500Principal().getName();
                }
            } else {
                subject = parts[2];
            }
            System.out.println(hex(subject) + "\t" + user(parts[0], subject));
        }
    }

    private static String user(String rules, String subject) {
        SslPrincipalMapper mapper;
        try {
            mapper = SslPrincipalMapper.fromRules(rules);
        } catch (IllegalArgumentException refused) {
            return "INVALID_RULES";
        }
        try {
            return hex(mapper.getName(subject));
        } catch (SslPrincipalMapper.NoMatchingRule none) {
            return "NO_MATCH";
        } catch (Exception | Error failed) {
            return "FAILED";
        }
    }

    private static String hex(String text) {
        StringBuilder out = new StringBuilder();
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }
}
