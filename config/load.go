package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	// The time zones of calendar windows resolve on a machine without
	// system zoneinfo too (docs/SEMANTICS.md, Windows).
	_ "time/tzdata"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// Defaults that are not the zero value (the README's configuration table;
// docs/SEMANTICS.md, Configuration).
const (
	DefaultEmbeddedListen = "127.0.0.1:19092"
	DefaultClientID       = "windowd"
	DefaultStateDir       = "./data"
	DefaultCacheBytes     = 64 << 20
	MinCacheBytes         = 1 << 20
	MaxStandbyReplicas    = 8
	DefaultHTTPListen     = "127.0.0.1:9100"
	DefaultPartitions     = 4
	DefaultCommitInterval = 1000 // ms, at_least_once
	// DefaultCommitIntervalExactlyOnce is the transaction cadence under
	// exactly_once: read_committed consumers see panes only when their
	// transaction commits, so the interval is their latency (Kafka
	// Streams' EOS default is the same 100ms).
	DefaultCommitIntervalExactlyOnce = 100   // ms
	DefaultShutdownGrace             = 20000 // ms: room under Kubernetes' 30 s terminationGracePeriodSeconds
	DefaultSessionTimeout            = 45000 // ms, Kafka's default
	// DefaultCompression is the codec of the batches windowd produces:
	// against franz-go's default (snappy) a local Kafka 4.4 broker took
	// the same panes with about 40% less CPU (docs/PERFORMANCE.md), and
	// every Kafka client since 0.10 reads it.
	DefaultCompression = "lz4"
)

// Load reads and validates the configuration file at path. A file that is not
// valid gives an *Errors listing every problem; a file that cannot be read,
// or is larger than MaxConfigBytes, gives that error.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a windowd configuration", path, MaxConfigBytes>>20)
	}
	return Parse(path, data)
}

// MaxConfigBytes bounds the configuration file windowd reads
// (docs/OPERATIONS.md, Limits): a device such as /dev/zero is refused, not
// read until memory runs out.
const MaxConfigBytes = 4 << 20

// Parse validates a configuration held in data (YAML or JSON). file names it
// in problems and in Config.File. When the configuration is not valid, Parse
// returns a nil *Config and an *Errors listing every problem.
func Parse(file string, data []byte) (*Config, error) {
	// A UTF-8 byte order mark (some editors write one) is not part of the
	// first key.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	d := &decoder{file: file, lines: strings.Split(string(data), "\n")}
	c := d.config(data)
	if len(d.problems) > 0 {
		return nil, newErrors(d.problems)
	}
	c.File = file
	return c, nil
}

// The schema: known keys of each mapping, and the names of enumerations.
var (
	topKeys       = []string{"kafka", "schema_registry", "state", "http", "shutdown_grace", "generator", "pipelines"}
	generatorKeys = []string{"topic", "rate", "keys", "disorder", "late_every", "late_by", "malformed_every"}
	kafkaKeys     = []string{"brokers", "embedded_listen", "client_id", "session_timeout", "compression", "tls", "sasl"}
	tlsKeys       = []string{"ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"}
	saslKeys      = []string{"mechanism", "username", "password", "password_file"}
	stateKeys     = []string{"dir", "cache_bytes", "standby_replicas"}
	httpKeys      = []string{"listen"}
	pipelineKeys  = []string{"name", "input", "filter", "key", "timestamp", "watermark", "window", "allowed_lateness", "trigger", "accumulation", "aggregates", "output", "late_topic", "dead_letter_topic", "delivery", "commit_interval", "repartition", "repartition_partitions", "watermark_interval", "drain"}
	inputKeys     = []string{"topic", "group", "partitions", "format"}
	registryKeys  = []string{"url", "basic_auth", "tls"}
	basicKeys     = []string{"username", "password", "password_file"}
	keyKeys       = []string{"field", "fields", "expr"}
	timestampKeys = []string{"field", "expr", "format", "source", "max_future"}
	watermarkKeys = []string{"strategy", "max_delay", "every", "idle_timeout", "max_drift"}
	windowKeys    = []string{"type", "size", "hop", "gap", "offset", "step", "unit", "time_zone", "week_start"}
	triggerKeys   = []string{"early", "on_time", "late", "closing"}
	earlyKeys     = []string{"count", "every"}
	lateKeys      = []string{"every"}
	aggregateKeys = []string{"name", "op", "field", "expr", "precision", "quantiles", "relative_accuracy", "max_buckets", "k", "capacity"}
	outputKeys    = []string{"topic", "stdout", "progress_interval"}

	formats      = []choice[Format]{{"json", JSON}, {"avro", Avro}, {"protobuf", Protobuf}}
	timeFormats  = []choice[TimeFormat]{{"unix_s", UnixS}, {"unix_ms", UnixMS}, {"unix_us", UnixUS}, {"unix_ns", UnixNS}, {"rfc3339", RFC3339}}
	sources      = []choice[bool]{{"record", true}}
	strategies   = []choice[watermark.Strategy]{{"bounded_out_of_orderness", watermark.BoundedOutOfOrderness}, {"monotonic", watermark.Monotonic}}
	windowKinds  = []choice[windowing.WindowKind]{{"tumbling", windowing.Tumbling}, {"hopping", windowing.Hopping}, {"session", windowing.Session}, {"calendar", windowing.Calendar}, {"cumulate", windowing.Cumulate}, {"sliding", windowing.Sliding}}
	closings     = []choice[windowing.ClosingPolicy]{{"always", windowing.ClosingAlways}, {"if_changed", windowing.ClosingIfChanged}, {"never", windowing.ClosingNever}}
	modes        = []choice[windowing.Mode]{{"accumulating", windowing.Accumulating}, {"discarding", windowing.Discarding}, {"retracting", windowing.Retracting}}
	aggOps       = []choice[windowing.AggOp]{{"count", windowing.Count}, {"sum", windowing.Sum}, {"min", windowing.Min}, {"max", windowing.Max}, {"avg", windowing.Avg}, {"distinct_approx", windowing.DistinctApprox}, {"quantiles", windowing.Quantiles}, {"top_k", windowing.TopK}}
	deliveries   = []choice[Delivery]{{"at_least_once", AtLeastOnce}, {"exactly_once", ExactlyOnce}}
	mechanisms   = []choice[string]{{SASLPlain, SASLPlain}, {SASLScramSHA256, SASLScramSHA256}, {SASLScramSHA512, SASLScramSHA512}}
	compressions = []choice[string]{{"lz4", "lz4"}, {"snappy", "snappy"}, {"zstd", "zstd"}, {"gzip", "gzip"}, {"none", "none"}}

	// windowFields says which window kinds take which length.
	windowFields = []struct {
		name     string
		kinds    []windowing.WindowKind
		required bool
		validFor string
	}{
		{"size", []windowing.WindowKind{windowing.Tumbling, windowing.Hopping, windowing.Sliding, windowing.Calendar, windowing.Cumulate}, true, "tumbling, hopping, sliding, calendar and cumulate"},
		{"hop", []windowing.WindowKind{windowing.Hopping, windowing.Calendar}, true, "hopping and calendar"},
		{"gap", []windowing.WindowKind{windowing.Session}, true, "session"},
		{"offset", []windowing.WindowKind{windowing.Tumbling, windowing.Hopping, windowing.Cumulate}, false, "tumbling, hopping and cumulate"},
		{"step", []windowing.WindowKind{windowing.Cumulate}, true, "cumulate"},
		{"unit", []windowing.WindowKind{windowing.Calendar, windowing.Cumulate}, true, "calendar and cumulate"},
		{"time_zone", []windowing.WindowKind{windowing.Calendar, windowing.Cumulate}, false, "calendar and cumulate"},
		{"week_start", []windowing.WindowKind{windowing.Calendar, windowing.Cumulate}, false, "calendar and cumulate"},
	}

	pipelineNameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	aggregateNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	topicRE         = regexp.MustCompile(`^(?:[A-Za-z0-9._-]{3,249}|[A-Za-z0-9_-]|[A-Za-z0-9._-][A-Za-z0-9_-]|[A-Za-z0-9_-]\.)$`) // Kafka's rule: not "." or ".."
	fieldPathRE     = regexp.MustCompile(`^[^.]+(?:\.[^.]+)*$`)
)

func (d *decoder) pipelineName(n ast.Node, path string) (string, bool) {
	return d.pattern(pipelineNameRE, "pipeline name", "use letters, digits, '.', '_' and '-'")(n, path)
}

func (d *decoder) aggregateName(n ast.Node, path string) (string, bool) {
	return d.pattern(aggregateNameRE, "aggregate name", "use a letter or '_', then letters, digits and '_'")(n, path)
}

func (d *decoder) topic(n ast.Node, path string) (string, bool) {
	return d.pattern(topicRE, "topic name", "use at most 249 letters, digits, '.', '_' and '-'")(n, path)
}

func (d *decoder) fieldPath(n ast.Node, path string) (string, bool) {
	return d.pattern(fieldPathRE, "field path", `use dots between names, like "payload.user.id"`)(n, path)
}

func (d *decoder) config(data []byte) *Config {
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		d.syntaxError(err)
		return nil
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			d.errorf(posOf(doc.Body), "", "multiple YAML documents are not supported")
			break
		}
		body = doc.Body
	}
	d.collectAnchors(body)
	root := d.mapping(d.resolve(body, ""), "", posOf(body), topKeys...)

	c := &Config{
		Kafka: d.kafka(root.sub("kafka", kafkaKeys...)),
		State: State{Dir: DefaultStateDir, CacheBytes: DefaultCacheBytes},
		HTTP:  HTTP{Listen: DefaultHTTPListen},
	}
	state := root.sub("state", stateKeys...)
	c.State.Dir, _ = opt(state, "dir", c.State.Dir, d.str)
	c.State.CacheBytes, _ = opt(state, "cache_bytes", c.State.CacheBytes, d.byteSize(MinCacheBytes, "1MiB"))
	standbys, _ := opt(state, "standby_replicas", 0, d.intIn(0, MaxStandbyReplicas))
	c.State.StandbyReplicas = int(standbys)
	c.HTTP.Listen, _ = opt(root.sub("http", httpKeys...), "listen", c.HTTP.Listen, d.address(false))
	c.ShutdownGrace, _ = opt(root, "shutdown_grace", DefaultShutdownGrace, d.duration(positive))
	if root.has("generator") {
		c.Generator = d.generator(root.sub("generator", generatorKeys...))
	}

	if root.has("schema_registry") {
		c.SchemaRegistry = d.schemaRegistry(root.sub("schema_registry", registryKeys...))
	}

	items, _ := req(root, "pipelines", d.nonEmptyList)
	seen := map[string]int{}
	for i, it := range items {
		if it.node != nil {
			c.Pipelines = append(c.Pipelines, d.pipeline(it, index("pipelines", i), seen))
		}
	}
	if c.SchemaRegistry == nil && !root.broken {
		for _, p := range d.binary {
			d.errorf(p.at, p.path, "%s needs schema_registry (the registry its schemas come from; docs/SEMANTICS.md, Input formats)", p.format)
		}
	}
	if c.Generator != nil && c.Generator.Topic != "" && !c.Kafka.Embedded && !root.broken {
		d.errorf(root.keyAt("generator"), "generator", "only valid with kafka.brokers: embedded")
	}
	return c
}

// binaryInput is a pipeline's input.format that needs schema_registry.
type binaryInput struct {
	at     pos
	path   string
	format Format
}

// schemaRegistry reads schema_registry: a URL, and basic_auth and tls as
// kafka.sasl and kafka.tls read theirs.
func (d *decoder) schemaRegistry(m *mapping) *SchemaRegistry {
	r := &SchemaRegistry{}
	r.URL, _ = req(m, "url", d.httpURL)
	if m.has("basic_auth") {
		b := m.sub("basic_auth", basicKeys...)
		r.Username, _ = req(b, "username", d.expanded(false))
		r.Password = d.password(b)
	}
	if m.has("tls") {
		r.TLS = d.kafkaTLS(m.sub("tls", tlsKeys...))
		if strings.HasPrefix(r.URL, "http://") {
			d.errorf(m.keyAt("tls"), m.child("tls"), "needs an https:// url")
		}
	}
	return r
}

// httpURL accepts an absolute http:// or https:// URL with a host.
func (d *decoder) httpURL(n ast.Node, path string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		d.errorf(posOf(n), path, "%s is not an http:// or https:// URL (like http://127.0.0.1:8081)", quote(s))
		return "", false
	}
	return strings.TrimRight(s, "/"), true
}

func (d *decoder) generator(m *mapping) *Generator {
	g := &Generator{}
	g.Topic, _ = req(m, "topic", d.topic)
	g.Rate, _ = opt(m, "rate", 100, d.intIn(1, 1_000_000))
	g.Keys, _ = opt(m, "keys", 20, d.intIn(1, 10_000_000))
	g.Disorder, _ = opt(m, "disorder", 2000, d.duration(nonNegative))
	g.LateEvery, _ = opt(m, "late_every", 0, d.intIn(0, math.MaxInt64))
	g.LateBy, _ = opt(m, "late_by", 30000, d.duration(positive))
	g.MalformedEvery, _ = opt(m, "malformed_every", 0, d.intIn(0, math.MaxInt64))
	return g
}

func (d *decoder) kafka(m *mapping) Kafka {
	k := Kafka{EmbeddedListen: DefaultEmbeddedListen, ClientID: DefaultClientID, SessionTimeout: DefaultSessionTimeout, Compression: DefaultCompression}
	// Optional: replay and validate never connect; run refuses a
	// configuration without brokers (Config.HasBrokers).
	if b, ok := opt(m, "brokers", brokerList{}, d.brokers); ok {
		k.Brokers, k.Embedded = b.addrs, b.embedded
	}
	k.EmbeddedListen, _ = opt(m, "embedded_listen", k.EmbeddedListen, d.address(false))
	k.ClientID, _ = opt(m, "client_id", k.ClientID, d.str)
	k.SessionTimeout, _ = opt(m, "session_timeout", DefaultSessionTimeout, d.duration(positive))
	k.Compression, _ = opt(m, "compression", DefaultCompression, oneOf(d, compressions))
	if m.has("tls") {
		k.TLS = d.kafkaTLS(m.sub("tls", tlsKeys...))
	}
	if m.has("sasl") {
		k.SASL = d.kafkaSASL(m.sub("sasl", saslKeys...))
	}
	if k.Embedded {
		for _, key := range []string{"tls", "sasl"} {
			if m.has(key) {
				d.errorf(m.keyAt(key), m.child(key), "not valid with kafka.brokers: embedded")
			}
		}
	}
	return k
}

// kafkaTLS reads kafka.tls; its files must be readable and hold PEM certificates
// (and a private key matching cert_file).
func (d *decoder) kafkaTLS(m *mapping) *TLS {
	t := &TLS{}
	var ca, cert, key []byte
	var caOK, certOK, keyOK bool
	t.CAFile, caOK = opt(m, "ca_file", "", d.str)
	t.CertFile, certOK = opt(m, "cert_file", "", d.str)
	t.KeyFile, keyOK = opt(m, "key_file", "", d.str)
	t.ServerName, _ = opt(m, "server_name", "", d.str)
	t.InsecureSkipVerify, _ = opt(m, "insecure_skip_verify", false, d.boolean)
	if m.has("ca_file") && caOK {
		if ca, caOK = d.readFile(m, "ca_file", t.CAFile); caOK && !x509.NewCertPool().AppendCertsFromPEM(ca) {
			d.errorf(m.valueAt("ca_file"), m.child("ca_file"), "no PEM certificate in %q", t.CAFile)
		}
	}
	if m.has("cert_file") && certOK {
		cert, certOK = d.readFile(m, "cert_file", t.CertFile)
	}
	if m.has("key_file") && keyOK {
		key, keyOK = d.readFile(m, "key_file", t.KeyFile)
	}
	switch {
	case m.has("cert_file") && !m.has("key_file"):
		d.errorf(m.keyAt("cert_file"), m.child("cert_file"), "needs key_file")
	case m.has("key_file") && !m.has("cert_file"):
		d.errorf(m.keyAt("key_file"), m.child("key_file"), "needs cert_file")
	case m.has("cert_file") && certOK && keyOK:
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			d.errorf(m.valueAt("cert_file"), m.child("cert_file"), "cannot be used with key_file: %v", err)
		}
	}
	return t
}

// kafkaSASL reads kafka.sasl: a mechanism, a user name and exactly one of
// password and password_file.
func (d *decoder) kafkaSASL(m *mapping) *SASL {
	s := &SASL{}
	s.Mechanism, _ = req(m, "mechanism", oneOf(d, mechanisms))
	s.Username, _ = req(m, "username", d.expanded(false))
	s.Password = d.password(m)
	return s
}

// password reads exactly one of password and password_file of m.
func (d *decoder) password(m *mapping) Secret {
	switch {
	case m.has("password") && m.has("password_file"):
		d.errorf(m.keyAt("password_file"), m.child("password_file"), "cannot be combined with password")
	case m.has("password"):
		pw, _ := opt(m, "password", "", d.expanded(true))
		return NewSecret(pw)
	case m.has("password_file"):
		if file, ok := opt(m, "password_file", "", d.str); ok {
			return NewSecret(d.passwordFile(m, file))
		}
	case !m.broken:
		d.errorf(m.at, m.path, "needs password or password_file")
	}
	return Secret{}
}

// passwordFile reads the password in the file of key password_file, less
// its trailing newlines.
func (d *decoder) passwordFile(m *mapping, file string) string {
	b, ok := d.readFile(m, "password_file", file)
	if !ok {
		return ""
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		d.errorf(m.valueAt("password_file"), m.child("password_file"), "%q is empty", file)
	}
	return pw
}

type brokerList struct {
	addrs    []string
	embedded bool
}

// brokers accepts a non-empty list of host:port, or "embedded".
func (d *decoder) brokers(n ast.Node, path string) (brokerList, bool) {
	const want = `a list of host:port addresses or "embedded"`
	if _, isList := n.(*ast.SequenceNode); !isList {
		if s, _ := text(n); s == "embedded" {
			return brokerList{embedded: true}, true
		}
		d.expected(n, path, want)
		return brokerList{}, false
	}
	items, ok := d.nonEmptyList(n, path)
	var b brokerList
	for i, it := range items {
		if it.node == nil {
			ok = false
			continue
		}
		node := it.node
		if m, isMap := node.(*ast.MappingNode); isMap {
			if node = d.flowHostPort(m); node == nil {
				d.errorf(it.at, index(path, i), "expected a host:port address, got a mapping (YAML reads `host: port` as one): quote it, \"host:port\"")
				ok = false
				continue
			}
		}
		addr, addrOK := d.address(true)(node, index(path, i))
		b.addrs = append(b.addrs, addr)
		ok = ok && addrOK
	}
	return b, ok
}

// flowHostPort recovers `host:port` written unquoted in a flow list inside
// a flow mapping (`kafka: {brokers: [localhost:9092]}`), which goccy/go-yaml
// reads as the mapping {localhost: 9092} although YAML makes it one plain
// scalar (a ':' not followed by a space). It returns the address as a
// string node when the source holds exactly key:value with no space, else
// nil.
func (d *decoder) flowHostPort(m *ast.MappingNode) ast.Node {
	if len(m.Values) != 1 || m.Values[0] == nil {
		return nil
	}
	kv := m.Values[0]
	key, keyOK := kv.Key.(*ast.StringNode)
	val, valOK := kv.Value.(*ast.IntegerNode)
	if !keyOK || !valOK || key.Token == nil || key.Token.Position == nil {
		return nil
	}
	at := tokenPos(key.Token)
	if at.line < 1 || at.line > len(d.lines) {
		return nil
	}
	line := []rune(d.lines[at.line-1])
	if at.col < 1 || at.col > len(line) {
		return nil
	}
	written := string(line[at.col-1:])
	if end := strings.IndexAny(written, ",]} \t#"); end >= 0 {
		written = written[:end]
	}
	if written != key.Value+":"+tokenText(val) {
		return nil
	}
	return ast.String(token.New(written, written, key.Token.Position))
}

// unique reports name when seen already holds it, else records it.
func (d *decoder) unique(seen map[string]int, what, name string, at pos, path string) {
	if line, dup := seen[name]; dup {
		d.errorf(at, path, "duplicate %s name %q (first at line %d)", what, name, line)
		return
	}
	seen[name] = at.line
}

func (d *decoder) pipeline(it item, path string, seen map[string]int) Pipeline {
	m := d.mapping(it.node, path, it.at, pipelineKeys...)
	p := Pipeline{Line: it.at.line}
	var ok bool
	if p.Name, ok = req(m, "name", d.pipelineName); ok {
		d.unique(seen, "pipeline", p.Name, m.valueAt("name"), m.child("name"))
	}

	in := m.sub("input", inputKeys...)
	p.Input.Topic, _ = req(in, "topic", d.topic)
	p.Input.Group, _ = opt(in, "group", "windowd-"+p.Name, d.str)
	parts, _ := opt(in, "partitions", DefaultPartitions, d.intIn(1, MaxPartitions))
	p.Input.Partitions = int32(parts)
	p.Input.Format, _ = opt(in, "format", JSON, oneOf(d, formats))
	if p.Input.Format != JSON {
		d.binary = append(d.binary, binaryInput{in.valueAt("format"), in.child("format"), p.Input.Format})
	}

	p.Filter, _ = opt(m, "filter", nil, d.expression(expr.Bool))
	p.Key = d.key(m.sub("key", keyKeys...))
	p.Timestamp = d.timestamp(m)
	p.Watermark = d.watermark(m.sub("watermark", watermarkKeys...))
	p.Spec = d.spec(m)
	p.Drain = d.drain(m, p.Spec.Window)
	if slices.ContainsFunc(d.aggExprs, func(x *expr.Program) bool { return x != nil }) {
		p.AggregateExprs = d.aggExprs
	}
	d.aggExprs = nil

	out := m.sub("output", outputKeys...)
	p.OutputTopic, _ = req(out, "topic", d.topic)
	p.OutputStdout, _ = opt(out, "stdout", false, d.boolean)
	p.ProgressInterval, _ = opt(out, "progress_interval", 0, d.duration(positive))
	p.LateTopic, _ = opt(m, "late_topic", "", d.topic)
	p.DeadLetterTopic, _ = opt(m, "dead_letter_topic", p.Name+"-dlq", d.topic)
	p.Delivery, _ = opt(m, "delivery", AtLeastOnce, oneOf(d, deliveries))
	commitDefault := int64(DefaultCommitInterval)
	if p.Delivery == ExactlyOnce {
		commitDefault = DefaultCommitIntervalExactlyOnce
	}
	p.CommitInterval, _ = opt(m, "commit_interval", commitDefault, d.duration(positive))
	p.Repartition = d.repartition(m, &p)

	// The topics windowd derives from the group and the name must be
	// valid Kafka topic names too, or run fails where validate said OK.
	if p.Name != "" && p.Input.Group != "" {
		derived := []string{p.ChangelogTopic()}
		if p.Repartition != nil {
			derived = append(derived, p.RepartitionTopic())
		}
		for _, topic := range derived {
			if !topicRE.MatchString(topic) {
				at, path := m.valueAt("name"), m.child("name")
				if in.has("group") {
					at, path = in.valueAt("group"), in.child("group")
				}
				d.errorf(at, path, "derived topic %q is not a valid Kafka topic name (at most 249 letters, digits, '.', '_' and '-'): shorten or change input.group or the pipeline name", topic)
				break
			}
		}
	}

	// Writing back to the input topic would feed a pipeline its own output.
	for _, t := range []struct {
		m     *mapping
		key   string
		topic string
	}{{out, "topic", p.OutputTopic}, {m, "late_topic", p.LateTopic}, {m, "dead_letter_topic", p.DeadLetterTopic}} {
		if t.m.has(t.key) && t.topic != "" && t.topic == p.Input.Topic {
			d.errorf(t.m.valueAt(t.key), t.m.child(t.key), "must differ from input.topic (%q)", p.Input.Topic)
		}
	}
	return p
}

// repartition reads `repartition: true` and the two settings that only
// apply with it.
func (d *decoder) repartition(m *mapping, p *Pipeline) *Repartition {
	on, _ := opt(m, "repartition", false, d.boolean)
	parts, _ := opt(m, "repartition_partitions", 0, d.intIn(1, MaxPartitions))
	interval, _ := opt(m, "watermark_interval", DefaultWatermarkInterval, d.duration(positive))
	if !on {
		for _, k := range []string{"repartition_partitions", "watermark_interval"} {
			if m.has(k) {
				d.errorf(m.keyAt(k), m.child(k), "only valid with repartition: true")
			}
		}
		return nil
	}
	if !p.Key.FromValue() {
		d.errorf(m.valueAt("repartition"), m.child("repartition"), "needs key.field, key.fields or key.expr (records keyed by the group key need no repartitioning)")
	}
	return &Repartition{Partitions: int32(parts), WatermarkInterval: interval}
}

func (d *decoder) timestamp(pm *mapping) Timestamp {
	if !pm.has("timestamp") {
		if !pm.broken {
			d.errorf(pm.at, pm.child("timestamp"), "required (a field, an expr, or source: record)")
		}
		return Timestamp{}
	}
	m := pm.sub("timestamp", timestampKeys...)
	var ts Timestamp
	ts.FromRecord, _ = opt(m, "source", false, oneOf(d, sources))
	ts.Field, _ = opt(m, "field", "", d.fieldPath)
	ts.Expr, _ = opt(m, "expr", nil, d.expression(expr.Timestamp))
	ts.Format, _ = opt(m, "format", UnixMS, oneOf(d, timeFormats))
	ts.MaxFuture, _ = opt(m, "max_future", 0, d.duration(positive))
	switch {
	case m.has("source") && m.has("field"):
		d.errorf(m.keyAt("source"), m.child("source"), "cannot be combined with field")
	case m.has("expr") && (m.has("field") || m.has("source")):
		d.errorf(m.keyAt("expr"), m.child("expr"), "cannot be combined with field or source")
	case m.has("format") && !m.has("field"):
		d.errorf(m.keyAt("format"), m.child("format"), "format is only valid with field")
	case !m.has("source") && !m.has("field") && !m.has("expr") && !m.broken:
		d.errorf(m.at, m.path, "needs a field, an expr, or source: record")
	}
	return ts
}

func (d *decoder) watermark(m *mapping) watermark.Spec {
	var s watermark.Spec
	var ok bool
	s.Strategy, ok = opt(m, "strategy", watermark.BoundedOutOfOrderness, oneOf(d, strategies))
	s.MaxDelay, _ = opt(m, "max_delay", 0, d.duration(nonNegative))
	if ok && s.Strategy == watermark.Monotonic && m.has("max_delay") {
		d.errorf(m.keyAt("max_delay"), m.child("max_delay"), "max_delay is only valid for bounded_out_of_orderness")
	}
	s.Every, _ = opt(m, "every", 1, d.intIn(1, math.MaxInt64))
	s.IdleTimeout, _ = opt(m, "idle_timeout", 0, d.duration(nonNegative))
	s.MaxDrift, _ = opt(m, "max_drift", 0, d.duration(positive))
	return s
}

func (d *decoder) spec(m *mapping) windowing.Spec {
	var s windowing.Spec
	s.Window = d.window(m.sub("window", windowKeys...))
	lateness, latenessOK := opt(m, "allowed_lateness", 0, d.duration(nonNegative))
	s.AllowedLateness = lateness
	s.Trigger = d.trigger(m.sub("trigger", triggerKeys...), lateness == 0 && latenessOK)
	s.Mode, _ = opt(m, "accumulation", windowing.Accumulating, oneOf(d, modes))
	s.Aggregates = d.aggregates(m)
	return s
}

func (d *decoder) window(m *mapping) windowing.WindowSpec {
	kind, kindOK := req(m, "type", oneOf(d, windowKinds))
	if kindOK && kind == windowing.Calendar {
		return d.calendar(m)
	}
	if kindOK && kind == windowing.Cumulate {
		return d.cumulate(m)
	}
	size, sizeOK := opt(m, "size", 0, d.duration(positive))
	hop, hopOK := opt(m, "hop", 0, d.duration(positive))
	gap, _ := opt(m, "gap", 0, d.duration(positive))
	offset, _ := opt(m, "offset", 0, d.duration(anySign))
	if !kindOK {
		return windowing.WindowSpec{}
	}
	d.windowFields(m, kind)
	switch kind {
	case windowing.Tumbling:
		return windowing.WindowSpec{Kind: kind, Size: size, Hop: size, Offset: offset}
	case windowing.Sliding:
		return windowing.WindowSpec{Kind: kind, Size: size}
	case windowing.Hopping:
		if m.has("size") && m.has("hop") && sizeOK && hopOK && hop > size {
			d.errorf(m.valueAt("hop"), m.child("hop"), "hop (%s) must not exceed size (%s)", m.raw("hop"), m.raw("size"))
		} else if sizeOK && hopOK && hop > 0 && (size+hop-1)/hop > MaxWindowsPerRecord {
			d.errorf(m.valueAt("hop"), m.child("hop"), "size / hop is %d windows for every record, more than %d: use a larger hop", (size+hop-1)/hop, MaxWindowsPerRecord)
		}
		return windowing.WindowSpec{Kind: kind, Size: size, Hop: hop, Offset: offset}
	default:
		return windowing.WindowSpec{Kind: kind, Gap: gap}
	}
}

// windowFields reports the fields kind requires and lacks, and those it
// does not take.
func (d *decoder) windowFields(m *mapping, kind windowing.WindowKind) {
	for _, f := range windowFields {
		takes := slices.Contains(f.kinds, kind)
		switch {
		case takes && f.required && !(kind == windowing.Calendar && f.name != "unit"):
			m.require(f.name)
		case !takes && m.has(f.name):
			d.errorf(m.keyAt(f.name), m.child(f.name), "%s is only valid for %s windows", f.name, f.validFor)
		}
	}
}

var (
	calendarUnits = []choice[windowing.CalendarUnit]{{"hour", windowing.Hour}, {"day", windowing.Day}, {"week", windowing.Week}, {"month", windowing.Month}, {"year", windowing.Year}}
	weekdays      = []choice[time.Weekday]{{"monday", time.Monday}, {"tuesday", time.Tuesday}, {"wednesday", time.Wednesday}, {"thursday", time.Thursday}, {"friday", time.Friday}, {"saturday", time.Saturday}, {"sunday", time.Sunday}}
)

// MaxCalendarSize bounds the units of a calendar window (docs/OPERATIONS.md,
// Limits).
const MaxCalendarSize = 10_000

// calendar decodes `type: calendar` (docs/SEMANTICS.md, Windows): size and
// hop count units, not durations.
func (d *decoder) calendar(m *mapping) windowing.WindowSpec {
	d.windowFields(m, windowing.Calendar)
	unit, unitOK := req(m, "unit", oneOf(d, calendarUnits))
	zone, _ := opt(m, "time_zone", time.UTC, d.timeZone)
	size, sizeOK := opt(m, "size", 1, d.intIn(1, MaxCalendarSize))
	hop, hopOK := opt(m, "hop", size, d.intIn(1, MaxCalendarSize))
	weekStart, _ := opt(m, "week_start", time.Monday, oneOf(d, weekdays))
	if sizeOK && hopOK && hop > size {
		d.errorf(m.valueAt("hop"), m.child("hop"), "hop (%d) must not exceed size (%d)", hop, size)
	}
	if unitOK && unit != windowing.Week && m.has("week_start") {
		d.errorf(m.keyAt("week_start"), m.child("week_start"), "week_start is only valid with unit: week")
	}
	return windowing.WindowSpec{Kind: windowing.Calendar, Calendar: &windowing.CalendarSpec{
		Unit: unit, Zone: zone, Size: size, Hop: hop, WeekStart: weekStart,
	}}
}

// cumulate decodes `type: cumulate` (docs/SEMANTICS.md, Cumulating
// windows): a fixed period (size, offset) or a calendar one (unit,
// time_zone, week_start), and the step between window ends.
func (d *decoder) cumulate(m *mapping) windowing.WindowSpec {
	for _, f := range windowFields {
		if !slices.Contains(f.kinds, windowing.Cumulate) && m.has(f.name) {
			d.errorf(m.keyAt(f.name), m.child(f.name), "%s is only valid for %s windows", f.name, f.validFor)
		}
	}
	m.require("step")
	step, stepOK := opt(m, "step", 0, d.duration(positive))
	if !m.has("unit") {
		for _, f := range []string{"time_zone", "week_start"} {
			if m.has(f) {
				d.errorf(m.keyAt(f), m.child(f), "%s is only valid with unit (calendar periods)", f)
			}
		}
		m.require("size")
		size, sizeOK := opt(m, "size", 0, d.duration(positive))
		offset, _ := opt(m, "offset", 0, d.duration(anySign))
		if sizeOK && stepOK && step > 0 {
			switch {
			case size%step != 0:
				d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must divide size (%s)", m.raw("step"), m.raw("size"))
			case size/step > MaxWindowsPerRecord:
				d.errorf(m.valueAt("step"), m.child("step"), "size / step is %d windows for every record, more than %d: use a larger step", size/step, MaxWindowsPerRecord)
			}
		}
		return windowing.WindowSpec{Kind: windowing.Cumulate, Size: size, Step: step, Offset: offset}
	}
	for _, f := range []string{"size", "offset"} {
		if m.has(f) {
			d.errorf(m.keyAt(f), m.child(f), "%s is only valid without unit: a calendar period is one unit", f)
		}
	}
	unit, unitOK := req(m, "unit", oneOf(d, calendarUnits))
	zone, _ := opt(m, "time_zone", time.UTC, d.timeZone)
	weekStart, _ := opt(m, "week_start", time.Monday, oneOf(d, weekdays))
	if unitOK && unit != windowing.Week && m.has("week_start") {
		d.errorf(m.keyAt("week_start"), m.child("week_start"), "week_start is only valid with unit: week")
	}
	if unitOK && stepOK && step > 0 {
		switch {
		case unit == windowing.Hour:
			d.errorf(m.valueAt("unit"), m.child("unit"), "cumulate periods are days, weeks, months or years; for an hour use size: 1h")
		case unit == windowing.Day && (step%msPerHour != 0 || msPerDay%step != 0):
			d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must be a whole number of hours that divides a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h)", m.raw("step"))
		case unit == windowing.Week && step != msPerDay && step != 7*msPerDay:
			d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must divide a week: 24h or 168h", m.raw("step"))
		case (unit == windowing.Month || unit == windowing.Year) && step%msPerDay != 0:
			d.errorf(m.valueAt("step"), m.child("step"), "step (%s) must be a whole number of days (24h, 48h, …)", m.raw("step"))
		}
	}
	return windowing.WindowSpec{Kind: windowing.Cumulate, Step: step, Calendar: &windowing.CalendarSpec{
		Unit: unit, Zone: zone, Size: 1, Hop: 1, WeekStart: weekStart,
	}}
}

const (
	msPerHour = int64(time.Hour / time.Millisecond)
	msPerDay  = 24 * msPerHour
)

// timeZone accepts an IANA time zone name. "Local" is refused: it would
// depend on the machine.
func (d *decoder) timeZone(n ast.Node, path string) (*time.Location, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return nil, false
	}
	loc, err := time.LoadLocation(s)
	if err != nil || s == "Local" {
		d.errorf(posOf(n), path, "unknown time zone %q (use an IANA name like \"Europe/Rome\")", s)
		return nil, false
	}
	return loc, true
}

func (d *decoder) trigger(m *mapping, noLateness bool) windowing.TriggerSpec {
	var t windowing.TriggerSpec
	if m.has("early") {
		early := m.sub("early", earlyKeys...)
		t.EarlyCount, _ = opt(early, "count", 0, d.intIn(1, math.MaxInt64))
		t.EarlyEvery, _ = opt(early, "every", 0, d.duration(positive))
		if !early.has("count") && !early.has("every") && !early.broken {
			d.errorf(early.at, early.path, "needs count or every")
		}
	}
	t.OnTime, _ = opt(m, "on_time", true, d.boolean)
	if m.has("late") {
		t.Late = true
		t.LateEvery, _ = opt(m.sub("late", lateKeys...), "every", 0, d.duration(nonNegative))
		if noLateness {
			d.errorf(m.keyAt("late"), m.child("late"), "needs allowed_lateness > 0")
		}
	}
	var closingOK bool
	t.Closing, closingOK = opt(m, "closing", windowing.ClosingAlways, oneOf(d, closings))
	if !m.has("early") && !m.has("late") && m.has("on_time") && !t.OnTime && closingOK && t.Closing == windowing.ClosingNever {
		d.errorf(m.at, m.path, "never fires a pane (on_time is false, closing is never, no early or late)")
	}
	return t
}

func (d *decoder) aggregates(pm *mapping) []windowing.AggSpec {
	path := pm.child("aggregates")
	items, _ := req(pm, "aggregates", d.nonEmptyList)
	seen := map[string]int{}
	var aggs []windowing.AggSpec
	for i, it := range items {
		if it.node == nil {
			continue
		}
		m := d.mapping(it.node, index(path, i), it.at, aggregateKeys...)
		var a windowing.AggSpec
		var ok bool
		if a.Name, ok = req(m, "name", d.aggregateName); ok {
			d.unique(seen, "aggregate", a.Name, m.valueAt("name"), m.child("name"))
		}
		a.Op, ok = req(m, "op", oneOf(d, aggOps))
		a.Field, _ = opt(m, "field", "", d.fieldPath)
		want := expr.Number
		if a.Op.NeedsText() {
			want = expr.Any
		}
		var x *expr.Program
		if ok {
			x, _ = opt(m, "expr", nil, d.expression(want))
		}
		precision, _ := opt(m, "precision", windowing.DefaultPrecision, d.intIn(4, 18))
		if ok {
			switch {
			case a.Op == windowing.Count && (m.has("field") || m.has("expr")):
				k := "field"
				if !m.has("field") {
					k = "expr"
				}
				d.errorf(m.keyAt(k), m.child(k), "%s is not valid for count", k)
			case m.has("field") && m.has("expr"):
				d.errorf(m.keyAt("expr"), m.child("expr"), "cannot be combined with field")
			case a.Op != windowing.Count && !m.has("field") && !m.has("expr") && !m.broken:
				d.errorf(m.at, m.child("field"), "required for %s (or an expr)", a.Op)
			}
			if a.Op == windowing.DistinctApprox {
				a.Precision = uint8(precision)
			} else if m.has("precision") {
				d.errorf(m.keyAt("precision"), m.child("precision"), "precision is only valid for distinct_approx")
			}
			d.sketchOptions(m, &a)
		}
		aggs = append(aggs, a)
		d.aggExprs = append(d.aggExprs, x)
	}
	return aggs
}

// key reads key: a field, fields (a composite key) or an expr; none is
// the Kafka record key.
func (d *decoder) key(m *mapping) Key {
	var k Key
	k.Field, _ = opt(m, "field", "", d.fieldPath)
	k.Fields, _ = opt(m, "fields", nil, d.fieldPaths)
	k.Expr, _ = opt(m, "expr", nil, d.expression(expr.Any))
	set := 0
	for _, name := range keyKeys {
		if m.has(name) {
			if set++; set == 2 {
				d.errorf(m.keyAt(name), m.child(name), "key takes one of field, fields and expr")
			}
		}
	}
	return k
}

// fieldPaths is a non-empty list of distinct field paths.
func (d *decoder) fieldPaths(n ast.Node, path string) ([]string, bool) {
	items, ok := d.nonEmptyList(n, path)
	if !ok {
		return nil, false
	}
	var out []string
	seen := map[string]int{}
	for i, it := range items {
		f, ok := d.fieldPath(it.node, index(path, i))
		if !ok {
			return nil, false
		}
		d.unique(seen, "field", f, it.at, index(path, i))
		out = append(out, f)
	}
	return out, true
}

// drain reads a pipeline's drain (docs/OPERATIONS.md, Changing a deployed
// pipeline): the window definition its state was built under, and the
// cut. Both windows must be fixed windows (tumbling, hopping, calendar):
// a record belongs to the windows its time gives, under one definition or
// the other.
func (d *decoder) drain(m *mapping, cur windowing.WindowSpec) *Drain {
	if !m.has("drain") {
		return nil
	}
	dm := m.sub("drain", "window", "until")
	w := d.window(dm.sub("window", windowKeys...))
	until, untilOK := req(dm, "until", d.instant)
	fixed := func(k windowing.WindowKind) bool {
		return k == windowing.Tumbling || k == windowing.Hopping || k == windowing.Calendar
	}
	switch {
	case w.Kind != 0 && !fixed(w.Kind):
		d.errorf(dm.valueAt("window"), dm.child("window"), "a drain finishes tumbling, hopping or calendar windows, not %s windows: run the new definition as a new pipeline next to the old one instead", w.Kind)
	case cur.Kind != 0 && !fixed(cur.Kind):
		d.errorf(m.keyAt("drain"), m.child("drain"), "a drain switches to tumbling, hopping or calendar windows, not %s windows: run the new definition as a new pipeline next to the old one instead", cur.Kind)
	case untilOK && w.Kind != 0 && cur.Kind != 0:
		if ok, next := windowing.CheckDrain(w, cur, until); !ok {
			hint := "choose another cut"
			if next != 0 {
				hint = "the next cut that can is " + time.UnixMilli(next).UTC().Format(time.RFC3339Nano)
			}
			d.errorf(dm.valueAt("until"), dm.child("until"), "at this cut a window of the pipeline's window that holds records from the cut on starts where a window of drain.window starts but ends elsewhere, and a key's windows are told apart by their start: %s", hint)
			return nil
		}
		return &Drain{Window: w, Until: until}
	}
	return nil
}

// instant accepts an RFC 3339 time and returns its Unix milliseconds.
func (d *decoder) instant(n ast.Node, path string) (int64, bool) {
	s, ok := text(n)
	if !ok {
		d.expected(n, path, `an RFC 3339 time like "2026-12-04T06:00:00Z"`)
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.errorf(posOf(n), path, "invalid time %s (an RFC 3339 time like \"2026-12-04T06:00:00Z\")", quote(s))
		return 0, false
	}
	return t.UnixMilli(), true
}
