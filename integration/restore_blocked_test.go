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
	recs, flush, want := heldStream(t, e, 600, 5, "exactly_once")
	first, second := recs[:300], recs[300:]

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

// heldStream readies e for the tests of a wait held by a transaction:
// allowed_lateness 0s (delivery, when set, too) and n records of users
// keys, 100 ms of event time apart, spread over e's partitions by key;
// flush, a record per partition that closes every window; want, the panes
// replay computes of all of them but the flush records' (replay closes
// those windows at its end, run keeps them open).
func heldStream(t *testing.T, e *env, n, users int, delivery string) (recs, flush []input, want []string) {
	t.Helper()
	e.zeroLateness(delivery)
	for i := 0; i < n; i++ {
		u := i % users
		key := fmt.Sprintf("u%d", u)
		recs = append(recs, input{partition: int32(u) % e.partitions, key: key,
			value: fmt.Sprintf(`{"user":%q,"ts":%d,"x":%d}`, key, base+int64(i)*100, i%7)})
	}
	flush = flushRecords(e.partitions)
	out, errs := runReplay(t, &e.cfg.Pipelines[0], append(append([]input(nil), recs...), flush...), int(e.partitions))
	if len(errs) > 0 {
		t.Fatalf("replay reported errors: %v", errs[:min(len(errs), 5)])
	}
	for _, p := range out {
		if !strings.HasPrefix(gjson.Get(p, "key").Str, "flush") {
			want = append(want, p)
		}
	}
	if finalCount(want) < users*n/200 {
		t.Fatalf("test stream too small: %d final panes", finalCount(want))
	}
	return recs, flush, want
}
