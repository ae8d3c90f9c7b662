package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/windowd/windowd/service"
)

// TestGroupOffsetsNameTheTransactionHoldingThem: after an assignment the
// group's committed offsets are fetched require_stable, so a transaction
// with offsets of the group pending holds the partitions before their
// first record (franz-go retries every second for as long as it lasts).
// After a while (Faults.RestoreStall here; 30 s by default) /readyz names
// it (docs/OPERATIONS.md, Broker failures): the partitions it holds and
// the transaction open on the group's partition of __consumer_offsets,
// with its producer. Once it ends, the records flow and the output holds
// every pane replay computes, nothing late with allowed_lateness 0s.
func TestGroupOffsetsNameTheTransactionHoldingThem(t *testing.T) {
	parallel(t, 15*time.Second)
	e := newEnv(t, 2, "")
	recs, flush, want := heldStream(t, e, 400, 6, "")
	recs = append(recs, flush...)

	// Another producer's transaction with offsets of the group (partition
	// 1 of the input) left open.
	id, scratch := uniqueName(t, "other"), uniqueName(t, "scratch")
	createTopic(t, scratch, 1)
	other := newClient(t, kgo.TransactionalID(id), kgo.TransactionTimeout(2*time.Minute), kgo.DefaultProduceTopic(scratch))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := other.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("not windowd's")}).First()
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, r.ProducerID, r.ProducerEpoch, e.group
	addResp, err := add.RequestWith(ctx, other)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("adding the group to the transaction: %v", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = id, e.group, r.ProducerID, r.ProducerEpoch
	commit.Generation, commit.MemberID = -1, ""
	td, err := kadm.NewClient(other).ListTopics(ctx, e.in)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = e.in, td[e.in].ID // v6+ names it by id
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 1, 0
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	commitResp, err := commit.RequestWith(ctx, other)
	if err == nil {
		for _, rt := range commitResp.Topics {
			for _, rp := range rt.Partitions {
				err = kerr.ErrorForCode(rp.ErrorCode)
			}
		}
	}
	if err != nil {
		t.Fatalf("committing offsets in the transaction: %v", err)
	}

	produce(t, e.in, recs)
	a := e.startInProcessWith(service.Faults{RestoreStall: time.Second})
	named := "a transaction holds those of partitions [1]; open on the group's partition of __consumer_offsets: a transaction open on __consumer_offsets/"
	producer := fmt.Sprintf("(producer %d, epoch %d", r.ProducerID, r.ProducerEpoch)
	var body string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last /readyz: %q", body)
		}
	})
	waitFor(t, "/readyz to name the transaction holding the group's offsets", 30*time.Second, func() bool {
		_, body = httpGet(t, "http://"+a.httpAddr+"/readyz")
		return strings.Contains(body, named) && strings.Contains(body, producer)
	})
	if !strings.Contains(body, "for the group's committed offsets of partitions [") || strings.Contains(body, "hanging") {
		t.Fatalf("/readyz: %q", body)
	}
	if v, _ := a.metric(t, "windowd_records_in_total"); v != 0 {
		t.Fatalf("%v records processed before the group's offsets came", v)
	}

	if err := other.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	e.waitCommitted(t, 60*time.Second)
	if code, body := httpGet(t, "http://"+a.httpAddr+"/readyz"); code != 200 {
		t.Fatalf("/readyz after the transaction ended: %d %q", code, body)
	}
	checkAgainstReplay(t, e, want)
	e.expectNothingLate(a)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
}
