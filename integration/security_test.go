package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/service"
)

// The security tests run windowd against the SASL_SSL and mTLS listeners of
// a broker started with `WINDOWD_KAFKA_SECURITY=1 scripts/kafka-local.sh
// start`; topics are created and read through the plain listener
// (WINDOWD_KAFKA_BROKERS). Environment:
//
//	WINDOWD_KAFKA_SASL_SSL        host:port of the SASL_SSL listener (SCRAM-SHA-512)
//	WINDOWD_KAFKA_MTLS            host:port of the SSL listener that requires a client certificate
//	WINDOWD_KAFKA_SECURITY_DIR    the script's <data dir>/security: ca.pem, client.pem, client.key
//	WINDOWD_KAFKA_SCRAM_USER      default windowd
//	WINDOWD_KAFKA_SCRAM_PASSWORD  default windowd-secret

// secSettings are the security listeners and credentials of the test broker.
type secSettings struct {
	saslSSL, mtls string
	dir           string
	user, pass    string
}

// secEnv returns the settings, or skips the test when the variables it
// needs are not set.
func secEnv(t *testing.T, need ...string) secSettings {
	t.Helper()
	s := secSettings{
		saslSSL: os.Getenv("WINDOWD_KAFKA_SASL_SSL"),
		mtls:    os.Getenv("WINDOWD_KAFKA_MTLS"),
		dir:     os.Getenv("WINDOWD_KAFKA_SECURITY_DIR"),
		user:    cmpOr(os.Getenv("WINDOWD_KAFKA_SCRAM_USER"), "windowd"),
		pass:    cmpOr(os.Getenv("WINDOWD_KAFKA_SCRAM_PASSWORD"), "windowd-secret"),
	}
	for _, v := range append([]string{"WINDOWD_KAFKA_BROKERS", "WINDOWD_KAFKA_SECURITY_DIR"}, need...) {
		if os.Getenv(v) == "" {
			t.Skipf("%s is not set: the security tests need a broker started with "+
				"WINDOWD_KAFKA_SECURITY=1 scripts/kafka-local.sh start, and WINDOWD_KAFKA_BROKERS, "+
				"WINDOWD_KAFKA_SASL_SSL, WINDOWD_KAFKA_MTLS and WINDOWD_KAFKA_SECURITY_DIR", v)
		}
	}
	return s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s secSettings) file(name string) string { return filepath.Join(s.dir, name) }

var brokersLineRE = regexp.MustCompile(`(?m)^  brokers: \[.*\]$`)

// secConfig replaces the brokers of the env's configuration by kafkaYAML
// (lines of the kafka mapping, brokers included) and checks that it loads
// with env set.
func (e *env) secConfig(kafkaYAML string, env map[string]string) {
	e.t.Helper()
	src := readFile(e.t, e.cfgPath)
	if !brokersLineRE.MatchString(src) {
		e.t.Fatalf("no brokers line in\n%s", src)
	}
	writeFile(e.t, e.cfgPath, brokersLineRE.ReplaceAllLiteralString(src, strings.TrimRight(kafkaYAML, "\n")))
	for k, v := range env {
		e.t.Setenv(k, v)
	}
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		e.t.Fatalf("config:\n%s\n%v", readFile(e.t, e.cfgPath), err)
	}
	e.cfg = cfg
}

// scrape returns the whole /metrics page.
func (inst *instance) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + inst.httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// secRecords are a few records of one partition: the windows [0s, 10s) of
// u1 and u2 close when the record at 15 s moves the watermark to 13 s.
var secRecords = []input{
	{0, "u1", `{"user":"u1","ts":1000,"x":1}`},
	{0, "u1", `{"user":"u1","ts":2000,"x":2}`},
	{0, "u2", `{"user":"u2","ts":2500,"x":5}`},
	{0, "u1", `{"user":"u1","ts":3000,"x":3}`},
	{0, "u1", `{"user":"u1","ts":15000,"x":4}`},
}

// secPipeline runs windowd with the env's (secured) configuration over
// secRecords and checks the ON_TIME panes, read through the plain
// listener. It returns the running instance.
func secPipeline(t *testing.T, e *env, childEnv map[string]string) *instance {
	t.Helper()
	produce(t, e.in, secRecords)
	inst := e.spawn(childEnv, "--log-level", "debug")
	inst.waitListening(t)
	inst.waitRecordsIn(t, len(secRecords))
	out := e.reader(e.out)
	out.readUntil(t, "the ON_TIME panes of u1 and u2", 60*time.Second, func(recs []outRecord) bool {
		keys := map[string]bool{}
		for _, r := range recs {
			if r.headers["timing"] == "ON_TIME" && r.headers["window_start"] == "0" {
				keys[r.key] = true
			}
		}
		return keys["u1"] && keys["u2"]
	})
	return inst
}

// TestSecuritySCRAMOverTLS: windowd reads and writes through the SASL_SSL
// listener with SCRAM-SHA-512, the password from an environment variable,
// and shows the password neither in its logs nor in /metrics.
func TestSecuritySCRAMOverTLS(t *testing.T) {
	s := secEnv(t, "WINDOWD_KAFKA_SASL_SSL")
	e := newEnv(t, 1, "")
	e.secConfig(fmt.Sprintf(`  brokers: [%q]
  tls:
    ca_file: %s
  sasl:
    mechanism: SCRAM-SHA-512
    username: %s
    password: ${WINDOWD_TEST_KAFKA_PASSWORD}
`, s.saslSSL, s.file("ca.pem"), s.user), map[string]string{"WINDOWD_TEST_KAFKA_PASSWORD": s.pass})
	if e.cfg.Kafka.SASL.Password.Reveal() != s.pass {
		t.Fatal("password not expanded from the environment")
	}
	if strings.Contains(readFile(t, e.cfgPath), s.pass) {
		t.Fatal("the test config holds the password itself")
	}

	inst := secPipeline(t, e, map[string]string{"WINDOWD_TEST_KAFKA_PASSWORD": s.pass})
	metrics := inst.scrape(t)
	if !strings.Contains(metrics, "windowd_records_in_total") {
		t.Fatalf("/metrics has no windowd_records_in_total:\n%s", metrics)
	}
	if strings.Contains(metrics, s.pass) {
		t.Errorf("/metrics shows the password")
	}
	if err := inst.stop(); err != nil {
		t.Fatalf("windowd stop: %v\n%s", err, inst.stderr.String())
	}
	logs := inst.stderr.String()
	if strings.Contains(logs, s.pass) {
		t.Errorf("windowd's logs show the password:\n%s", logs)
	}
	if !strings.Contains(logs, `"stopped cleanly"`) {
		t.Errorf("no clean stop in the logs:\n%s", logs)
	}
}

// TestSecurityMTLS: windowd reads and writes through the listener that
// requires a client certificate.
func TestSecurityMTLS(t *testing.T) {
	parallel(t, 3*time.Second) // (the other security tests set environment variables: sequential)
	s := secEnv(t, "WINDOWD_KAFKA_MTLS")
	e := newEnv(t, 1, "")
	e.secConfig(fmt.Sprintf(`  brokers: [%q]
  tls:
    ca_file: %s
    cert_file: %s
    key_file: %s
`, s.mtls, s.file("ca.pem"), s.file("client.pem"), s.file("client.key")), nil)
	inst := secPipeline(t, e, nil)
	if err := inst.stop(); err != nil {
		t.Fatalf("windowd stop: %v\n%s", err, inst.stderr.String())
	}
}

// TestSecurityFailsFast: credentials or certificates that the broker
// refuses stop `windowd run` at once with one clear error line and exit
// status 1, instead of retrying.
func TestSecurityFailsFast(t *testing.T) {
	s := secEnv(t, "WINDOWD_KAFKA_SASL_SSL", "WINDOWD_KAFKA_MTLS")
	const wrong = "not-the-password-4711"
	tests := []struct {
		name  string
		kafka string
		want  string // in the error of the last log line
	}{
		{"wrong password", fmt.Sprintf(`  brokers: [%q]
  tls: {ca_file: %s}
  sasl: {mechanism: SCRAM-SHA-512, username: %s, password: "${WINDOWD_TEST_KAFKA_PASSWORD}"}
`, s.saslSSL, s.file("ca.pem"), s.user),
			fmt.Sprintf(`kafka authentication failed for user %q (SCRAM-SHA-512): Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512`, s.user)},
		{"unknown user", fmt.Sprintf(`  brokers: [%q]
  tls: {ca_file: %s}
  sasl: {mechanism: SCRAM-SHA-256, username: nobody, password: "${WINDOWD_TEST_KAFKA_PASSWORD}"}
`, s.saslSSL, s.file("ca.pem")),
			`kafka authentication failed for user "nobody" (SCRAM-SHA-256): Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256`},
		{"broker certificate from an unknown CA", fmt.Sprintf(`  brokers: [%q]
  tls: {}
  sasl: {mechanism: SCRAM-SHA-512, username: %s, password: "${WINDOWD_TEST_KAFKA_PASSWORD}"}
`, s.saslSSL, s.user),
			`kafka TLS handshake failed (brokers ` + s.saslSSL + `): tls: failed to verify certificate: x509: certificate signed by unknown authority`},
		{"no client certificate", fmt.Sprintf(`  brokers: [%q]
  tls: {ca_file: %s}
`, s.mtls, s.file("ca.pem")),
			`kafka TLS handshake failed (brokers ` + s.mtls + `): remote error: tls: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 1, "")
			env := map[string]string{"WINDOWD_TEST_KAFKA_PASSWORD": wrong}
			e.secConfig(tt.kafka, env)
			start := time.Now()
			inst := e.spawn(env)
			select {
			case <-inst.exited:
			case <-time.After(15 * time.Second):
				t.Fatalf("windowd still runs after 15s:\n%s", inst.stderr.String())
			}
			logs := inst.stderr.String()
			var exit *exec.ExitError
			if !errors.As(inst.exitErr, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit = %v, want status 1\n%s", inst.exitErr, logs)
			}
			logLines := lines(logs)
			last := logLines[len(logLines)-1]
			if !strings.Contains(last, `"windowd stopped with an error"`) || !strings.Contains(strings.ReplaceAll(last, `\"`, `"`), tt.want) {
				t.Errorf("last line\n%s\nwant the error %s", last, tt.want)
			}
			if strings.Contains(logs, "retrying") || len(logLines) > 6 {
				t.Errorf("windowd retried (%d log lines):\n%s", len(logLines), logs)
			}
			if strings.Contains(logs, wrong) {
				t.Errorf("the logs show the password:\n%s", logs)
			}
			t.Logf("exited after %s: %s", time.Since(start).Round(time.Millisecond), last)
		})
	}
}

// TestSecurityRefusedInProcess runs without a secured broker: an in-process
// kfake cluster with SASL and ACLs refuses a password or a permission, and
// service.Run returns the clear error at once instead of retrying.
func TestSecurityRefusedInProcess(t *testing.T) {
	topicACL := func(topic string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: topic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.User("SCRAM-SHA-512", "reader", "reader-pass", topicACL("in", kmsg.ACLOperationDescribe), topicACL("in", kmsg.ACLOperationRead)),
		kfake.SeedTopics(1, "in", "hidden"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tests := []struct {
		name, user, pass, input string
		want                    string
	}{
		// (A wrong password is not among them: kfake closes the connection
		// where Kafka answers SASL_AUTHENTICATION_FAILED; see
		// TestSecurityFailsFast.)
		{"input topic not described", "reader", "reader-pass", "hidden",
			`kafka authorization failed for user "reader" (input topic hidden): TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [Topic authorization failed.]`},
		{"output topic not created", "reader", "reader-pass", "in",
			`kafka authorization failed for user "reader" (create topic out): TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics: [Topic authorization failed.]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("WINDOWD_TEST_KAFKA_PASSWORD", tt.pass)
			cfg, err := config.Parse("sec.yaml", []byte(fmt.Sprintf(`kafka:
  brokers: [%q]
  session_timeout: 6s
  sasl: {mechanism: SCRAM-SHA-512, username: %s, password: "${WINDOWD_TEST_KAFKA_PASSWORD}"}
state: {dir: %q}
http: {listen: "127.0.0.1:0"}
pipelines:
  - name: p
    input: {topic: %s}
    timestamp: {field: ts}
    window: {type: tumbling, size: 10s}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
`, c.ListenAddrs()[0], tt.user, t.TempDir(), tt.input)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err = service.Run(ctx, cfg, service.Options{Log: zap.NewNop()})
			if took := time.Since(start); err == nil || took > 15*time.Second {
				t.Fatalf("Run = %v after %s, want an error within 15s", err, took)
			}
			if err.Error() != tt.want {
				t.Errorf("Run error\n%v\nwant\n%s", err, tt.want)
			}
			if strings.Contains(err.Error(), tt.pass) {
				t.Errorf("the error shows the password: %v", err)
			}
			t.Logf("%v", err)
		})
	}
}
