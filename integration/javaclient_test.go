package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/windowd/windowd/internal/panetest"
	"github.com/windowd/windowd/windowing"
)

var (
	javaOnce sync.Once
	javaCP   string
	javaErr  error
)

// javaClient builds integration/javaclient (mvn package) once per test
// run and returns its class path. Maven's local repository is
// $HOME/.cache/windowd/javaclient/m2; once a pom has built, later builds
// of the same pom run offline.
func javaClient(t *testing.T) string {
	t.Helper()
	javaOnce.Do(func() {
		dir, err := filepath.Abs("javaclient")
		if err != nil {
			javaErr = err
			return
		}
		home, _ := os.UserHomeDir()
		cache := filepath.Join(home, ".cache", "windowd", "javaclient")
		if err := os.MkdirAll(cache, 0o755); err != nil {
			javaErr = err
			return
		}
		pom, err := os.ReadFile(filepath.Join(dir, "pom.xml"))
		if err != nil {
			javaErr = err
			return
		}
		stamp := filepath.Join(cache, "pom.crc")
		sum := fmt.Sprint(crc32.ChecksumIEEE(pom))
		args := []string{"-B", "-q", "-Dstyle.color=never", "-Dmaven.repo.local=" + filepath.Join(cache, "m2"), "-f", filepath.Join(dir, "pom.xml"), "clean", "package"}
		if old, _ := os.ReadFile(stamp); string(old) == sum {
			args = append([]string{"-o"}, args...)
		}
		out, err := exec.Command("mvn", args...).CombinedOutput()
		if err != nil {
			javaErr = fmt.Errorf("mvn package (integration/javaclient): %v\n%s", err, out)
			return
		}
		_ = os.WriteFile(stamp, []byte(sum), 0o644)
		javaCP = filepath.Join(dir, "target", "javaclient.jar") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	})
	if javaErr != nil {
		t.Fatal(javaErr)
	}
	return javaCP
}

// TestJavaConsumer (docs/SEMANTICS.md, Output): a Java consumer with
// Apicurio Registry's Kafka deserializers from Maven Central
// (integration/javaclient) reads windowd's Avro and Protobuf panes, of a
// tumbling, a calendar and a count window pipeline with every aggregate;
// every field it gets equals the JSON pane of the same window that a JSON
// pipeline of the same run wrote.
func TestJavaConsumer(t *testing.T) {
	registry := os.Getenv("WINDOWD_SCHEMA_REGISTRY")
	if registry == "" || os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker and Apicurio Registry (WINDOWD_KAFKA_BROKERS, WINDOWD_SCHEMA_REGISTRY): a Java consumer with Apicurio's deserializers")
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		t.Skip("needs mvn to build the Java consumer")
	}
	parallel(t, 40*time.Second)
	cp := javaClient(t)
	core := strings.Replace(registry, "/apis/ccompat/v7", "/apis/registry/v3", 1)

	in := uniqueName(t, "in")
	createTopic(t, in, 2)
	var windows []struct{ name, window string }
	var shapes []string
	for _, w := range outWindows {
		if w.name == "tumbling" || w.name == "calendar" || w.name == "count" {
			windows = append(windows, w)
			shapes = append(shapes, w.name)
		}
	}
	e, outs := outFormatsEnv(t, in, registry, []string{"json", "avro", "protobuf"}, windows)
	cfg := e.cfg
	var aggs []panetest.Agg
	for _, s := range cfg.Pipelines[0].Spec.Aggregates {
		aggs = append(aggs, panetest.Agg{Name: s.Name, Quantiles: s.Op == windowing.Quantiles, TopK: s.Op == windowing.TopK})
	}
	produce(t, in, outStream())
	inst := e.startInProcess()
	defer inst.stop()

	for _, shape := range shapes {
		// The JSON pipeline's panes, by pane id.
		jr := e.reader(outs["json-"+shape])
		jr.readUntil(t, "the JSON panes", 60*time.Second, func(got []outRecord) bool { return len(got) >= 4 })
		jr.poll(2 * time.Second)
		jsonPanes := map[string]string{}
		for _, r := range jr.got {
			if gjson.Get(r.value, "key").Str != "flush" {
				jsonPanes[r.headers["pane_id"]] = r.value
			}
		}
		for _, f := range []string{"avro", "protobuf"} {
			t.Run(f+"-"+shape, func(t *testing.T) {
				cmd := exec.Command("java", "-cp", cp, "windowd.javaclient.PaneReader",
					strings.Join(brokers, ","), core, f, outs[f+"-"+shape], fmt.Sprint(len(jsonPanes)), "60")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("java consumer: %v\n%s", err, stderr.String())
				}
				n := 0
				sc := bufio.NewScanner(bytes.NewReader(out))
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					line := gjson.Parse(sc.Text())
					id := line.Get("pane_id").Str
					if strings.HasPrefix(id, "flush/") {
						continue
					}
					n++
					want, ok := jsonPanes[id]
					if !ok {
						t.Fatalf("the Java consumer read pane %s, which the JSON pipeline did not write", id)
					}
					w, err := panetest.Want([]byte(want), aggs, f == "protobuf")
					if err != nil {
						t.Fatal(err)
					}
					got, err := panetest.Canonical(line.Get("value").Value())
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, w) {
						t.Fatalf("pane %s read by Java (%s):\n got %v\nwant %v", id, line.Get("class").Str, got, w)
					}
				}
				if n != len(jsonPanes) {
					t.Fatalf("the Java consumer read %d panes, the JSON pipeline wrote %d", n, len(jsonPanes))
				}
				t.Logf("%d panes read by %s equal the JSON pipeline's", n, gjson.GetBytes(out[:bytes.IndexByte(out, '\n')], "class").Str)
			})
		}
	}
}
