package integration

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var keysToSkipRE = regexp.MustCompile(`"keys_to_skip":(\d+)`)

// TestPartialCycleCountedOnce: a crash after a commit cycle's changelog
// records were acknowledged but before local state and input offsets were
// committed. The restart catches its local state up from the changelog,
// whose keys are now ahead of the offsets it resumes from; the records
// those keys already hold are skipped, not counted twice, and every pane
// still equals replay's.
//
//	A  processes the input in three batches, one commit cycle after each;
//	   at the third cycle that logs changes it exits (fault point) between
//	   the changelog and the checkpoint
//	B  restarts on A's state dir: catches up from the changelog, resumes
//	   from the last checkpoint's offsets, skips what the keys cover
func TestPartialCycleCountedOnce(t *testing.T) {
	parallel(t, 9*time.Second)
	e := newEnv(t, 2, "")
	s := newStream(5, 2, 600)
	s.phases[1] = nil // late records' fate depends on interleaving (see TestKillAndRestart)
	want, _, _ := expectedPanes(t, e, s)

	a := e.spawn(map[string]string{"WINDOWD_FAULT_EXIT_AFTER_CHANGELOG": "3"})
	a.waitListening(t)
	half := len(s.phases[0]) / 2
	batches := [][]input{s.phases[0][:half], s.phases[0][half:], s.phases[2]}
	total := 0
	for i, b := range batches {
		produce(t, e.in, b)
		total += len(b)
		if i == len(batches)-1 {
			break
		}
		a.waitRecordsIn(t, total)
		time.Sleep(600 * time.Millisecond) // a commit cycle (200ms) logs the batch
	}
	select {
	case <-a.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("A did not reach the fault point\n%s", a.stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(a.exitErr, &exit) || exit.ExitCode() != 86 {
		t.Fatalf("A exited with %v, want status 86 (the fault point)\n%s", a.exitErr, a.stderr.String())
	}

	b := e.startProcess()
	e.waitCommitted(t, 60*time.Second)
	checkAgainstReplay(t, e, want)
	m := keysToSkipRE.FindAllStringSubmatch(b.stderr.String(), -1)
	skipped := 0
	for _, x := range m {
		n, _ := strconv.Atoi(x[1])
		skipped += n
	}
	if skipped == 0 {
		t.Fatalf("B skipped no key: the crash did not leave keys ahead of the checkpoint\n%s", b.stderr.String())
	}
	t.Logf("B restored %d keys ahead of its checkpoint and skipped what they held", skipped)
	if err := b.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, b.stderr.String())
	}
}
