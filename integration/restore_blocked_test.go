package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/windowd/windowd/service"
)

// TestRestoreNamesTheTransactionHoldingIt: a restore reads the changelog
// read_committed, so a transaction left open on it holds the restore at
// its first offset. After a while without a record (Faults.RestoreStall
// here; 30 s by default) the restore names that transaction in /readyz
// (docs/OPERATIONS.md, Broker failures): its partition, first offset and
// producer. Once the transaction ends, the restore goes on, and the output
// holds every pane replay computes, nothing late with allowed_lateness 0s.
//
// Instance A (exactly_once) windows the first half of the stream and
// stops; its state dir is deleted. Another producer then opens a
// transaction with one record on the changelog and leaves it open while
// instance B restores.
func TestRestoreNamesTheTransactionHoldingIt(t *testing.T) {
	parallel(t, 20*time.Second)
	e := newEnv(t, 1, "")
	e.editConfig(map[string]string{
		"    allowed_lateness: 30s\n":  "    allowed_lateness: 0s\n",
		"      late: {every: 0s}\n":    "",
		"    commit_interval: 200ms\n": "    commit_interval: 200ms\n    delivery: exactly_once\n",
	})
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var first, second []input
	for i := 0; i < 600; i++ {
		u := fmt.Sprintf("u%d", i%5)
		in := input{key: u, value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, u, base+int64(i)*100, i%7)}
		if i < 300 {
			first = append(first, in)
		} else {
			second = append(second, in)
		}
	}
	flush := []input{{key: "flush", value: fmt.Sprintf(`{"user":"flush","ts":%d,"x":0}`, base+3_600_000)}}
	all := append(append(append([]input(nil), first...), second...), flush...)
	out, errs := runReplay(t, &e.cfg.Pipelines[0], all, 1)
	if len(errs) > 0 {
		t.Fatalf("replay reported errors: %v", errs[:min(len(errs), 5)])
	}
	var want []string
	for _, p := range out {
		if gjson.Get(p, "key").Str != "flush" {
			want = append(want, p)
		}
	}
	if finalCount(want) < 5*5 {
		t.Fatalf("test stream too small: %d final panes", finalCount(want))
	}

	a := e.startInProcess()
	produce(t, e.in, first)
	a.waitRecordsIn(t, len(first))
	e.waitCommitted(t, 60*time.Second)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	removeStateDir(t, e.stateDir)

	// The transaction left open on the changelog's partition 0.
	changelog := e.cfg.Pipelines[0].ChangelogTopic()
	other := newClient(t, kgo.TransactionalID(uniqueName(t, "other")), kgo.TransactionTimeout(2*time.Minute),
		kgo.DefaultProduceTopic(changelog))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := other.ProduceSync(ctx, &kgo.Record{Partition: 0, Key: []byte("not windowd's"), Value: []byte("{}")}).First()
	if err != nil {
		t.Fatal(err)
	}

	b := e.startInProcessWith(service.Faults{RestoreStall: time.Second})
	produce(t, e.in, second)
	named := fmt.Sprintf("waiting for a transaction open on %s/0 from offset %d (producer %d, epoch %d", changelog, r.Offset, r.ProducerID, r.ProducerEpoch)
	var body string
	waitFor(t, "/readyz to name the open transaction", 30*time.Second, func() bool {
		_, body = httpGet(t, "http://"+b.httpAddr+"/readyz")
		return strings.Contains(body, named)
	})
	if strings.Contains(body, "hanging") {
		t.Fatalf("/readyz calls another producer's open transaction one the broker left hanging: %q", body)
	}
	if v, _ := b.metric(t, "windowd_records_in_total", "partition", "0"); v != 0 {
		t.Fatalf("%v records processed before the state was restored", v)
	}

	if err := other.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	produce(t, e.in, flush)
	e.waitCommitted(t, 60*time.Second)
	if code, body := httpGet(t, "http://"+b.httpAddr+"/readyz"); code != 200 {
		t.Fatalf("/readyz after the transaction ended: %d %q", code, body)
	}
	checkAgainstReplay(t, e, want)
	if v, _ := b.metric(t, "windowd_restore_records_total", "partition", "0"); v == 0 {
		t.Fatal("B restored no changelog record: the test did not exercise the restore")
	}
	e.expectNothingLate(b)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
}
