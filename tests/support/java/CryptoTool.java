// The Java client (the Apache Pulsar distribution's lib/) as an end-to-end encryption peer
// (tests/support/java_crypto.py compiles and runs it).
//
//   produce <serviceUrl>
//       stdin: one JSON job per line: {"topic", "keys": {"<name>": "<public key URL>", ...},
//       "batched": bool, "compression": "NONE"|"LZ4"|"ZLIB"|"ZSTD"|"SNAPPY",
//       "chunkMaxSize": int or null (chunking on, at most that many bytes a chunk; batching
//       must be off, as the Java producer requires), "messages": [{"value": "<base64>",
//       "key": str or null, "properties": {str: str} or null}, ...]}.
//       One producer per job (defaultCryptoKeyReader(Map), every name added as an encryption
//       key); all are created at once, then every message is sent asynchronously.
//       stdout: {"job": <index>, "topic": t, "id": "<message id>"} per message, jobs and
//       messages in order (several jobs may have the same topic).
//   consume <serviceUrl> <topic> <count> <privateKeyUrl>
//       Reads <count> messages from the earliest with defaultCryptoKeyReader(url) and
//       cryptoFailureAction FAIL; prints {"value": "<base64>", "keys": [names]} per message.
//       Exits 3 when fewer than <count> messages decrypt within 20 s.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerCryptoFailureAction;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerBuilder;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.TypedMessageBuilder;

public class CryptoTool {
    private static final ObjectMapper JSON = new ObjectMapper();

    private CryptoTool() {}

    public static void main(String[] args) throws Exception {
        int status;
        try {
            PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build();
            if (args[0].equals("produce")) {
                produce(client);
                status = 0;
            } else if (args[0].equals("consume")) {
                status = consume(client, args[2], Integer.parseInt(args[3]), args[4]);
            } else {
                throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            status = 1;
        }
        // Closing the client would stop its event loops, which takes seconds.
        System.out.flush();
        System.exit(status);
    }

    static void produce(PulsarClient client) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<JsonNode> jobs = new ArrayList<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (!line.isBlank()) {
                jobs.add(JSON.readTree(line));
            }
        }
        List<CompletableFuture<Producer<byte[]>>> creating = new ArrayList<>();
        for (JsonNode job : jobs) {
            creating.add(builder(client, job).createAsync());
        }
        List<Producer<byte[]>> producers = new ArrayList<>();
        for (CompletableFuture<Producer<byte[]>> producer : creating) {
            producers.add(producer.get(60, TimeUnit.SECONDS));
        }
        List<List<CompletableFuture<MessageId>>> sent = new ArrayList<>();
        for (int j = 0; j < jobs.size(); j++) {
            List<CompletableFuture<MessageId>> ids = new ArrayList<>();
            for (JsonNode message : jobs.get(j).get("messages")) {
                ids.add(message(producers.get(j), message).sendAsync());
            }
            producers.get(j).flushAsync();
            sent.add(ids);
        }
        for (int j = 0; j < jobs.size(); j++) {
            for (CompletableFuture<MessageId> id : sent.get(j)) {
                ObjectNode out = JSON.createObjectNode();
                out.put("job", j);
                out.put("topic", jobs.get(j).get("topic").asText());
                out.put("id", String.valueOf(id.get(60, TimeUnit.SECONDS)));
                System.out.println(JSON.writeValueAsString(out));
            }
        }
    }

    static ProducerBuilder<byte[]> builder(PulsarClient client, JsonNode job) {
        Map<String, String> keys = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = job.get("keys").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> entry = it.next();
            keys.put(entry.getKey(), entry.getValue().asText());
        }
        ProducerBuilder<byte[]> builder = client.newProducer()
            .topic(job.get("topic").asText())
            .enableBatching(job.get("batched").asBoolean())
            .batchingMaxMessages(1000)
            .batchingMaxPublishDelay(20, TimeUnit.MILLISECONDS)
            .compressionType(CompressionType.valueOf(job.get("compression").asText()))
            .defaultCryptoKeyReader(keys);
        JsonNode chunk = job.get("chunkMaxSize");
        if (chunk != null && !chunk.isNull()) {
            builder = builder.enableChunking(true).chunkMaxMessageSize(chunk.asInt());
        }
        for (String name : keys.keySet()) {
            builder = builder.addEncryptionKey(name);
        }
        return builder;
    }

    static TypedMessageBuilder<byte[]> message(Producer<byte[]> producer, JsonNode message) {
        TypedMessageBuilder<byte[]> out = producer.newMessage()
            .value(Base64.getDecoder().decode(message.get("value").asText()));
        JsonNode key = message.get("key");
        if (key != null && !key.isNull()) {
            out = out.key(key.asText());
        }
        JsonNode properties = message.get("properties");
        if (properties != null && !properties.isNull()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = properties.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> entry = it.next();
                out = out.property(entry.getKey(), entry.getValue().asText());
            }
        }
        return out;
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
                ObjectNode out = JSON.createObjectNode();
                out.put("value", Base64.getEncoder().encodeToString(message.getValue()));
                var names = out.putArray("keys");
                if (message.getEncryptionCtx().isPresent()) {
                    for (String name : message.getEncryptionCtx().get().getKeys().keySet()) {
                        names.add(name);
                    }
                }
                System.out.println(JSON.writeValueAsString(out));
                consumer.acknowledge(message);
            }
        }
        return 0;
    }
}
