package windowd.peers;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.TimestampExtractor;

/**
 * The Kafka Streams peer of bench/compare.sh: tumbling event-time windows by
 * record key, count and sum of {@code x}, event time from the value's
 * {@code ts}, grace = the bounded out-of-orderness, final results only.
 *
 * <pre>
 * java -cp 'target/peer-kstreams.jar:target/lib/*' windowd.peers.KStreamsPeer \
 *   --bootstrap 127.0.0.1:9092 --input IN --output OUT --app-id ID --state-dir DIR \
 *   [--size-ms 10000] [--grace-ms 2000] [--threads 2] [--commit-ms 1000] [--emit suppress|close] [--exactly-once true]
 * </pre>
 *
 * Each value is parsed once, by the source's serde, into an {@link Event};
 * the timestamp extractor reads the parsed value. The aggregate is a typed
 * {@link CountSum} with a 16-byte binary serde. Final panes are written to
 * the output topic keyed by the group key, as JSON
 * {@code {"key":K,"start":S,"end":E,"count":N,"sum":X}}, at least once, or
 * with {@code --exactly-once true} under {@code exactly_once_v2} (a
 * transaction per commit, every {@code --commit-ms}; the consumers read
 * {@code read_committed}).
 */
public final class KStreamsPeer {

    /** The fields of an input value this job reads; the rest are skipped. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public static final class Event {
        public long ts;
        public double x;
    }

    /** The aggregate: count and sum of x. */
    public static final class CountSum {
        long count;
        double sum;
    }

    /** Parses a value once into an {@link Event}. */
    static final class EventDeserializer implements Deserializer<Event> {
        private final ObjectReader reader = new ObjectMapper()
                .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false)
                .readerFor(Event.class);

        @Override
        public Event deserialize(String topic, byte[] data) {
            if (data == null) {
                return null;
            }
            try {
                return reader.readValue(data);
            } catch (IOException e) {
                throw new SerializationException("bad JSON value", e);
            }
        }
    }

    static Serde<Event> eventSerde() {
        Serializer<Event> never = (topic, e) -> {
            throw new UnsupportedOperationException("events are only read");
        };
        return Serdes.serdeFrom(never, new EventDeserializer());
    }

    static Serde<CountSum> countSumSerde() {
        Serializer<CountSum> ser = (topic, a) ->
                a == null ? null : ByteBuffer.allocate(16).putLong(a.count).putDouble(a.sum).array();
        Deserializer<CountSum> de = (topic, data) -> {
            if (data == null) {
                return null;
            }
            ByteBuffer b = ByteBuffer.wrap(data);
            CountSum a = new CountSum();
            a.count = b.getLong();
            a.sum = b.getDouble();
            return a;
        };
        return Serdes.serdeFrom(ser, de);
    }

    /** Event time from the parsed value (the source serde ran already). */
    public static final class EventTime implements TimestampExtractor {
        @Override
        public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
            Object v = record.value();
            return v instanceof Event e ? e.ts : -1; // -1: dropped (and logged) by Kafka Streams
        }
    }

    static String paneJson(Windowed<String> w, CountSum a) {
        StringBuilder sb = new StringBuilder(96);
        sb.append("{\"key\":\"");
        escape(sb, w.key());
        sb.append("\",\"start\":").append(w.window().start())
                .append(",\"end\":").append(w.window().end())
                .append(",\"count\":").append(a.count)
                .append(",\"sum\":").append(a.sum)
                .append('}');
        return sb.toString();
    }

    static void escape(StringBuilder sb, String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + args[i]);
            }
            o.put(args[i].substring(2), args[i + 1]);
        }
        String input = req(o, "input"), output = req(o, "output");
        long sizeMs = Long.parseLong(o.getOrDefault("size-ms", "10000"));
        long graceMs = Long.parseLong(o.getOrDefault("grace-ms", "2000"));
        String emit = o.getOrDefault("emit", "suppress");

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, req(o, "app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, o.getOrDefault("bootstrap", "127.0.0.1:9092"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, req(o, "state-dir"));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(o.getOrDefault("threads", "2")));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(o.getOrDefault("commit-ms", "1000")));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
                Boolean.parseBoolean(o.getOrDefault("exactly-once", "false")) ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.DEFAULT_TIMESTAMP_EXTRACTOR_CLASS_CONFIG, EventTime.class);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix("compression.type"), o.getOrDefault("compression", "lz4"));

        Serde<String> keys = Serdes.String();
        StreamsBuilder b = new StreamsBuilder();
        TimeWindowedKStream<String, Event> windowed = b
                .stream(input, Consumed.with(keys, eventSerde()).withTimestampExtractor(new EventTime()))
                .groupByKey(Grouped.with(keys, eventSerde()))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(sizeMs), Duration.ofMillis(graceMs)));
        KTable<Windowed<String>, CountSum> table;
        Materialized<String, CountSum, org.apache.kafka.streams.state.WindowStore<org.apache.kafka.common.utils.Bytes, byte[]>> m =
                Materialized.<String, CountSum, org.apache.kafka.streams.state.WindowStore<org.apache.kafka.common.utils.Bytes, byte[]>>as("panes")
                        .withKeySerde(keys).withValueSerde(countSumSerde());
        switch (emit) {
            case "suppress" -> table = windowed.aggregate(CountSum::new, KStreamsPeer::add, m)
                    .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final"));
            case "close" -> {
                // Not used by bench/compare.sh: on its input (Kafka Streams
                // 4.4) this wrote only about two thirds of the final panes
                // after the flush records, with the default interval below
                // (1 s: closed windows are looked for at most once a second,
                // when a record arrives) and with 0. suppress() writes them all.
                p.put("emit.interval.ms.kstreams.windowed.aggregation", 0L);
                table = windowed.emitStrategy(EmitStrategy.onWindowClose())
                        .aggregate(CountSum::new, KStreamsPeer::add, m);
            }
            default -> throw new IllegalArgumentException("--emit must be suppress or close");
        }
        table.toStream()
                .map((w, a) -> KeyValue.pair(w.key(), paneJson(w, a)))
                .to(output, Produced.with(keys, Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            done.countDown();
        }));
        streams.start();
        done.await();
        if (streams.state() == KafkaStreams.State.ERROR) {
            System.exit(1);
        }
    }

    static CountSum add(String key, Event e, CountSum a) {
        a.count++;
        a.sum += e.x;
        return a;
    }

    static String req(Map<String, String> o, String name) {
        String v = o.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }
}
