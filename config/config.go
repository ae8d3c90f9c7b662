// Package config turns a windowd YAML (or JSON) file into typed, validated
// pipeline specs (docs/SEMANTICS.md, Configuration). Loading never stops at
// the first problem: every unknown field, bad value and inconsistency is
// reported.
//
// # Errors
//
// Load and Parse return an *Errors holding every Problem, sorted by position.
// Its Error() is one line per problem:
//
//	file:line:col: path: message
//
// path names the field as it is nested in the file, with list indexes
// (`kafka.brokers[1]`, `pipelines[0].window.hop`); the message is short and
// lower-case. For example:
//
//	windowd.yaml:7:5: pipelines[0].windw: unknown field "windw" (did you mean "window"?)
//	windowd.yaml:9:12: pipelines[0].window.hop: hop (20s) must not exceed size (10s)
//	windowd.yaml:4:5: pipelines[0].input.topic: required
//	windowd.yaml:12:19: pipelines[0].allowed_lateness: 5 is not a duration (use a duration string like "10s")
//
// Positions are 1-based. A problem with a value points at the value; an
// unknown, duplicate or misplaced field points at its key; a missing field
// points at the key of the mapping that lacks it (for a pipeline or an
// aggregate, at its list entry's `-` or `{`; for a top-level field, at the
// first key of the file). A YAML syntax error stops parsing and is the only
// problem reported: `file:line:col: syntax error: ...`.
//
// # Values
//
// Durations are Go duration strings ("250ms", "10s", "24h") holding a whole
// number of milliseconds; a plain number is not a duration. Strings, integers
// and booleans must have their YAML type (`on_time: yes` is a string, not a
// boolean), and null is never a valid value: omit a field to get its default.
// state.cache_bytes is an integer number of bytes or a string with a unit:
// B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024). Anchors,
// aliases and merge keys (`<<: *defaults`) are resolved; a problem in an
// aliased value points at the anchored text.
//
// # Secrets and files
//
// kafka.sasl.username and kafka.sasl.password may reference environment
// variables as ${NAME} (a letter or '_', then letters, digits and '_'), as
// the whole value or inside it ("${USER_PREFIX}-windowd"); every "${" starts
// such a reference, and nothing else is expanded. An unset variable is a
// problem that names the variable. kafka.sasl.password_file is read
// instead of password, without expansion, and one or more trailing newlines
// are trimmed. The files of kafka.tls and password_file are read at load
// (relative paths from the working directory); an unreadable or unusable
// file is reported at its field. No problem message ever contains the
// password, and SASL.Password is a Secret.
package config

import (
	"errors"
	"strings"

	"github.com/windowd/windowd/expr"
	"github.com/windowd/windowd/watermark"
	"github.com/windowd/windowd/windowing"
)

// Config is a whole validated configuration file.
type Config struct {
	File  string // the path it was loaded from
	Kafka Kafka
	State State
	HTTP  HTTP
	// ShutdownGrace bounds how long a SIGTERM/SIGINT shutdown may take (ms); default 20s.
	ShutdownGrace int64
	// Generator, when set, produces a demo event stream to the embedded broker.
	Generator *Generator
	// SchemaRegistry is where avro and protobuf pipelines find their
	// schemas; nil when no schema_registry is configured.
	SchemaRegistry *SchemaRegistry
	Pipelines      []Pipeline
}

// SchemaRegistry is `schema_registry`: a Confluent-compatible Schema
// Registry (docs/SEMANTICS.md, Input formats). The loader checked the TLS
// files as it checks kafka.tls's.
type SchemaRegistry struct {
	URL      string // http:// or https:// base URL
	Username string // basic auth; empty: none
	Password Secret
	TLS      *TLS // nil: the system roots (https) or plaintext (http)
}

// Generator produces a realistic demo stream: JSON values
// {"user_id","ts","amount","page"} keyed by user_id, out of order within
// Disorder, with every LateEvery-th record LateBy behind and every
// MalformedEvery-th record not valid JSON (0: never).
type Generator struct {
	Topic          string
	Rate           int64 // records per second; default 100
	Keys           int64 // distinct user ids; default 20
	Disorder       int64 // ms; default 2s
	LateEvery      int64
	LateBy         int64 // ms; default 30s
	MalformedEvery int64
}

// Kafka is the cluster connection.
type Kafka struct {
	Brokers        []string // empty when Embedded, or when not configured (see HasBrokers)
	Embedded       bool     // `brokers: embedded`: an in-process broker
	EmbeddedListen string   // default 127.0.0.1:19092
	ClientID       string   // default windowd
	SessionTimeout int64    // consumer-group session timeout (ms): how soon a dead member's partitions move; default 45s
	Compression    string   // codec of the record batches windowd produces: lz4 (default), snappy, zstd, gzip or none
	TLS            *TLS     // nil: plaintext
	SASL           *SASL    // nil: no SASL authentication
}

// TLS is `kafka.tls`: connect to the brokers over TLS. The loader checked
// that the files were readable and held PEM certificates (and a key that
// matches CertFile); the service reads them again when it connects.
type TLS struct {
	CAFile             string // PEM CA bundle; empty: the system roots
	CertFile           string // PEM client certificate for mTLS; set iff KeyFile is
	KeyFile            string // PEM private key of CertFile
	ServerName         string // name to verify in the broker certificate; empty: the broker host
	InsecureSkipVerify bool   // do not verify the broker certificate (tests only)
}

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASL is `kafka.sasl`: authenticate to the brokers with a user name and
// password. Username and Password hold their final values: ${NAME}
// references expanded, password_file read.
type SASL struct {
	Mechanism string // SASLPlain, SASLScramSHA256 or SASLScramSHA512
	Username  string
	Password  Secret
}

// Secret is a value that must not be printed or logged: its String,
// GoString and MarshalText give "[redacted]", so %v, %+v, %#v, JSON and zap
// fields of a configuration never show it. The value sits behind a pointer,
// so that even fmt's reflection (`%s` of a whole Config, which prints a
// nested *SASL without calling methods) shows an address, not the value.
// Reveal returns the value.
type Secret struct{ value *string }

// NewSecret returns a Secret holding s.
func NewSecret(s string) Secret { return Secret{&s} }

const redacted = "[redacted]"

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]".
func (Secret) GoString() string { return redacted }

// MarshalText returns "[redacted]".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Reveal returns the secret value, for the one place that needs it.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// State configures local state.
type State struct {
	Dir        string // default ./data
	CacheBytes int64  // byte budget of the in-memory window cache; default 64 MiB
	// StandbyReplicas is how many other instances keep a warm copy of
	// each partition's state by tailing its changelog (docs/OPERATIONS.md,
	// Standby replicas); default 0.
	StandbyReplicas int
}

// HTTP configures the metrics and health listener.
type HTTP struct {
	Listen string // default 127.0.0.1:9100
	// Advertise is the host:port the other members forward queries to
	// (docs/OPERATIONS.md, Querying windows); default: the listener's
	// address, with the host name when it listens on every interface.
	Advertise string
}

// TimeFormat says how a numeric or string timestamp field is read.
type TimeFormat uint8

// Timestamp formats.
const (
	UnixMS TimeFormat = iota
	UnixS
	UnixUS
	UnixNS
	RFC3339
)

// String is the timestamp format's name in the configuration.
func (f TimeFormat) String() string {
	switch f {
	case UnixS:
		return "unix_s"
	case UnixUS:
		return "unix_us"
	case UnixNS:
		return "unix_ns"
	case RFC3339:
		return "rfc3339"
	}
	return "unix_ms"
}

// Format is how an input record's value is encoded.
type Format uint8

// Input formats (docs/SEMANTICS.md, Input formats).
const (
	JSON     Format = iota // a JSON object
	Avro                   // Confluent wire format, Avro with a registry schema
	Protobuf               // Confluent wire format, Protobuf with a registry schema
	// JSONSchema is an output format only: the pane JSON in the Confluent
	// wire format, with a JSON Schema registered for it.
	JSONSchema
)

// String is the format's name in the configuration.
func (f Format) String() string {
	switch f {
	case Avro:
		return "avro"
	case Protobuf:
		return "protobuf"
	case JSONSchema:
		return "json_schema"
	}
	return "json"
}

// Input is the pipeline's input topic.
type Input struct {
	Topic      string
	Group      string // default windowd-<name>
	Partitions int32  // only used to create the topic on the embedded broker; default 4
	Format     Format // default JSON
}

// Source is one input topic of a pipeline with several (Pipeline.Inputs,
// docs/SEMANTICS.md, Several inputs): its topic and name, and how its
// records are read (the pipeline's filter, key and timestamp unless it
// has its own).
type Source struct {
	Topic      string
	As         string // the name aggregates give as their input; default: the topic
	Partitions int32  // as Input.Partitions
	Format     Format
	Filter     *expr.Program
	Key        Key
	Timestamp  Timestamp
}

// Key says where the group key comes from: at most one of Field, Fields
// and Expr is set; none: the Kafka record key.
type Key struct {
	Field string // dotted path
	// Fields: a composite key, the compact JSON array of the fields'
	// values in this order (docs/SEMANTICS.md, Records and keys).
	Fields []string
	Expr   *expr.Program // its string result, or the JSON text of any other
}

// FromValue reports whether the key is read from the record's value (and
// so may be on any input partition).
func (k Key) FromValue() bool { return k.Field != "" || len(k.Fields) > 0 || k.Expr != nil }

// String names the key's source for messages.
func (k Key) String() string {
	switch {
	case k.Field != "":
		return k.Field
	case len(k.Fields) > 0:
		return "[" + strings.Join(k.Fields, ", ") + "]"
	case k.Expr != nil:
		return k.Expr.Source()
	}
	return "the record key"
}

// Timestamp says where event time comes from.
type Timestamp struct {
	FromRecord bool          // `source: record`: the Kafka record timestamp
	Field      string        // dotted path, when not FromRecord
	Expr       *expr.Program // a CEL timestamp or an int of Unix ms, when neither
	Format     TimeFormat
	// MaxFuture (ms; 0: off) dead-letters a record whose event time is
	// more than this ahead of processing time: the wall clock in run, the
	// clock lines in replay (docs/SEMANTICS.md, Bad input: far-future
	// event times).
	MaxFuture int64
}

// Delivery is the delivery guarantee.
type Delivery uint8

// Delivery guarantees.
const (
	AtLeastOnce Delivery = iota
	ExactlyOnce
)

// String is the delivery guarantee's name in the configuration.
func (d Delivery) String() string {
	if d == ExactlyOnce {
		return "exactly_once"
	}
	return "at_least_once"
}

// PaneTime is the timestamp of the records windowd writes to the output
// topic (output.timestamp; docs/SEMANTICS.md, Output).
type PaneTime uint8

// Pane record timestamps.
const (
	// WindowEnd stamps a pane with its window's end - 1 (a count window's:
	// its last record's event time) and a progress record with its
	// frontier: event time, as the panes' contents.
	WindowEnd PaneTime = iota
	// EmitTime stamps panes and progress records with the wall-clock time
	// they are produced: the broker's time-based retention then counts
	// from when they were written, whatever their event times.
	EmitTime
)

// String is the pane time's name in the configuration.
func (t PaneTime) String() string {
	if t == EmitTime {
		return "emit_time"
	}
	return "window_end"
}

// Pipeline is one windowing job over one input topic (or several: Inputs).
type Pipeline struct {
	Name  string
	Line  int // line of the pipeline entry in the file, for messages
	Input Input
	// Inputs: a pipeline with several input topics (inputs:, 2 to
	// MaxInputs; nil: one, Input). Input then holds the first input's
	// topic, partitions and format, and the pipeline's group.
	Inputs []Source
	// AggregateInputs, index for index with Spec.Aggregates: the index in
	// Inputs of the input an aggregate reads (aggregates[].input), or -1
	// for every input's records. Nil with one input.
	AggregateInputs []int
	// Join: the pipeline joins two of its inputs instead of aggregating
	// (docs/SEMANTICS.md, Joins; Spec is then unused).
	Join *windowing.JoinSpec
	// SkipAggregates (ForInput's pipelines only): the aggregates the
	// input's records do not feed.
	SkipAggregates []bool
	Filter         *expr.Program // keep the record when true; nil: every record
	Key            Key
	Timestamp      Timestamp
	Watermark      watermark.Spec
	Spec           windowing.Spec // window, lateness, trigger, accumulation, aggregates
	// Drain, when set, finishes the windows of the definition the
	// pipeline's state was built under before Spec.Window takes over.
	Drain *Drain
	// AggregateExprs holds, index for index with Spec.Aggregates, the
	// expression of an aggregate written with expr (nil: with field, or
	// count).
	AggregateExprs []*expr.Program
	// CloseWhen and DiscardWhen end a transaction window (window.close_when,
	// window.discard_when; nil: none).
	CloseWhen, DiscardWhen *expr.Program
	OutputTopic            string
	OutputStdout           bool // also print every pane's JSON on standard output (demos)
	// OutputTimestamp: which time the output topic's records carry.
	OutputTimestamp PaneTime
	// OutputFormat: the panes' value format; a binary one registers the
	// pane schema under OutputSubject (default <output topic>-value,
	// the TopicNameStrategy) and writes the Confluent wire format.
	OutputFormat  Format
	OutputSubject string
	// ProgressInterval: write a progress record to every output partition
	// this often (ms; 0: off; docs/SEMANTICS.md, Progress records).
	ProgressInterval int64
	LateTopic        string // optional
	DeadLetterTopic  string // default <name>-dlq
	Delivery         Delivery
	CommitInterval   int64 // ms between commit cycles; default 1s
	// CommitIntervalMax: how long a cycle may be put off while the input
	// waiting in Kafka takes longer to process than the cycle so far
	// (ms; default max(CommitInterval, 1s); docs/SEMANTICS.md, Delivery).
	CommitIntervalMax int64
	// Repartition, when set, runs the pipeline in two stages joined by the
	// internal topic <group>-<name>-repartition (docs/SEMANTICS.md,
	// Repartitioning).
	Repartition *Repartition
	// Workers bounds the goroutines a pipeline's work runs on (0: unset,
	// every core; docs/OPERATIONS.md, Workers): in run the poll loop, and
	// above 1 a decoding and a pane-writing goroutine beside it; replay's
	// default --workers.
	Workers int
}

// MaxWorkers bounds a pipeline's workers (and replay's --workers).
const MaxWorkers = 64

// MaxInputs bounds a pipeline's inputs.
const MaxInputs = 8

// InputTopics is the pipeline's input topics, in the order of Inputs (one
// input: Input.Topic).
func (p *Pipeline) InputTopics() []string {
	if p.Inputs == nil {
		return []string{p.Input.Topic}
	}
	topics := make([]string, len(p.Inputs))
	for i, in := range p.Inputs {
		topics[i] = in.Topic
	}
	return topics
}

// BinaryInput reports whether an input of the pipeline is in avro or
// protobuf: its values are read with schemas from the schema registry.
func (p *Pipeline) BinaryInput() bool {
	if p.Inputs == nil {
		return p.Input.Format != JSON
	}
	for _, in := range p.Inputs {
		if in.Format != JSON {
			return true
		}
	}
	return false
}

// ForInput returns the pipeline as the records of Inputs[i] see it: its
// topic, format, filter, key and timestamp, and in SkipAggregates the
// aggregates of the other inputs. Without Inputs it returns p.
func (p *Pipeline) ForInput(i int) *Pipeline {
	if p.Inputs == nil {
		return p
	}
	q := *p
	in := p.Inputs[i]
	q.Input = Input{Topic: in.Topic, Group: p.Input.Group, Partitions: in.Partitions, Format: in.Format}
	q.Filter, q.Key, q.Timestamp = in.Filter, in.Key, in.Timestamp
	q.SkipAggregates = make([]bool, len(p.Spec.Aggregates))
	for j, from := range p.AggregateInputs {
		q.SkipAggregates[j] = from >= 0 && from != i
	}
	return &q
}

// ChangelogTopic names the pipeline's changelog: <group>-<name>-changelog.
func (p *Pipeline) ChangelogTopic() string { return p.Input.Group + "-" + p.Name + "-changelog" }

// RepartitionTopic names the internal topic of a repartitioned pipeline
// (and stage 2's group): <group>-<name>-repartition.
func (p *Pipeline) RepartitionTopic() string { return p.Input.Group + "-" + p.Name + "-repartition" }

// Repartition configures a two-stage pipeline: stage 1 reads the input,
// re-keys every record by the group key and broadcasts watermark markers;
// stage 2 windows the internal topic.
type Repartition struct {
	Partitions        int32 // of the internal topic; 0: the input topic's count
	WatermarkInterval int64 // ms between marker broadcasts at the latest; default 200ms
}

// MaxWindowsPerRecord bounds size/hop of hopping windows: the windows one
// record belongs to, each with its own state and panes (docs/OPERATIONS.md,
// Limits).
const MaxWindowsPerRecord = 10_000

// MaxPartitions bounds the partitions of one pipeline: input.partitions,
// repartition_partitions and a replay's partitions (docs/OPERATIONS.md,
// Limits). Kafka's own guidance keeps a broker to a few thousand
// partitions, and one topic far below that.
const MaxPartitions = 10_000

// DefaultWatermarkInterval is how often stage 1 broadcasts markers at the latest (ms).
const DefaultWatermarkInterval = 200

// Pipeline returns the pipeline with the given name, or nil.
func (c *Config) Pipeline(name string) *Pipeline {
	for i := range c.Pipelines {
		if c.Pipelines[i].Name == name {
			return &c.Pipelines[i]
		}
	}
	return nil
}

// ErrNoBrokers is what `windowd run` says of a configuration without
// kafka.brokers, which replay and validate accept (docs/SEMANTICS.md,
// Configuration).
var ErrNoBrokers = errors.New("kafka.brokers is required to run (a list of host:port addresses, or embedded); replay and validate do without it")

// HasBrokers reports whether the configuration says which Kafka to use.
func (c *Config) HasBrokers() bool { return c.Kafka.Embedded || len(c.Kafka.Brokers) > 0 }

// Drain finishes a pipeline's previous windows after a change of window
// (docs/OPERATIONS.md, Changing a deployed pipeline): records before Until
// go to the windows of Window, the definition the state was built under;
// records from Until on go to the pipeline's window.
type Drain struct {
	Window windowing.WindowSpec
	Until  int64 // Unix ms: the cut
}
