// The Java client side of the schema interop tests: produce to or consume from topics with
// typed Pulsar schemas, values as JSON lines (tests/support/java_client.py compiles and runs it).
//
//   SchemaTool produce <serviceUrl> batch|nobatch
//       stdin: one JSON object per message: {"topic", "schema": <spec>, "value"} (and "key"
//       for KEY_VALUE; "messageKey" sets the message key of any other schema). One producer
//       per topic and schema, made at the first line that names them (and closed at the end,
//       so a topic can get messages of two schema versions in one run).
//       stdout: {"sent": n}
//   SchemaTool consume <serviceUrl> <jobs> <timeout seconds>
//       jobs: a JSON list of {"topic", "schema": <spec>, "count"}; each topic is read from the
//       earliest by a consumer of that schema on a new subscription.
//       stdout: one JSON object per message: {"topic", "value", "messageKey",
//       "schemaVersion"}.
//
// A schema spec is JSON: a primitive's name ("INT8" ... "LOCAL_DATE_TIME", "STRING",
// "BYTES", "BOOLEAN"), "AUTO_CONSUME", "PROTOBUF_NATIVE" (the Order message built below), or
// {"type": "AVRO"|"JSON", "schema": <Avro schema>}, {"type": "AVRO"|"JSON", "pojo": "Order"}
// (Schema.AVRO(Order.class) of the Order or Event class below), {"type": "STRING", "charset":
// <name>} (new StringSchema(charset)) or
// {"type": "KEY_VALUE", "key": <spec>, "value": <spec>, "encoding": "INLINE"|"SEPARATED"}.
//
// Values in JSON: numbers for INT*, FLOAT, DOUBLE (or "NaN", "Infinity", "-Infinity"), DATE,
// TIME and TIMESTAMP (milliseconds since the epoch, java.util.Date#getTime); ISO-8601 text
// for INSTANT, LOCAL_DATE, LOCAL_TIME, LOCAL_DATE_TIME; Base64 for BYTES; AVRO records as
// plain JSON objects (unions as their value, bytes as Base64, logical types as their
// underlying numbers); JSON values as the JSON itself; POJOs as Jackson reads and prints them
// (java.time fields as ISO-8601 text); PROTOBUF_NATIVE in protobuf's JSON mapping.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumDescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumValueDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Message;
import com.google.protobuf.TimestampProto;
import com.google.protobuf.util.JsonFormat;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.sql.Time;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.Date;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericEnumSymbol;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.IndexedRecord;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.TypedMessageBuilder;
import org.apache.pulsar.client.api.schema.GenericObject;
import org.apache.pulsar.client.api.schema.SchemaDefinition;
import org.apache.pulsar.client.api.schema.SchemaReader;
import org.apache.pulsar.client.impl.schema.ProtobufNativeSchemaUtils;
import org.apache.pulsar.client.impl.schema.StringSchema;
import org.apache.pulsar.common.schema.KeyValue;
import org.apache.pulsar.common.schema.KeyValueEncodingType;
import org.apache.pulsar.common.schema.SchemaInfo;
import org.apache.pulsar.common.schema.SchemaType;

public final class SchemaTool {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    /** JSON lines into POJOs (java.time fields from ISO-8601 text). */
    private static final ObjectMapper POJO_MAPPER = new ObjectMapper().findAndRegisterModules()
        .disable(com.fasterxml.jackson.databind.SerializationFeature.WRITE_DATES_AS_TIMESTAMPS);

    private SchemaTool() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            throw new IllegalArgumentException(
                "usage: produce <url> batch|nobatch | consume <url> <jobs> <timeout>");
        }
        int status = 0;
        try {
            run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            status = 1;
        }
        // The client's timer and executor threads would keep the JVM up for seconds.
        System.out.flush();
        System.exit(status);
    }

    static void run(String[] args) throws Exception {
        // Not closed: its event loops' graceful shutdown takes 2 s; the producers and
        // consumers are, and then the JVM exits.
        PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build();
        switch (args[0]) {
            case "produce":
                produce(client, !args[2].equals("nobatch"));
                break;
            case "consume":
                consume(client, JSON.readTree(args[2]), Integer.parseInt(args[3]));
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    // ------------------------------------------------------------------ schemas

    /** The Java schema a spec names. */
    static Schema<?> schema(JsonNode spec) {
        if (spec.isTextual()) {
            switch (spec.asText()) {
                case "INT8": return Schema.INT8;
                case "INT16": return Schema.INT16;
                case "INT32": return Schema.INT32;
                case "INT64": return Schema.INT64;
                case "FLOAT": return Schema.FLOAT;
                case "DOUBLE": return Schema.DOUBLE;
                case "BOOLEAN": return Schema.BOOL;
                case "STRING": return Schema.STRING;
                case "BYTES": return Schema.BYTES;
                case "DATE": return Schema.DATE;
                case "TIME": return Schema.TIME;
                case "TIMESTAMP": return Schema.TIMESTAMP;
                case "INSTANT": return Schema.INSTANT;
                case "LOCAL_DATE": return Schema.LOCAL_DATE;
                case "LOCAL_TIME": return Schema.LOCAL_TIME;
                case "LOCAL_DATE_TIME": return Schema.LOCAL_DATE_TIME;
                case "AUTO_CONSUME": return Schema.AUTO_CONSUME();
                case "PROTOBUF_NATIVE": return Schema.AUTO_PRODUCE_BYTES(
                    Schema.getSchema(protobufNativeInfo()));
                default: throw new IllegalArgumentException("unknown schema " + spec);
            }
        }
        String type = spec.get("type").asText();
        switch (type) {
            case "STRING":  // {"type": "STRING", "charset": "UTF-16"}: the __charset property
                return new StringSchema(Charset.forName(spec.get("charset").asText()));
            case "AVRO":
                if (spec.has("pojo")) {
                    return Schema.AVRO(pojoClass(spec));
                }
                return Schema.AVRO(SchemaDefinition.builder()
                    .withJsonDef(spec.get("schema").toString()).build());
            case "JSON":
                if (spec.has("pojo")) {
                    return Schema.JSON(pojoClass(spec));
                }
                // Values are Jackson trees, written and read as they are.
                return Schema.JSON(SchemaDefinition.<JsonNode>builder()
                    .withJsonDef(spec.get("schema").toString())
                    .withSchemaReader(new TreeReader()).withSchemaWriter(SchemaTool::jsonBytes)
                    .build());
            case "KEY_VALUE":
                return Schema.KeyValue(schema(spec.get("key")), schema(spec.get("value")),
                    KeyValueEncodingType.valueOf(spec.get("encoding").asText()));
            default:
                throw new IllegalArgumentException("unknown schema " + spec);
        }
    }

    static byte[] jsonBytes(JsonNode tree) {
        return tree.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** JSON values as Jackson trees. */
    static final class TreeReader implements SchemaReader<JsonNode> {
        @Override
        public JsonNode read(byte[] bytes, int offset, int length) {
            try {
                return JSON.readTree(new String(bytes, offset, length, StandardCharsets.UTF_8));
            } catch (Exception e) {
                throw new IllegalArgumentException(e);
            }
        }

        @Override
        public JsonNode read(InputStream in) {
            try {
                return JSON.readTree(in);
            } catch (Exception e) {
                throw new IllegalArgumentException(e);
            }
        }
    }

    /** The POJO of {"type": "AVRO"|"JSON", "pojo": "Order"}: Schema.AVRO(Order.class), as
     * Java services declare their schemas (reflection; every object field nullable). */
    public static final class Order {
        public long id;
        public String note;
        public double amount;
        public List<String> tags;
        public Item item;
    }

    /** A POJO with java.time fields: {"type": "AVRO"|"JSON", "pojo": "Event"}. */
    public static final class Event {
        public String name;
        public Instant at;
        public LocalDate day;
        public LocalDateTime local;
    }

    /** Every java.time type Pulsar's reflection maps to a logical type, fields declared in
     * the schema's (alphabetical) order: {"type": "AVRO"|"JSON", "pojo": "Times"}. */
    public static final class Times {
        public Instant at;
        public LocalDate day;
        public LocalDateTime local;
        public String name;
        public LocalTime time;
    }

    static Class<?> pojoClass(JsonNode spec) {
        switch (spec.get("pojo").asText()) {
            case "Order": return Order.class;
            case "Event": return Event.class;
            case "Times": return Times.class;
            default: throw new IllegalArgumentException("no POJO " + spec);
        }
    }

    /** The record inside {@link Order}. */
    public static final class Item {
        public String sku;
        public int qty;
    }

    /** The descriptor of the PROTOBUF_NATIVE tests' message, built here (no .proto). */
    static Descriptor orderDescriptor() throws Exception {
        FieldDescriptorProto.Label optional = FieldDescriptorProto.Label.LABEL_OPTIONAL;
        FileDescriptorProto file = FileDescriptorProto.newBuilder()
            .setName("pulsar_spark/order.proto")
            .setPackage("pulsar_spark.test")
            .setSyntax("proto3")
            .addDependency("google/protobuf/timestamp.proto")
            .addEnumType(EnumDescriptorProto.newBuilder().setName("Status")
                .addValue(EnumValueDescriptorProto.newBuilder().setName("NEW").setNumber(0))
                .addValue(EnumValueDescriptorProto.newBuilder().setName("DONE").setNumber(1)))
            .addMessageType(DescriptorProto.newBuilder().setName("Item")
                .addField(field("sku", 1, FieldDescriptorProto.Type.TYPE_STRING, optional))
                .addField(field("qty", 2, FieldDescriptorProto.Type.TYPE_INT32, optional)))
            .addMessageType(DescriptorProto.newBuilder().setName("Order")
                .addField(field("id", 1, FieldDescriptorProto.Type.TYPE_INT64, optional))
                .addField(field("name", 2, FieldDescriptorProto.Type.TYPE_STRING, optional))
                .addField(field("score", 3, FieldDescriptorProto.Type.TYPE_DOUBLE, optional))
                .addField(field("tags", 4, FieldDescriptorProto.Type.TYPE_INT32,
                    FieldDescriptorProto.Label.LABEL_REPEATED))
                .addField(field("item", 5, FieldDescriptorProto.Type.TYPE_MESSAGE, optional)
                    .setTypeName(".pulsar_spark.test.Item"))
                .addField(field("status", 6, FieldDescriptorProto.Type.TYPE_ENUM, optional)
                    .setTypeName(".pulsar_spark.test.Status"))
                .addField(field("ok", 7, FieldDescriptorProto.Type.TYPE_BOOL, optional))
                .addField(field("blob", 8, FieldDescriptorProto.Type.TYPE_BYTES, optional))
                .addField(field("at", 9, FieldDescriptorProto.Type.TYPE_MESSAGE, optional)
                    .setTypeName(".google.protobuf.Timestamp")))
            .build();
        FileDescriptor built = FileDescriptor.buildFrom(
            file, new FileDescriptor[] {TimestampProto.getDescriptor()});
        return built.findMessageTypeByName("Order");
    }

    static FieldDescriptorProto.Builder field(
            String name, int number, FieldDescriptorProto.Type type,
            FieldDescriptorProto.Label label) {
        return FieldDescriptorProto.newBuilder().setName(name).setNumber(number).setType(type)
            .setLabel(label).setJsonName(name);
    }

    static SchemaInfo protobufNativeInfo() {
        try {
            return SchemaInfo.builder().name("Order").type(SchemaType.PROTOBUF_NATIVE)
                .schema(ProtobufNativeSchemaUtils.serialize(orderDescriptor()))
                .properties(new HashMap<>()).build();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    // ------------------------------------------------------------------ produce

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void produce(PulsarClient client, boolean batch) throws Exception {
        Map<String, Producer> producers = new LinkedHashMap<>();
        List<CompletableFuture<?>> sent = new ArrayList<>();
        try {
            BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode row = JSON.readTree(line);
                String topic = row.get("topic").asText();
                JsonNode spec = row.get("schema");
                String id = topic + " " + spec;
                Producer producer = producers.get(id);
                if (producer == null) {
                    producer = client.newProducer(schema(spec)).topic(topic)
                        .enableBatching(batch)
                        .batchingMaxPublishDelay(50, TimeUnit.MILLISECONDS)
                        .blockIfQueueFull(true).create();
                    producers.put(id, producer);
                }
                TypedMessageBuilder message = producer.newMessage();
                Object value;
                if (spec.isObject() && spec.get("type").asText().equals("KEY_VALUE")) {
                    value = new KeyValue<>(javaValue(spec.get("key"), row.get("key")),
                        javaValue(spec.get("value"), row.get("value")));
                } else {
                    value = javaValue(spec, row.get("value"));
                }
                if (row.hasNonNull("messageKey")) {
                    message.key(row.get("messageKey").asText());
                }
                sent.add(message.value(value).sendAsync());
            }
            for (Producer producer : producers.values()) {
                producer.flush();
            }
            CompletableFuture.allOf(sent.toArray(new CompletableFuture[0]))
                .get(60, TimeUnit.SECONDS);
        } finally {
            for (Producer producer : producers.values()) {
                producer.close();
            }
        }
        ObjectNode out = NODES.objectNode();
        out.put("sent", sent.size());
        System.out.println(out);
    }

    /** The Java value of one JSON value for a schema spec (null stays null). */
    static Object javaValue(JsonNode spec, JsonNode node) throws Exception {
        if (node == null || node.isNull()) {
            return null;
        }
        if (spec.isObject()) {
            String type = spec.get("type").asText();
            if (spec.has("pojo")) {
                return POJO_MAPPER.treeToValue(node, pojoClass(spec));
            }
            if (type.equals("AVRO")) {
                org.apache.avro.Schema avro =
                    new org.apache.avro.Schema.Parser().parse(spec.get("schema").toString());
                return avroValue(avro, node);
            }
            if (type.equals("JSON")) {
                return node;
            }
            if (type.equals("STRING")) {
                return node.asText();
            }
            throw new IllegalArgumentException("no values of " + spec);
        }
        String text = node.asText();
        switch (spec.asText()) {
            case "INT8": return (byte) node.asInt();
            case "INT16": return (short) node.asInt();
            case "INT32": return node.asInt();
            case "INT64": return node.asLong();
            case "FLOAT": return Float.parseFloat(text);
            case "DOUBLE": return Double.parseDouble(text);
            case "BOOLEAN": return node.asBoolean();
            case "STRING": return text;
            case "BYTES": return Base64.getDecoder().decode(text);
            case "DATE": return new Date(node.asLong());
            case "TIME": return new Time(node.asLong());
            case "TIMESTAMP": return new Timestamp(node.asLong());
            case "INSTANT": return Instant.parse(text);
            case "LOCAL_DATE": return LocalDate.parse(text);
            case "LOCAL_TIME": return LocalTime.parse(text);
            case "LOCAL_DATE_TIME": return LocalDateTime.parse(text);
            case "PROTOBUF_NATIVE": {
                DynamicMessage.Builder builder = DynamicMessage.newBuilder(orderDescriptor());
                JsonFormat.parser().merge(node.toString(), builder);
                return builder.build().toByteArray();
            }
            default: throw new IllegalArgumentException("no values of " + spec);
        }
    }

    /** An Avro datum of a plain JSON value (unions: the first branch that fits). */
    static Object avroValue(org.apache.avro.Schema schema, JsonNode node) {
        switch (schema.getType()) {
            case NULL:
                return null;
            case BOOLEAN:
                return node.asBoolean();
            case INT:
                return node.asInt();
            case LONG:
                return node.asLong();
            case FLOAT:
                return Float.parseFloat(node.asText());
            case DOUBLE:
                return Double.parseDouble(node.asText());
            case STRING:
                return node.asText();
            case BYTES:
                return ByteBuffer.wrap(Base64.getDecoder().decode(node.asText()));
            case FIXED:
                return new GenericData.Fixed(schema, Base64.getDecoder().decode(node.asText()));
            case ENUM:
                return new GenericData.EnumSymbol(schema, node.asText());
            case ARRAY: {
                List<Object> items = new ArrayList<>();
                for (JsonNode item : node) {
                    items.add(avroValue(schema.getElementType(), item));
                }
                return new GenericData.Array<>(schema, items);
            }
            case MAP: {
                Map<String, Object> map = new HashMap<>();
                for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                    Map.Entry<String, JsonNode> entry = it.next();
                    map.put(entry.getKey(), avroValue(schema.getValueType(), entry.getValue()));
                }
                return map;
            }
            case RECORD: {
                GenericData.Record record = new GenericData.Record(schema);
                for (org.apache.avro.Schema.Field f : schema.getFields()) {
                    if (node.has(f.name())) {
                        JsonNode v = node.get(f.name());
                        record.put(f.pos(), v.isNull() ? null : avroValue(f.schema(), v));
                    } else if (f.hasDefaultValue()) {
                        record.put(f.pos(), GenericData.get().getDefaultValue(f));
                    }
                }
                return record;
            }
            case UNION: {
                if (node.isNull()) {
                    return null;
                }
                for (org.apache.avro.Schema branch : schema.getTypes()) {
                    if (fits(branch, node)) {
                        return avroValue(branch, node);
                    }
                }
                throw new IllegalArgumentException("no branch of " + schema + " fits " + node);
            }
            default:
                throw new IllegalArgumentException("unsupported Avro type " + schema);
        }
    }

    static boolean fits(org.apache.avro.Schema branch, JsonNode node) {
        switch (branch.getType()) {
            case NULL: return node.isNull();
            case BOOLEAN: return node.isBoolean();
            case INT: case LONG: return node.isIntegralNumber();
            case FLOAT: case DOUBLE: return node.isNumber();
            case STRING: case BYTES: case FIXED: case ENUM: return node.isTextual();
            case ARRAY: return node.isArray();
            case MAP: case RECORD: return node.isObject();
            default: return false;
        }
    }

    // ------------------------------------------------------------------ consume

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void consume(PulsarClient client, JsonNode jobs, int timeout) throws Exception {
        for (JsonNode job : jobs) {
            String topic = job.get("topic").asText();
            JsonNode spec = job.get("schema");
            int count = job.get("count").asInt();
            Schema schema = spec.isTextual() && spec.asText().equals("PROTOBUF_NATIVE")
                ? Schema.AUTO_CONSUME() : schema(spec);
            try (Consumer consumer = client.newConsumer(schema).topic(topic)
                    .subscriptionName("schema-tool-" + UUID.randomUUID())
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .subscribe()) {
                for (int i = 0; i < count; i++) {
                    org.apache.pulsar.client.api.Message<?> msg =
                        consumer.receive(timeout, TimeUnit.SECONDS);
                    if (msg == null) {
                        throw new IllegalStateException(
                            topic + ": got " + i + " of " + count + " messages in " + timeout
                                + " s");
                    }
                    ObjectNode out = NODES.objectNode();
                    out.put("topic", topic);
                    out.set("value", json(msg.getValue()));
                    out.put("messageKey", msg.hasKey() ? msg.getKey() : null);
                    byte[] version = msg.getSchemaVersion();
                    if (version != null && version.length == 8) {
                        out.put("schemaVersion", ByteBuffer.wrap(version).getLong());
                    } else {
                        out.putNull("schemaVersion");
                    }
                    System.out.println(out);
                    consumer.acknowledge(msg);
                }
            }
        }
    }

    /** JSON of a decoded value (the inverse of {@link #javaValue} and {@link #avroValue}). */
    static JsonNode json(Object value) throws Exception {
        if (value == null) {
            return NODES.nullNode();
        }
        if (value instanceof GenericObject) {
            return json(((GenericObject) value).getNativeObject());
        }
        if (value instanceof JsonNode) {
            return (JsonNode) value;
        }
        if (value instanceof KeyValue) {
            ObjectNode pair = NODES.objectNode();
            pair.set("key", json(((KeyValue<?, ?>) value).getKey()));
            pair.set("value", json(((KeyValue<?, ?>) value).getValue()));
            return pair;
        }
        if (value instanceof IndexedRecord) {
            IndexedRecord record = (IndexedRecord) value;
            ObjectNode object = NODES.objectNode();
            for (org.apache.avro.Schema.Field f : record.getSchema().getFields()) {
                object.set(f.name(), json(record.get(f.pos())));
            }
            return object;
        }
        if (value instanceof Message) {
            return JSON.readTree(JsonFormat.printer().preservingProtoFieldNames()
                .print((Message) value));
        }
        if (value instanceof GenericEnumSymbol || value instanceof CharSequence) {
            return NODES.textNode(value.toString());
        }
        if (value instanceof GenericFixed) {
            return NODES.textNode(Base64.getEncoder().encodeToString(((GenericFixed) value).bytes()));
        }
        if (value instanceof ByteBuffer) {
            ByteBuffer buffer = ((ByteBuffer) value).duplicate();
            byte[] bytes = new byte[buffer.remaining()];
            buffer.get(bytes);
            return NODES.textNode(Base64.getEncoder().encodeToString(bytes));
        }
        if (value instanceof byte[]) {
            return NODES.textNode(Base64.getEncoder().encodeToString((byte[]) value));
        }
        if (value instanceof Date) {  // java.util.Date, java.sql.Time and Timestamp
            return NODES.numberNode(((Date) value).getTime());
        }
        if (value instanceof Instant || value instanceof LocalDate || value instanceof LocalTime
                || value instanceof LocalDateTime) {
            return NODES.textNode(value.toString());
        }
        if (value instanceof Map) {
            ObjectNode object = NODES.objectNode();
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                object.set(entry.getKey().toString(), json(entry.getValue()));
            }
            return object;
        }
        if (value instanceof Collection) {
            ArrayNode array = NODES.arrayNode();
            for (Object item : (Collection<?>) value) {
                array.add(json(item));
            }
            return array;
        }
        if (value instanceof Float || value instanceof Double) {
            double d = ((Number) value).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                return NODES.textNode(value.toString());
            }
            return value instanceof Float ? NODES.numberNode((Float) value)
                : NODES.numberNode(d);
        }
        return POJO_MAPPER.valueToTree(value);  // a POJO (java.time fields as ISO-8601 text)
    }
}
