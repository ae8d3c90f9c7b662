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
	"strings"
	// The time zones of calendar windows resolve on a machine without
	// system zoneinfo too (docs/SEMANTICS.md, Windows).
	_ "time/tzdata"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

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
	DefaultCommitIntervalExactlyOnce = 100 // ms
	// TransactionTimeout is how long the broker lets an exactly_once
	// transaction stay open (Kafka Streams' exactly_once default): a
	// commit cycle must end well within it.
	TransactionTimeout    = 10000 // ms
	DefaultShutdownGrace  = 20000 // ms: room under Kubernetes' 30 s terminationGracePeriodSeconds
	DefaultSessionTimeout = 45000 // ms, Kafka's default
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
	httpKeys      = []string{"listen", "advertise"}
	pipelineKeys  = []string{"name", "input", "inputs", "group", "join", "filter", "key", "timestamp", "watermark", "window", "allowed_lateness", "trigger", "accumulation", "aggregates", "output", "late_topic", "dead_letter_topic", "delivery", "commit_interval", "commit_interval_max", "repartition", "repartition_partitions", "watermark_interval", "drain", "workers"}
	inputKeys     = []string{"topic", "group", "partitions", "format"}
	sourceKeys    = []string{"topic", "as", "partitions", "format", "filter", "key", "timestamp"}
	registryKeys  = []string{"url", "basic_auth", "tls"}
	basicKeys     = []string{"username", "password", "password_file"}
	keyKeys       = []string{"field", "fields", "expr"}
	timestampKeys = []string{"field", "expr", "format", "source", "max_future"}
	watermarkKeys = []string{"strategy", "max_delay", "every", "idle_timeout", "max_drift", "quiet_advance"}
	windowKeys    = []string{"type", "size", "hop", "gap", "offset", "step", "unit", "time_zone", "week_start", "close_when", "discard_when", "timeout"}
	triggerKeys   = []string{"early", "on_time", "late", "closing"}
	earlyKeys     = []string{"count", "every"}
	lateKeys      = []string{"every"}
	aggregateKeys = []string{"name", "op", "input", "of", "to", "field", "expr", "precision", "quantiles", "relative_accuracy", "max_buckets", "k", "capacity"}
	outputKeys    = []string{"topic", "stdout", "progress_interval", "timestamp", "format", "subject"}

	// Enumerations are named by their String methods.
	formats      = named(JSON, Avro, Protobuf)
	outFormats   = named(JSON, Avro, Protobuf, JSONSchema)
	timeFormats  = named(UnixS, UnixMS, UnixUS, UnixNS, RFC3339)
	sources      = []choice[bool]{{"record", true}}
	strategies   = named(watermark.BoundedOutOfOrderness, watermark.Monotonic)
	windowKinds  = named(windowing.Tumbling, windowing.Hopping, windowing.Session, windowing.Calendar, windowing.Cumulate, windowing.Sliding, windowing.CountWindow, windowing.Transaction)
	closings     = named(windowing.ClosingAlways, windowing.ClosingIfChanged, windowing.ClosingNever)
	modes        = named(windowing.Accumulating, windowing.Discarding, windowing.Retracting)
	aggOps       = named(windowing.Count, windowing.Sum, windowing.Min, windowing.Max, windowing.Avg, windowing.DistinctApprox, windowing.Quantiles, windowing.TopK, windowing.Ratio)
	deliveries   = named(AtLeastOnce, ExactlyOnce)
	paneTimes    = named(WindowEnd, EmitTime)
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
		{"close_when", []windowing.WindowKind{windowing.Transaction}, true, "transaction"},
		{"discard_when", []windowing.WindowKind{windowing.Transaction}, false, "transaction"},
		{"timeout", []windowing.WindowKind{windowing.Transaction}, true, "transaction"},
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
	httpNode := root.sub("http", httpKeys...)
	c.HTTP.Listen, _ = opt(httpNode, "listen", c.HTTP.Listen, d.address(false))
	c.HTTP.Advertise, _ = opt(httpNode, "advertise", "", d.address(true))
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
			if p.output {
				d.errorf(p.at, p.path, "%s output needs schema_registry (the registry its pane schema is registered in; docs/SEMANTICS.md, Output)", p.format)
			} else {
				d.errorf(p.at, p.path, "%s needs schema_registry (the registry its schemas come from; docs/SEMANTICS.md, Input formats)", p.format)
			}
		}
	}
	if c.Generator != nil && c.Generator.Topic != "" && !c.Kafka.Embedded && !root.broken {
		d.errorf(root.keyAt("generator"), "generator", "only valid with kafka.brokers: embedded")
	}
	return c
}

// binaryInput is a pipeline's input.format or output.format that needs
// schema_registry.
type binaryInput struct {
	at     pos
	path   string
	format Format
	output bool // output.format, not input.format
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
