package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// pipelinePartitioner sends changelog records to the partition they name
// (partition p's state goes to changelog partition p), the output topic's
// records without a key (progress records, one per output partition) to
// the partition they name too, and every other record through franz-go's
// default partitioner (by key hash).
type pipelinePartitioner struct {
	changelog, output string
	def               kgo.Partitioner
}

// NewPartitioner is the partitioner of a pipeline's producer writing the
// changelog topic and the output topic.
func NewPartitioner(changelog, output string) kgo.Partitioner {
	return pipelinePartitioner{changelog: changelog, output: output, def: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

// ForTopic implements kgo.Partitioner.
func (c pipelinePartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	switch topic {
	case c.changelog:
		return kgo.ManualPartitioner().ForTopic(topic)
	case c.output:
		return outputPartitioner{c.def.ForTopic(topic).(kgo.TopicBackupPartitioner)}
	}
	return c.def.ForTopic(topic)
}

// outputPartitioner is the default partitioner for panes (they have a key)
// and the named partition for progress records (they have none).
type outputPartitioner struct {
	kgo.TopicBackupPartitioner
}

// RequiresConsistency implements kgo.TopicPartitioner.
func (o outputPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Key == nil || o.TopicBackupPartitioner.RequiresConsistency(r)
}

// Partition implements kgo.TopicPartitioner.
func (o outputPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Key == nil {
		return int(r.Partition) % n
	}
	return o.TopicBackupPartitioner.Partition(r, n)
}

// PartitionByBackup implements kgo.TopicBackupPartitioner.
func (o outputPartitioner) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if r.Key == nil {
		return int(r.Partition) % n
	}
	return o.TopicBackupPartitioner.PartitionByBackup(r, n, backup)
}
