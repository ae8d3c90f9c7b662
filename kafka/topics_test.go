package kafka

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/internal/brokerlock"
)

func TestChangelogTopicName(t *testing.T) {
	p := &config.Pipeline{Name: "clicks"}
	p.Input.Group = "windowd-clicks"
	if got := ChangelogTopic(p); got != "windowd-clicks-clicks-changelog" {
		t.Fatalf("changelog topic %q", got)
	}
}

// The pipeline's partitioner keeps partition p's state on changelog
// partition p, puts a progress record (no key) on the output partition it
// names, and leaves panes and every other topic to the default
// partitioner, which sends equal keys to one partition.
func TestPipelinePartitioner(t *testing.T) {
	cp := NewPartitioner("g-p-changelog", "out")
	tp := cp.ForTopic("g-p-changelog")
	for _, part := range []int32{0, 3, 7} {
		r := &kgo.Record{Topic: "g-p-changelog", Partition: part, Key: []byte("kuser")}
		if got := tp.Partition(r, 8); got != int(part) {
			t.Fatalf("changelog record of partition %d went to %d", part, got)
		}
	}
	out, ok := cp.ForTopic("out").(kgo.TopicBackupPartitioner)
	if !ok {
		t.Fatalf("the output topic's partitioner is %T, not franz-go's default", cp.ForTopic("out"))
	}
	r := &kgo.Record{Topic: "out", Key: []byte("u1"), Partition: 5}
	if !out.RequiresConsistency(r) {
		t.Fatal("keyed pane records are not partitioned by key")
	}
	first := out.PartitionByBackup(r, 8, nil)
	def := kgo.UniformBytesPartitioner(64<<10, true, true, nil).ForTopic("out").(kgo.TopicBackupPartitioner)
	if want := def.PartitionByBackup(r, 8, nil); first != want {
		t.Fatalf("a pane went to partition %d, franz-go's default partitioner sends it to %d", first, want)
	}
	for i := 0; i < 20; i++ {
		if got := out.PartitionByBackup(&kgo.Record{Topic: "out", Key: []byte("u1"), Partition: int32(i % 8)}, 8, nil); got != first {
			t.Fatalf("pane records of one key went to partitions %d and %d", first, got)
		}
	}
	for _, part := range []int32{0, 5, 7} {
		pr := &kgo.Record{Topic: "out", Partition: part}
		if !out.RequiresConsistency(pr) || out.PartitionByBackup(pr, 8, nil) != int(part) || out.Partition(pr, 8) != int(part) {
			t.Fatalf("a progress record for partition %d went elsewhere", part)
		}
	}
}

// TestRefreshTopicMetadataEndsCachedUnknown: a client that listed a topic's
// offsets before the topic existed keeps "unknown topic" cached for its
// offset listings (franz-go's MetadataMinAge, 5 s), so a changelog created
// moments ago looked partitionless to PartitionBounds for seconds after
// startup; RefreshTopicMetadata makes the next listing see the partitions.
// Against WINDOWD_KAFKA_BROKERS when set, else an in-process kfake broker.
func TestRefreshTopicMetadataEndsCachedUnknown(t *testing.T) {
	seeds := os.Getenv("WINDOWD_KAFKA_BROKERS")
	if seeds != "" {
		// The integration package's outage test stops that broker.
		brokerlock.Hold(t, seeds, false)
	}
	if seeds == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		seeds = strings.Join(c.ListenAddrs(), ",")
	}
	newAdmin := func() (*kgo.Client, *kadm.Client) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl, kadm.NewClient(cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("windowd-metadata-%d", time.Now().UnixNano())
	listed := func(adm *kadm.Client) bool {
		starts, err := adm.ListStartOffsets(ctx, topic)
		_, ok := starts.Lookup(topic, 0)
		return err == nil && ok
	}

	cl, adm := newAdmin()
	poisoned := time.Now()
	if listed(adm) {
		t.Fatalf("topic %s listed before it was created", topic)
	}
	_, other := newAdmin()
	if _, err := other.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	defer other.DeleteTopics(context.Background(), topic)
	for !listed(other) { // a client without the cached answer: the broker knows the topic
		if ctx.Err() != nil {
			t.Fatal("the broker never listed the new topic")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if time.Since(poisoned) < 3*time.Second && listed(adm) {
		// Well within MetadataMinAge: the cached answer must still hold,
		// or this test shows nothing about RefreshTopicMetadata.
		t.Fatal("the first client listed the new topic without a refresh: franz-go no longer caches unknown topics for listings")
	}
	RefreshTopicMetadata(ctx, cl, topic)
	if !listed(adm) {
		t.Fatal("after RefreshTopicMetadata the client still does not list the new topic's partitions")
	}
}

// TestWaitLeadersAsksTheBroker: a client that listed a topic before it
// existed keeps that answer in franz-go's metadata cache (MetadataMinAge,
// a minute here); WaitLeaders must see the topic's leaders once the broker
// has them, not once the cache expires. Its old listing through kadm held
// every topic windowd created for about 1.5 s at startup (with
// MetadataMinAge at 1 s).
func TestWaitLeadersAsksTheBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MetadataMinAge(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const topic = "created-later"
	if tds, err := adm.ListTopics(ctx, topic); err != nil || tds[topic].Err == nil {
		t.Fatalf("topic listed before it was created: %v, %v", tds, err)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := kadm.NewClient(other).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if tds, err := adm.ListTopics(ctx, topic); err == nil && tds[topic].Err == nil {
		t.Fatal("the cache no longer holds the answer from before the creation: this test shows nothing")
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := WaitLeaders(wctx, cl, topic, 3); err != nil {
		t.Fatal(err)
	}
	if tds, err := adm.ListTopics(ctx, topic); err != nil || len(tds[topic].Partitions) != 3 {
		t.Fatalf("after WaitLeaders the client's listing still misses the topic: %v, %v", tds, err)
	}
}

// TestRepartitionTopicCount: the repartition topic is made with the
// input's count; after the input grew it keeps that count, which the
// state is keyed by (and so does the changelog); an explicit
// repartition_partitions of another count than the topic's is refused
// before the changelog is touched.
func TestRepartitionTopicCount(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const yaml = `kafka: {brokers: ["x:9092"]}
pipelines:
  - name: r
    input: {topic: in, group: g}
    key: {field: user}
    timestamp: {field: ts}
    window: {type: tumbling, size: 1m}
    aggregates: [{name: n, op: count}]
    output: {topic: out}
    repartition: true
`
	ensure := func(text string) (Topics, error) {
		t.Helper()
		cfg, err := config.Parse("c.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := EnsureTopics(ctx, cfg, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, zap.NewNop())
		return got["r"], err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	count := func(topic string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, err := existingPartitions(ctx, adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	if got, err := ensure(yaml); err != nil || got.Repartition != 4 {
		t.Fatalf("first start: %+v, %v; want 4 repartition partitions", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreatePartitions(ctx, 2, "in"); err != nil {
		t.Fatal(err)
	}
	if got, err := ensure(yaml); err != nil || got.Repartition != 4 || got.Partitions != 6 {
		t.Fatalf("after the input grew to 6: %+v, %v; want the repartition topic's 4", got, err)
	}
	if n := count("g-r-changelog"); n != 4 {
		t.Errorf("changelog: %d partitions, want 4", n)
	}
	_, err = ensure(strings.Replace(yaml, "    repartition: true\n", "    repartition: true\n    repartition_partitions: 8\n", 1))
	if err == nil || !strings.Contains(err.Error(), "has 4 partitions, the pipeline needs 8: set repartition_partitions: 4") {
		t.Fatalf("repartition_partitions 8 on a topic of 4: %v", err)
	}
	if n := count("g-r-changelog"); n != 4 {
		t.Errorf("changelog after the refusal: %d partitions, want 4 (untouched)", n)
	}
}
