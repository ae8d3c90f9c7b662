package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupOptsBoundFetches: a group member asks each partition for at most
// FetchPartitionBytes per fetch, not franz-go's 1 MiB.
func TestGroupOptsBoundFetches(t *testing.T) {
	cl, err := kgo.NewClient(GroupOpts(nil, 10*time.Second, "g", "t")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got := cl.OptValue(kgo.FetchMaxPartitionBytes); got != int32(FetchPartitionBytes) {
		t.Errorf("FetchMaxPartitionBytes = %v, want %d", got, FetchPartitionBytes)
	}
}
