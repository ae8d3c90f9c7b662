package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/windowd/windowd/config"
)

// TestGroupOffsetWithoutStateStays: a partition the group has an offset for
// but windowd's state knows nothing of (the changelog was reset, or an
// operator moved the offset with kafka-consumer-groups) is consumed from
// that offset, and the commit cycles keep it: while the partition delivers
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
