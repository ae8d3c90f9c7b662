package integration

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDuringStuckRebalance (docs/OPERATIONS.md, shutdown): A and B
// share a group with a long session timeout; B is killed (kill -9) and a
// third member C joins, so the group rebalances and waits for the dead B
// until its session expires. A, SIGTERMed while that rebalance is stuck,
// must exit 0 within shutdown_grace (its final commit cannot reach a group
// that is rebalancing: it commits what it can and leaves), for both
// delivery modes.
func TestSIGTERMDuringStuckRebalance(t *testing.T) {
	if os.Getenv("WINDOWD_KAFKA_BROKERS") == "" {
		t.Skip("needs a real broker (WINDOWD_KAFKA_BROKERS): windowd processes in one consumer group")
	}
	parallel(t, 18*time.Second)
	for _, delivery := range []string{"at_least_once", "exactly_once"} {
		t.Run(delivery, func(t *testing.T) {
			t.Parallel()
			stuckRebalanceShutdown(t, delivery)
		})
	}
}

func stuckRebalanceShutdown(t *testing.T, delivery string) {
	windowdBinary(t)
	const session, grace = 40 * time.Second, 4 * time.Second
	e := newRebalanceEnv(t, 4, delivery)
	member := func(name string) *instance {
		m := e.member(name)
		cfg := readFile(t, m.cfgPath)
		cfg = strings.Replace(cfg, "session_timeout: 6s", fmt.Sprintf("session_timeout: %s", session), 1)
		cfg = strings.Replace(cfg, "shutdown_grace: 20s", fmt.Sprintf("shutdown_grace: %s", grace), 1)
		writeFile(t, m.cfgPath, cfg)
		return m.spawn(nil)
	}
	a, b := member("a"), member("b")
	names := map[*instance]string{a: "a", b: "b"}
	logTroubles(t, names)
	a.waitListening(t)
	b.waitListening(t)
	startSteadyProducer(t, e)
	assigned := func(inst *instance) int {
		v, _ := inst.metric(t, "windowd_assigned_partitions", "pipeline", "p")
		return int(v)
	}
	waitFor(t, "a and b to share the partitions", 60*time.Second, func() bool {
		return assigned(a) > 0 && assigned(b) > 0 && assigned(a)+assigned(b) == 4
	})
	_ = b.signal(t, syscall.SIGKILL)
	c := member("c")
	names[c] = "c"
	c.waitListening(t)
	// C's join starts a rebalance that waits for B's session to expire: A
	// is asked to rejoin and its join hangs with the group's.
	time.Sleep(3 * time.Second)
	began := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.exited:
	case <-time.After(grace + 3*time.Second):
		t.Fatalf("a did not exit within %s of SIGTERM (shutdown_grace %s) while the group waited for a dead member\n%s",
			time.Since(began).Round(100*time.Millisecond), grace, stderrTail(a, 20))
	}
	took := time.Since(began)
	if a.exitErr != nil {
		t.Fatalf("a exited with %v after SIGTERM (want status 0)\n%s", a.exitErr, stderrTail(a, 20))
	}
	if took > grace+time.Second {
		t.Fatalf("a took %s to exit, shutdown_grace is %s", took.Round(100*time.Millisecond), grace)
	}
	t.Logf("%s: a exited 0 %s after SIGTERM, %s into a rebalance stuck on a dead member", delivery, took.Round(100*time.Millisecond), 3*time.Second)
}
