package windowd.javaclient;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import io.apicurio.registry.serde.avro.AvroKafkaDeserializer;
import io.apicurio.registry.serde.protobuf.ProtobufKafkaDeserializer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads windowd's panes from a topic with Apicurio Registry's Kafka
 * deserializer for the format, as a team's Java consumer would, and prints
 * each as a line {"pane_id":...,"value":...}: the value as the deserializer
 * gave it (an Avro GenericRecord, a Protobuf DynamicMessage), written out
 * as JSON with every field (a Protobuf wrapper as its value, null when
 * unset).
 *
 * Arguments: bootstrap servers, registry URL (Apicurio's core API),
 * format (avro or protobuf), topic, records to read, seconds to wait.
 */
public final class PaneReader {
  public static void main(String[] args) {
    String bootstrap = args[0], registry = args[1], format = args[2], topic = args[3];
    int want = Integer.parseInt(args[4]);
    long deadline = System.nanoTime() + Duration.ofSeconds(Long.parseLong(args[5])).toNanos();

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, "javaclient-" + UUID.randomUUID());
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
        format.equals("avro") ? AvroKafkaDeserializer.class.getName() : ProtobufKafkaDeserializer.class.getName());
    props.put("apicurio.registry.url", registry);
    if (format.equals("protobuf")) {
      // The Confluent wire format: message indexes after the schema id,
      // no Apicurio type reference; the message's name is in the header
      // message_type (docs/SEMANTICS.md, Output).
      props.put("apicurio.registry.serde.read-indexes", "true");
      props.put("apicurio.registry.serde.read-type-ref", "false");
      props.put("apicurio.registry.headers.value.msgType.name", "message_type");
      props.put("apicurio.registry.deserializer.value.return-class", "com.google.protobuf.DynamicMessage");
    }

    int read = 0;
    try (KafkaConsumer<String, Object> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      while (read < want && System.nanoTime() < deadline) {
        for (ConsumerRecord<String, Object> r : consumer.poll(Duration.ofMillis(500))) {
          Header id = r.headers().lastHeader("pane_id");
          StringBuilder b = new StringBuilder("{\"pane_id\":");
          quote(b, id == null ? "" : new String(id.value(), StandardCharsets.UTF_8));
          b.append(",\"class\":");
          quote(b, r.value().getClass().getName());
          b.append(",\"value\":");
          if (r.value() instanceof GenericRecord g) {
            b.append(g.toString()); // Avro's JSON rendering of the record
          } else {
            message(b, (Message) r.value());
          }
          System.out.println(b.append('}'));
          read++;
        }
      }
    }
    if (read < want) {
      System.err.println("read " + read + " of " + want + " records");
      System.exit(1);
    }
  }

  /** message writes m's every field: one with presence that is not set as null. */
  static void message(StringBuilder b, Message m) {
    b.append('{');
    boolean first = true;
    for (FieldDescriptor fd : m.getDescriptorForType().getFields()) {
      if (!first) b.append(',');
      first = false;
      quote(b, fd.getName());
      b.append(':');
      if (fd.isMapField()) {
        b.append('{');
        boolean f = true;
        for (Object e : (List<?>) m.getField(fd)) {
          Message entry = (Message) e;
          if (!f) b.append(',');
          f = false;
          FieldDescriptor k = entry.getDescriptorForType().findFieldByNumber(1);
          FieldDescriptor v = entry.getDescriptorForType().findFieldByNumber(2);
          quote(b, String.valueOf(entry.getField(k)));
          b.append(':');
          value(b, v, entry.getField(v));
        }
        b.append('}');
      } else if (fd.isRepeated()) {
        b.append('[');
        boolean f = true;
        for (Object e : (List<?>) m.getField(fd)) {
          if (!f) b.append(',');
          f = false;
          value(b, fd, e);
        }
        b.append(']');
      } else if (wrapper(fd)) {
        // google.protobuf.Int64Value and the like: its value, or null when unset.
        if (m.hasField(fd)) {
          Message w = (Message) m.getField(fd);
          FieldDescriptor v = w.getDescriptorForType().findFieldByNumber(1);
          value(b, v, w.getField(v));
        } else {
          b.append("null");
        }
      } else if (fd.hasPresence() && fd.getJavaType() != FieldDescriptor.JavaType.MESSAGE && !m.hasField(fd)) {
        b.append("null");
      } else {
        value(b, fd, m.getField(fd));
      }
    }
    b.append('}');
  }

  static boolean wrapper(FieldDescriptor fd) {
    return fd.getJavaType() == FieldDescriptor.JavaType.MESSAGE
        && fd.getMessageType().getFile().getName().equals("google/protobuf/wrappers.proto");
  }

  static void value(StringBuilder b, FieldDescriptor fd, Object v) {
    switch (fd.getJavaType()) {
      case MESSAGE -> message(b, (Message) v);
      case STRING -> quote(b, (String) v);
      default -> b.append(v); // long, int, double, boolean
    }
  }

  static void quote(StringBuilder b, String s) {
    b.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    b.append('"');
  }

  private PaneReader() {}
}
