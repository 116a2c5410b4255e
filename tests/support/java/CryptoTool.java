// The Java client (the Apache Pulsar distribution's lib/) as an end-to-end encryption peer.
//
//   produce <serviceUrl> <topic> <batched> <compression> <keysJson>
//       stdin: one base64 value per line; keysJson: {"name": "<public key URL>", ...};
//       every name is added as an encryption key (defaultCryptoKeyReader(Map)).
//       Prints {"id": "<message id>"} per value.
//   consume <serviceUrl> <topic> <count> <privateKeyUrl>
//       Reads <count> messages from the earliest with defaultCryptoKeyReader(url) and
//       cryptoFailureAction FAIL; prints {"value": "<base64>", "keys": [names]} per message.
//       Exits 3 when fewer than <count> messages decrypt within 20 s.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerCryptoFailureAction;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

public class CryptoTool {
    public static void main(String[] args) throws Exception {
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            if (args[0].equals("produce")) {
                produce(client, args[2], Boolean.parseBoolean(args[3]), args[4], parseMap(args[5]));
            } else if (args[0].equals("consume")) {
                System.exit(consume(client, args[2], Integer.parseInt(args[3]), args[4]));
            } else {
                throw new IllegalArgumentException("unknown command " + args[0]);
            }
        }
    }

    static void produce(PulsarClient client, String topic, boolean batched, String codec,
                        Map<String, String> keys) throws Exception {
        ProducerBuilder<byte[]> builder = client.newProducer()
            .topic(topic)
            .enableBatching(batched)
            .batchingMaxMessages(1000)
            .batchingMaxPublishDelay(20, TimeUnit.MILLISECONDS)
            .compressionType(CompressionType.valueOf(codec))
            .defaultCryptoKeyReader(keys);
        for (String name : keys.keySet()) {
            builder = builder.addEncryptionKey(name);
        }
        List<CompletableFuture<MessageId>> sent = new ArrayList<>();
        try (Producer<byte[]> producer = builder.create()) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                sent.add(producer.sendAsync(Base64.getDecoder().decode(line)));
            }
            producer.flush();
            for (CompletableFuture<MessageId> id : sent) {
                System.out.println("{\"id\": \"" + id.get(30, TimeUnit.SECONDS) + "\"}");
            }
        }
    }

    static int consume(PulsarClient client, String topic, int count, String privateKeyUrl)
            throws Exception {
        try (Consumer<byte[]> consumer = client.newConsumer()
                .topic(topic)
                .subscriptionName("crypto-tool-" + System.nanoTime())
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .defaultCryptoKeyReader(privateKeyUrl)
                .cryptoFailureAction(ConsumerCryptoFailureAction.FAIL)
                .subscribe()) {
            for (int i = 0; i < count; i++) {
                Message<byte[]> message = consumer.receive(20, TimeUnit.SECONDS);
                if (message == null) {
                    System.err.println("only " + i + " of " + count + " messages decrypted");
                    return 3;
                }
                StringBuilder names = new StringBuilder();
                if (message.getEncryptionCtx().isPresent()) {
                    for (String name : message.getEncryptionCtx().get().getKeys().keySet()) {
                        names.append(names.length() == 0 ? "\"" : ", \"").append(name).append('"');
                    }
                }
                System.out.println("{\"value\": \"" + Base64.getEncoder().encodeToString(message.getValue())
                    + "\", \"keys\": [" + names + "]}");
                consumer.acknowledge(message);
            }
        }
        return 0;
    }

    // A flat JSON object of strings (key names and URLs hold no quotes or escapes).
    static Map<String, String> parseMap(String json) {
        Map<String, String> out = new LinkedHashMap<>();
        String body = json.trim();
        body = body.substring(1, body.length() - 1).trim();
        if (body.isEmpty()) {
            return out;
        }
        for (String pair : body.split(",\\s*\"")) {
            String[] kv = pair.split("\"\\s*:\\s*\"", 2);
            out.put(kv[0].replace("\"", "").trim(), kv[1].replace("\"", "").trim());
        }
        return out;
    }
}
