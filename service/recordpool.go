package service

import (
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordPool lends franz-go the slices it decodes fetched records into
// (kgo.PoolRecords), so that a drain does not allocate a new []kgo.Record
// per fetched batch: those were a third of the bytes a keyed drain
// allocated, and so of its garbage collections. A slice comes back once
// every record of its batch has been recycled (decodeAhead.finish recycles
// a poll's input records when nothing refers to them any more; a record
// never recycled only keeps its slice from coming back).
//
// Slices are kept by capacity class, powers of two from 16 records; a
// batch of n records takes a slice of the smallest class that holds n.
type recordPool struct {
	classes [recordClasses]sync.Pool // of *[]kgo.Record
}

const (
	minRecordClass = 4  // 16 records
	recordClasses  = 20 // up to 8M records: franz-go's batches are far smaller
)

// recordSlices is the process's pool: every pipeline's group client uses it.
var recordSlices = new(recordPool)

func recordClass(n int) int { return max(bits.Len(uint(n-1)), minRecordClass) }

// GetRecords returns an empty slice of capacity at least n.
func (rp *recordPool) GetRecords(n int) []kgo.Record {
	c := recordClass(n)
	if c >= recordClasses {
		return make([]kgo.Record, 0, n)
	}
	if s, ok := rp.classes[c].Get().(*[]kgo.Record); ok {
		return (*s)[:0]
	}
	return make([]kgo.Record, 0, 1<<c)
}

// PutRecords takes back a slice GetRecords lent (franz-go has zeroed its
// records).
func (rp *recordPool) PutRecords(s []kgo.Record) {
	c := recordClass(cap(s))
	if c >= recordClasses || cap(s) != 1<<c {
		return // not one of ours
	}
	rp.classes[c].Put(&s)
}
