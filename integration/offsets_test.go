package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
	"github.com/windowd/windowd/service"
)

// TestGroupOffsetWithoutStateStays: a group with offsets but no changelog
// is refused (a pipeline renamed with its group kept: docs/OPERATIONS.md,
// Changing a deployed pipeline); once the operator creates the changelog
// (a fresh start on purpose: the changelog was reset, or the offsets moved
// with kafka-consumer-groups), a partition the group has an offset for but
// windowd's state knows nothing of is consumed from that offset, and the commit cycles keep it: while the partition delivers
// nothing, windowd must not commit the log start in its place (a restart
// would then read the partition again from the beginning and count its
// records twice). Where its consumption began also tells that it is
// caught up: it has no lag, and it goes idle.
func TestGroupOffsetWithoutStateStays(t *testing.T) {
	parallel(t, 9*time.Second)
	for _, delivery := range []string{"at_least_once", "exactly_once"} {
		t.Run(delivery, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 2, ", idle_timeout: 1s")
			if delivery == "exactly_once" {
				cfg := readFile(t, e.cfgPath)
				writeFile(t, e.cfgPath, strings.Replace(cfg, "commit_interval: 200ms", "commit_interval: 200ms\n    delivery: exactly_once", 1))
				c, err := config.Load(e.cfgPath)
				if err != nil {
					t.Fatal(err)
				}
				e.cfg = c
			}
			base := time.Now().UnixMilli()
			var recs []input
			for i := 0; i < 10; i++ {
				for part := int32(0); part < 2; part++ {
					user := fmt.Sprintf("u%d", part)
					recs = append(recs, input{part, user, fmt.Sprintf(`{"user":%q,"ts":%d,"x":1}`, user, base+int64(i))})
				}
			}
			produce(t, e.in, recs)

			// Partition 0 was consumed before (its offset is at its end);
			// partition 1 never was.
			adm := kadm.NewClient(newClient(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var offs kadm.Offsets
			offs.Add(kadm.Offset{Topic: e.in, Partition: 0, At: 10, LeaderEpoch: -1})
			resp, err := adm.CommitOffsets(ctx, e.group, offs)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatalf("commit the group offset: %v", err)
			}

			rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer rcancel()
			if err := service.Run(rctx, e.cfg, service.Options{Log: zap.NewNop()}); !errors.Is(err, kafka.ErrOffsetsWithoutState) {
				t.Fatalf("start with group offsets and no changelog: %v; want a refusal (%v)", err, kafka.ErrOffsetsWithoutState)
			}
			cl := e.group + "-p-changelog"
			cresp, err := adm.CreateTopic(ctx, e.partitions, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, cl)
			if err == nil {
				err = cresp.Err
			}
			if err != nil {
				t.Fatalf("create topic %s: %v", cl, err)
			}

			inst := e.startInProcess()
			inst.waitRecordsIn(t, 10)
			// Idleness checks (every second) and commit cycles (every
			// 200ms) run several times over.
			time.Sleep(3 * time.Second)
			got := e.committedOffsets(t)
			// Partition 0's records before its offset are not read.
			if n, _ := inst.metric(t, "windowd_records_in_total"); n != 10 {
				t.Fatalf("windowd read %v records, want 10 (partition 1's)", n)
			}
			if v, ok := inst.metric(t, "windowd_partition_lag_records", "partition", "0"); !ok || v != 0 {
				t.Fatalf("partition 0's lag %v (exported %v), want 0", v, ok)
			}
			if v, _ := inst.metric(t, "windowd_partition_idle", "partition", "0"); v != 1 {
				t.Fatal("partition 0 is not idle")
			}
			if err := inst.stop(); err != nil {
				t.Fatal(err)
			}
			after := e.committedOffsets(t)
			if got[0] != 10 || got[1] != 10 || after[0] != 10 || after[1] != 10 {
				t.Fatalf("group offsets while running %v, after the stop %v; want 10 for both partitions", got, after)
			}
		})
	}
}
