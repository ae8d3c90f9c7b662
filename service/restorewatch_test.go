package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A restore that reads nothing for restoreStall names the transaction
// open on its changelog partition (/readyz and /api/status read
// j.blocked), logs it once however long it lasts, and clears both when a
// record comes. A read with nothing left to read is not watched.
func TestWatchRestore(t *testing.T) {
	client := fakeCluster(t, kfake.SeedTopics(1, "cl"))
	other := client(kgo.TransactionalID("other"), kgo.DefaultProduceTopic("cl"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).First()
	if err != nil {
		t.Fatal(err)
	}
	cl := client()

	core, logs := observer.New(zap.InfoLevel)
	p := &pipeline{setup: setup{log: zap.New(core), now: time.Now, adm: kadm.NewClient(cl), clTopic: "cl", restoreStall: 100 * time.Millisecond}}
	blocked := func(j *restoreJob) string {
		if why := j.blocked.Load(); why != nil {
			return *why
		}
		return ""
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	j := &restoreJob{part: 0}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.watchRestore(wctx, j, 0, r.Offset+1) }()
	want := fmt.Sprintf("waiting for a transaction open on cl/0 from offset 0 (producer %d, epoch %d", r.ProducerID, r.ProducerEpoch)
	waitUntil("the open transaction named", func() bool { return strings.Contains(blocked(j), want) })
	if b := blocked(j); !strings.HasPrefix(b, "partition 0 read nothing for ") || !strings.Contains(b, " at offset 0 of 1; ") || strings.Contains(b, "hanging") {
		t.Fatalf("blocked %q", b)
	}
	time.Sleep(5 * p.restoreStall) // asked again, same answer
	if n := logs.FilterMessage("restore reads nothing").Len(); n != 1 {
		t.Fatalf("%d warnings for one cause, want 1: %v", n, logs.All())
	}
	j.records.Store(1)
	waitUntil("blocked cleared by a record", func() bool { return blocked(j) == "" })
	if logs.FilterMessage("restore reading the changelog again").Len() != 1 {
		t.Fatalf("no line for the read going on: %v", logs.All())
	}
	stop()
	<-done

	// Nothing left to read: the read is at its end, whatever the broker holds.
	j2 := &restoreJob{part: 0}
	wctx, stop = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { defer close(done); p.watchRestore(wctx, j2, r.Offset+1, r.Offset+1) }()
	time.Sleep(5 * p.restoreStall)
	stop()
	<-done
	if b := blocked(j2); b != "" || logs.FilterMessage("restore reads nothing").Len() != 1 {
		t.Fatalf("a read with nothing left was reported blocked: %q %v", b, logs.All())
	}
}
