package replay

import (
	"bytes"
	"io"
	"sync"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/schema"
)

// Counting the input's partitions, for a replay without --partitions.

// ScanPartitions returns one more than the largest partition of a valid
// record of p in r (at least 1): the partition count a replay without
// --partitions uses. A line is read as Run reads it (clock lines
// included, and the decoder's checks); a line Run would dead-letter adds no
// partition, so an invalid line never changes the result (docs/SEMANTICS.md,
// Replay). A partition must be below MaxPartitions. When records decode
// whatever the lines before them (lineDecoder.orderFree), a line whose
// partition is at most the largest found so far is not decoded
// (lineDecoder.skipLine): it cannot change the result.
func ScanPartitions(p *config.Pipeline, reg *schema.Registry, r io.Reader) (int, error) {
	s := &runner{opts: Options{Pipeline: p, Partitions: MaxPartitions, Registry: reg}}
	s.set = settler{sum: &s.sum, em: &s.em, scan: true, layout: layoutOf(p, MaxPartitions)}
	if err := s.lines(nil, r); err != nil {
		return 0, err
	}
	return int(s.set.largest) + 1, nil
}

// ScanPartitionsAt is ScanPartitions over the size bytes of r, cut at
// line ends into up to n ranges scanned at once (each through wrap, e.g.
// Interruptible), when the pipeline's records decode whatever the lines
// before them (the scan otherwise runs on one core before the replay can
// start). The largest partition does not depend on the order the lines
// are read in, so the result is ScanPartitions'; when a range fails, the
// whole input is scanned again in order, for the error a serial scan
// gives (its line numbers).
func ScanPartitionsAt(p *config.Pipeline, reg *schema.Registry, r io.ReaderAt, size int64, n int, wrap func(io.Reader) io.Reader) (int, error) {
	whole := func() (int, error) { return ScanPartitions(p, reg, wrap(io.NewSectionReader(r, 0, size))) }
	if n <= 1 || size < minScanRange {
		return whole()
	}
	d, err := newLineDecoder(&Options{Pipeline: p, Registry: reg, Partitions: MaxPartitions})
	if err != nil {
		return 0, err
	}
	if !d.orderFree() {
		return whole()
	}
	cuts := []int64{0}
	for i := 1; i < n; i++ {
		at, err := lineStart(r, max(size*int64(i)/int64(n), cuts[len(cuts)-1]), size)
		if err != nil {
			return whole()
		}
		if at < size && at > cuts[len(cuts)-1] {
			cuts = append(cuts, at)
		}
	}
	cuts = append(cuts, size)
	found := make([]int, len(cuts)-1)
	errs := make([]error, len(cuts)-1)
	var wg sync.WaitGroup
	for i := range found {
		wg.Go(func() {
			found[i], errs[i] = ScanPartitions(p, reg, wrap(io.NewSectionReader(r, cuts[i], cuts[i+1]-cuts[i])))
		})
	}
	wg.Wait()
	largest := 1
	for i := range found {
		if errs[i] != nil {
			return whole()
		}
		largest = max(largest, found[i])
	}
	return largest, nil
}

// minScanRange: an input below it is scanned on one core.
const minScanRange = 1 << 20

// lineStart returns the start of the first line that begins at or after
// from (size at the end of the input), passing a line that starts with a
// byte order mark (read on its own, the mark would be skipped as a
// file's).
func lineStart(r io.ReaderAt, from, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	at := from
	if at > 0 {
		// The first line that begins after from-1's line end.
		at--
	}
	for at < size {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-at)], at)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			start := at + int64(i) + 1
			if start < size {
				head := make([]byte, len(utf8BOM))
				if m, _ := r.ReadAt(head, start); m == len(head) && string(head) == utf8BOM {
					return lineStart(r, start+1, size)
				}
			}
			return start, nil
		}
		if err != nil && err != io.EOF {
			return 0, err
		}
		at += int64(n)
	}
	return size, nil
}
