package service

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Co-partitioned inputs (docs/SEMANTICS.md, Several inputs). A pipeline
// with `inputs` and without repartition: true reads every input topic in
// its own group, partition p of each given to one member
// (kafka.WarmBalancer): the topics have one partition count, and their
// records are keyed alike, so a key's records from every input are in
// partition p of each.
//
// Partition p of input i is the pipeline's partition i*coStride+p. Partition
// p of the first input keeps its number and leads: its changelog partition,
// restore, standby and warm position are p's, and so is the state of the
// records of every input's partition p (windowing.Options.Shards). The
// others follow it, each with its own offsets, generator and skip set: they
// are paused while p restores, and resume at the positions p's changelog
// marker holds for them. A pipeline of one input is its own lead: its
// partitions are the topic's.

// coStride numbers the partitions of the inputs after the first: above
// every partition count (config.MaxPartitions).
const coStride = 1 << 20

// inputTopics maps the pipeline's partitions to the input topics' (the
// consumer's) and back.
type inputTopics struct {
	topics []string // the first is the lead's
}

// co reports whether several topics are read co-partitioned.
func (t inputTopics) co() bool { return len(t.topics) > 1 }

// id returns the pipeline's partition of partition p of topic, and
// whether topic is an input.
func (t inputTopics) id(topic string, p int32) (int32, bool) {
	i := slices.Index(t.topics, topic)
	if i < 0 {
		return 0, false
	}
	return int32(i)*coStride + p, true
}

// kafka returns the input topic and partition of the pipeline's
// partition part.
func (t inputTopics) kafka(part int32) (string, int32) {
	return t.topics[part/coStride], part % coStride
}

// input returns the index of part's input.
func (t inputTopics) input(part int32) int { return int(part / coStride) }

// lead returns the partition whose state part's records join.
func lead(part int32) int32 { return part % coStride }

// followers returns the partitions that follow lead (none for one input).
func (t inputTopics) followers(lead int32) []int32 {
	var out []int32
	for i := 1; i < len(t.topics); i++ {
		out = append(out, int32(i)*coStride+lead)
	}
	return out
}

// fromKafka returns the pipeline's partitions of the consumer's (a group
// callback's map), in the order of the inputs.
func (t inputTopics) fromKafka(m map[string][]int32) []int32 {
	var out []int32
	for i, topic := range t.topics {
		for _, p := range m[topic] {
			out = append(out, int32(i)*coStride+p)
		}
	}
	return out
}

// toKafka returns parts by input topic.
func (t inputTopics) toKafka(parts []int32) map[string][]int32 {
	out := map[string][]int32{}
	for _, part := range parts {
		topic, p := t.kafka(part)
		out[topic] = append(out[topic], p)
	}
	return out
}

// offsetsToKafka returns next offsets per pipeline partition by input topic.
func (t inputTopics) offsetsToKafka(m map[int32]int64) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for part, off := range m {
		topic, p := t.kafka(part)
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][p] = off
	}
	return out
}

// epochOffsets returns rewind offsets by input topic, as kgo.Client.SetOffsets takes them.
func (t inputTopics) epochOffsets(m map[int32]int64) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for topic, offs := range t.offsetsToKafka(m) {
		out[topic] = map[int32]kgo.EpochOffset{}
		for p, off := range offs {
			out[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: off}
		}
	}
	return out
}

// label is part's metrics label: the partition, <topic>/<partition> for a
// follower.
func (t inputTopics) label(part int32) string {
	if part < coStride {
		return strconv.Itoa(int(part))
	}
	topic, p := t.kafka(part)
	return topic + "/" + strconv.Itoa(int(p))
}

// labels are the labels of parts.
func (t inputTopics) labels(parts []int32) []string {
	out := make([]string, len(parts))
	for i, part := range parts {
		out[i] = t.label(part)
	}
	return out
}

// partitionsField is parts as a log field: numbers, or with several
// topics their labels.
func (t inputTopics) partitionsField(parts []int32) zap.Field {
	if t.co() {
		return zap.Strings("partitions", t.labels(parts))
	}
	return zap.Int32s("partitions", parts)
}

// renumber gives the records of one poll the pipeline's partitions (a
// follower's records and partitions take its number; the lead's keep
// theirs) and its topics the lead's, so the loop reads one topic. A
// record's own topic stays: sourceRecord gives it its partition back.
func (t inputTopics) renumber(fetches kgo.Fetches) {
	if !t.co() {
		return
	}
	for i := range fetches {
		for j := range fetches[i].Topics {
			ft := &fetches[i].Topics[j]
			in := slices.Index(t.topics, ft.Topic)
			if in <= 0 {
				continue // the lead's, or not an input
			}
			ft.Topic = t.topics[0]
			for k := range ft.Partitions {
				fp := &ft.Partitions[k]
				fp.Partition += int32(in) * coStride
				for _, r := range fp.Records {
					r.Partition = fp.Partition
				}
			}
		}
	}
}

// sourceRecord returns r as the consumer read it: a renumbered record's
// copy with its input partition (for dead letters and late records, whose
// headers name it).
func (t inputTopics) sourceRecord(r *kgo.Record) *kgo.Record {
	if r.Partition < coStride {
		return r
	}
	c := *r
	c.Partition = r.Partition % coStride
	return &c
}
