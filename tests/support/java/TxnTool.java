// The Java client (the Apache Pulsar distribution's lib/) as a transactions peer
// (tests/support/java_txn.py compiles and runs it).
//
//   produce <serviceUrl> <topic>
//       stdin: one JSON step per line, in order: {"value": "<text>", "txn": null | <name>},
//       or {"end": <name>, "action": "commit" | "abort"}. A value with a transaction name
//       is sent in that transaction (opened on its first use, timeout 10 minutes); a null
//       one without. Every send is awaited before the next step. A transaction never
//       ended stays open when the tool exits (the client is not closed).
//       stdout: {"sent": <count>} at the end.
//   consume <serviceUrl> <topic> <idleSeconds>
//       Reads from the earliest with a new subscription (the default isolation: committed
//       only; Schema.BYTES, values taken as UTF-8) until nothing comes for <idleSeconds>;
//       prints {"value": "<text>"} per message.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;

public class TxnTool {
    private static final ObjectMapper JSON = new ObjectMapper();

    private TxnTool() {}

    public static void main(String[] args) throws Exception {
        int status = 0;
        try {
            PulsarClient client = PulsarClient.builder()
                    .serviceUrl(args[1])
                    .enableTransaction(true)
                    .build();
            if (args[0].equals("produce")) {
                produce(client, args[2]);
            } else if (args[0].equals("consume")) {
                consume(client, args[2], Integer.parseInt(args[3]));
            } else {
                throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            status = 2;
        }
        System.out.flush();
        Runtime.getRuntime().halt(status);
    }

    private static void produce(PulsarClient client, String topic) throws Exception {
        Producer<String> producer = client.newProducer(Schema.STRING)
                .topic(topic)
                .sendTimeout(0, TimeUnit.SECONDS)
                .enableBatching(false)
                .create();
        Map<String, Transaction> open = new HashMap<>();
        BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int sent = 0;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode step = JSON.readTree(line);
            if (step.has("end")) {
                Transaction txn = open.remove(step.get("end").asText());
                if (step.get("action").asText().equals("commit")) {
                    txn.commit().get(60, TimeUnit.SECONDS);
                } else {
                    txn.abort().get(60, TimeUnit.SECONDS);
                }
                continue;
            }
            String value = step.get("value").asText();
            JsonNode name = step.get("txn");
            if (name == null || name.isNull()) {
                producer.send(value);
            } else {
                Transaction txn = open.get(name.asText());
                if (txn == null) {
                    txn = client.newTransaction()
                            .withTransactionTimeout(10, TimeUnit.MINUTES)
                            .build()
                            .get(60, TimeUnit.SECONDS);
                    open.put(name.asText(), txn);
                }
                producer.newMessage(txn).value(value).send();
            }
            sent++;
        }
        System.out.println("{\"sent\": " + sent + "}");
    }

    private static void consume(PulsarClient client, String topic, int idleSeconds)
            throws Exception {
        Consumer<byte[]> consumer = client.newConsumer(Schema.BYTES)
                .topic(topic)
                .subscriptionName("txn-tool-" + System.nanoTime())
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe();
        while (true) {
            Message<byte[]> message = consumer.receive(idleSeconds, TimeUnit.SECONDS);
            if (message == null) {
                break;
            }
            String value = new String(message.getValue(), StandardCharsets.UTF_8);
            System.out.println(JSON.writeValueAsString(Map.of("value", value)));
            consumer.acknowledge(message);
        }
    }
}
