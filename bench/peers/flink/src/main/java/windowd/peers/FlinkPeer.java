package windowd.peers;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The Flink peer of bench/compare.sh: tumbling event-time windows by record
 * key, count and sum of {@code x}, event time from the value's {@code ts},
 * {@code forBoundedOutOfOrderness(grace)}, final results only (no allowed
 * lateness: one firing per window). One local JVM: the job runs in a
 * MiniCluster started by {@code getExecutionEnvironment}.
 *
 * <pre>
 * java -cp 'target/peer-flink.jar:target/lib/*' windowd.peers.FlinkPeer \
 *   --bootstrap 127.0.0.1:9092 --input IN --output OUT --group G --state-dir DIR \
 *   [--size-ms 10000] [--grace-ms 2000] [--parallelism 2] [--checkpoint-ms 1000] [--exactly-once true]
 * </pre>
 *
 * Each Kafka record is parsed once, in the source's deserializer, into an
 * {@link Event} (group key = the record key); the aggregate is a typed
 * {@link CountSum} POJO. Final panes are written to the output topic keyed by
 * the group key, as JSON {@code {"key":K,"start":S,"end":E,"count":N,"sum":X}}.
 * The hashmap state backend is checkpointed every {@code --checkpoint-ms} to
 * the state dir, in checkpointing mode EXACTLY_ONCE (Flink's default, aligned
 * barriers) in both deliveries; the deliveries differ in the sink only:
 * <ul>
 * <li>by default at least once: {@code DeliveryGuarantee.AT_LEAST_ONCE}, the
 * sink flushes its producer on each checkpoint;</li>
 * <li>with {@code --exactly-once true} exactly once:
 * {@code DeliveryGuarantee.EXACTLY_ONCE}, a Kafka transaction per checkpoint
 * and subtask, committed when the checkpoint completes (so panes become
 * visible to a {@code read_committed} reader once per checkpoint), with the
 * output topic's name as the transactional id prefix (unique per run) and
 * {@code transaction.timeout.ms} 60000, under the broker's
 * {@code transaction.max.timeout.ms} (15 min by default; Flink's own default
 * of 1 h would be refused); the source reads {@code read_committed}. It
 * needs checkpointing ({@code --checkpoint-ms} above 0).</li>
 * </ul>
 */
public final class FlinkPeer {

    /** A parsed input record: its key and the value fields this job reads. */
    public static final class Event {
        public String key;
        public long ts;
        public double x;

        public Event() {}
    }

    /** The value fields this job reads; the rest are skipped. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    public static final class Value {
        public long ts;
        public double x;
    }

    /** The aggregate (a Flink POJO: public fields, no-argument constructor). */
    public static final class CountSum {
        public long count;
        public double sum;

        public CountSum() {}
    }

    /** A final pane. */
    public static final class Pane {
        public String key;
        public long start;
        public long end;
        public long count;
        public double sum;

        public Pane() {}
    }

    static final class Deserializer implements KafkaRecordDeserializationSchema<Event> {
        private transient ObjectReader reader;

        @Override
        public void open(org.apache.flink.api.common.serialization.DeserializationSchema.InitializationContext context) {
            reader = new ObjectMapper()
                    .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false)
                    .readerFor(Value.class);
        }

        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Event> out) throws IOException {
            Value v = reader.readValue(record.value());
            Event e = new Event();
            e.key = record.key() == null ? "" : new String(record.key(), StandardCharsets.UTF_8);
            e.ts = v.ts;
            e.x = v.x;
            out.collect(e);
        }

        @Override
        public TypeInformation<Event> getProducedType() {
            return TypeInformation.of(Event.class);
        }
    }

    static final class Add implements AggregateFunction<Event, CountSum, CountSum> {
        @Override
        public CountSum createAccumulator() {
            return new CountSum();
        }

        @Override
        public CountSum add(Event e, CountSum a) {
            a.count++;
            a.sum += e.x;
            return a;
        }

        @Override
        public CountSum getResult(CountSum a) {
            return a;
        }

        @Override
        public CountSum merge(CountSum a, CountSum b) {
            a.count += b.count;
            a.sum += b.sum;
            return a;
        }
    }

    static final class ToPane extends ProcessWindowFunction<CountSum, Pane, String, TimeWindow> {
        @Override
        public void process(String key, Context ctx, Iterable<CountSum> in, Collector<Pane> out) {
            CountSum a = in.iterator().next();
            Pane p = new Pane();
            p.key = key;
            p.start = ctx.window().getStart();
            p.end = ctx.window().getEnd();
            p.count = a.count;
            p.sum = a.sum;
            out.collect(p);
        }
    }

    static final class PaneJson implements KafkaRecordSerializationSchema<Pane> {
        private final String topic;

        PaneJson(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Pane p, KafkaSinkContext ctx, Long timestamp) {
            StringBuilder sb = new StringBuilder(96);
            sb.append("{\"key\":\"");
            escape(sb, p.key);
            sb.append("\",\"start\":").append(p.start)
                    .append(",\"end\":").append(p.end)
                    .append(",\"count\":").append(p.count)
                    .append(",\"sum\":").append(p.sum)
                    .append('}');
            return new ProducerRecord<>(topic, null, p.end - 1,
                    p.key.getBytes(StandardCharsets.UTF_8), sb.toString().getBytes(StandardCharsets.UTF_8));
        }
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
        String bootstrap = o.getOrDefault("bootstrap", "127.0.0.1:9092");
        String input = req(o, "input"), output = req(o, "output"), group = req(o, "group");
        String stateDir = req(o, "state-dir");
        long sizeMs = Long.parseLong(o.getOrDefault("size-ms", "10000"));
        long graceMs = Long.parseLong(o.getOrDefault("grace-ms", "2000"));
        long checkpointMs = Long.parseLong(o.getOrDefault("checkpoint-ms", "1000"));

        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + stateDir + "/checkpoints");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(Integer.parseInt(o.getOrDefault("parallelism", "2")));
        boolean exactlyOnce = Boolean.parseBoolean(o.getOrDefault("exactly-once", "false"));
        if (exactlyOnce && checkpointMs <= 0) {
            // The exactly-once sink commits its transactions on checkpoints.
            throw new IllegalArgumentException("--exactly-once needs --checkpoint-ms above 0");
        }
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs, CheckpointingMode.EXACTLY_ONCE);
        }

        var sourceBuilder = KafkaSource.<Event>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(input)
                .setGroupId(group)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setDeserializer(new Deserializer());
        if (exactlyOnce) {
            // The input is not written transactionally here, but an
            // exactly-once job reads only committed records.
            sourceBuilder.setProperty("isolation.level", "read_committed");
        }
        KafkaSource<Event> source = sourceBuilder.build();
        WatermarkStrategy<Event> wm = WatermarkStrategy.<Event>forBoundedOutOfOrderness(Duration.ofMillis(graceMs))
                .withTimestampAssigner((e, recordTs) -> e.ts);
        var sinkBuilder = KafkaSink.<Pane>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(new PaneJson(output))
                .setDeliveryGuarantee(exactlyOnce ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE)
                .setProperty("compression.type", o.getOrDefault("compression", "lz4"));
        if (exactlyOnce) {
            // One transaction per checkpoint and subtask; the prefix must be
            // unique per job on the broker (the output topic is per run),
            // the timeout under the broker's transaction.max.timeout.ms.
            sinkBuilder.setTransactionalIdPrefix(output).setProperty("transaction.timeout.ms", "60000");
        }
        KafkaSink<Pane> sink = sinkBuilder.build();

        env.fromSource(source, wm, "input")
                .keyBy(e -> e.key)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(sizeMs)))
                .aggregate(new Add(), new ToPane())
                .sinkTo(sink)
                .name("output");
        env.execute("windowd-peer-flink");
    }

    static String req(Map<String, String> o, String name) {
        String v = o.get(name);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return v;
    }
}
