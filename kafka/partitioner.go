package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// changelogPartitioner sends changelog records to the partition they name
// (partition p's state goes to changelog partition p) and every other
// record through franz-go's default partitioner (by key hash).
type changelogPartitioner struct {
	topic string
	def   kgo.Partitioner
}

// NewChangelogPartitioner is the partitioner of a pipeline's producer.
func NewChangelogPartitioner(topic string) kgo.Partitioner {
	return changelogPartitioner{topic: topic, def: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}
}

// ForTopic implements kgo.Partitioner.
func (c changelogPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == c.topic {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return c.def.ForTopic(topic)
}
