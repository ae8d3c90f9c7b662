package windowing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/axiomhq/hyperloglog"

	"github.com/windowd/windowd/codec"
)

// window is the state of one open window of one key: its partial
// aggregates and its trigger state (kept here, apart from the TriggerSpec).
type window struct {
	start, end int64
	acc        []accum
	nextIndex  uint32
	onTimeDone bool   // the on-time step ran (or the window was born late)
	lateSeen   bool   // a late record updated the window
	settled    bool   // an ON_TIME or LATE pane was emitted
	lastLate   bool   // of those, the last one was LATE (query.go)
	ended      Ending // a transaction window: the record that ended it, if any (transaction.go)
	sincePane  int64  // records since the last pane (changed when > 0)
	timer      int64  // deadline of its event-time timer (end, or end+lateness); a count window's first time
	hasProc    bool   // a processing-time timer is pending: see lateProc
	proc       int64  // deadline of its processing-time timer, when hasProc
	last       *lastPane
	paneSeq    uint64 // sliced key: its seq at the window's last pane; a count window's last time
	retired    bool   // sliding key: expired, kept for its slices (sliding.go)
	mode       Mode   // its accumulation mode: the one it opened under, until a pane bridges it to the pipeline's (bridgeMode)
	partial    uint64 // aggregates added after it opened: bit i, aggregate i (layout.go)
}

// A count window has no event-time timer and is never sliced: timer holds
// its first record's event time, paneSeq its last one's (count.go).

// firstTime is count window w's first record's event time.
func (w *window) firstTime() int64 { return w.timer }

// lastTime is count window w's last record's event time.
func (w *window) lastTime() int64 { return int64(w.paneSeq) }

// lateProc reports whether w's processing-time timer, pending or to be
// armed, is a late trigger's rather than an early one's: it is after the
// window's on-time step (or the window was born late). The on-time step
// cancels an early timer, and a session merge keeps only the timers of the
// merged window's phase, so a pending timer is always of the phase this
// reports.
func (w *window) lateProc() bool { return w.onTimeDone }

// procOf returns whether w has a processing-time timer of the phase late
// (see lateProc), and its deadline.
func (w *window) procOf(late bool) (bool, int64) {
	return w.hasProc && w.lateProc() == late, w.proc
}

// windowAccs2 and windowAccs4 are a window and its aggregates in one
// allocation: most pipelines have a few aggregates, and in windows of about
// one record each allocation is a share of the window's cost.
type (
	windowAccs2 struct {
		w   window
		acc [2]accum
	}
	windowAccs4 struct {
		w   window
		acc [4]accum
	}
)

// allocWindow returns a zero window with n zero aggregates.
func allocWindow(n int) *window {
	switch {
	case n == 0:
		return &window{}
	case n <= 2:
		x := &windowAccs2{}
		x.w.acc = x.acc[:n:n]
		return &x.w
	case n <= 4:
		x := &windowAccs4{}
		x.w.acc = x.acc[:n:n]
		return &x.w
	}
	return &window{acc: make([]accum, n)}
}

// lastPane is what a retraction repeats (retracting mode only, and the
// accumulating pane that bridged to it).
type lastPane struct {
	start, end int64
	// firstTime, lastTime: a count window's (window.firstTime, lastTime)
	// when the pane was emitted.
	firstTime, lastTime int64
	timing              Timing
	timedOut            bool // a transaction window's pane after its timeout (Pane.TimedOut)
	mode                Mode
	index               uint32
	values              []Value
}

// keyState holds every open window of one group key, sorted by start.
type keyState struct {
	shard uint32
	dirty bool
	// sliced: the windows hold no aggregates; slices (in start order) do,
	// and seq counts the key's records (slices.go).
	sliced bool
	// sliding: the windows hold their aggregates and slide the key's
	// records merged per time, what new windows start from (sliding.go).
	sliding bool
	// counting: a count windows key: seq counts its records, and its
	// state is kept while it has no window (count.go).
	counting bool
	// slide: a sliding key's records merged per time (sliding.go), or a
	// transaction key's (transaction.go).
	slide   *slides
	key     string
	windows []*window // backed by slots while it fits there
	size    int       // approximate bytes, for the cache budget
	slices  []*slice
	seq     uint64
	// slots back windows for a key of at most keptSlots windows (every
	// key of a tumbling pipeline, most of a session one): looking up a
	// window then reads no separate array, and the key costs no
	// allocation for it. The struct stays in the same 112-byte size class
	// as without them. Slots not in windows are nil.
	slots [keptSlots]*window
}

// find returns the key's window that starts at start, or nil. Starts are
// distinct where it is used (fixed windows, and session timers, which name
// a session by its start). A key mostly holds a few windows: those are
// compared in turn, without the binary search's calls: a sliding key's
// from its newest, which its timers and records mostly name (its first
// is mostly its retired window, sliding.go).
func (ks *keyState) find(start int64) *window {
	if ks.sliding && len(ks.windows) <= 8 {
		for i := len(ks.windows) - 1; i >= 0; i-- {
			if w := ks.windows[i]; w.start == start {
				return w
			}
		}
		return nil
	}
	if len(ks.windows) <= 8 {
		for _, w := range ks.windows {
			if w.start == start {
				return w
			}
		}
		return nil
	}
	i := sort.Search(len(ks.windows), func(i int) bool { return ks.windows[i].start >= start })
	if i < len(ks.windows) && ks.windows[i].start == start {
		return ks.windows[i]
	}
	return nil
}

// findSpan returns the key's window sp, or nil (byEnd: as Engine.byEnd).
func (ks *keyState) findSpan(sp Span, byEnd bool) *window {
	if byEnd {
		return ks.findNamed(sp.End, true)
	}
	return ks.find(sp.Start)
}

// findNamed returns the window a timer names (timerOf): by its start, or
// by its end when byEnd. Windows in (start, end) order of one start and
// distinct ends are in end order too.
func (ks *keyState) findNamed(name int64, byEnd bool) *window {
	if !byEnd {
		return ks.find(name)
	}
	i := sort.Search(len(ks.windows), func(i int) bool { return ks.windows[i].end >= name })
	if i < len(ks.windows) && ks.windows[i].end == name {
		return ks.windows[i]
	}
	return nil
}

// insert adds w in (start, end) order; last: after every window.
func (ks *keyState) insert(w *window, last bool) {
	if ks.windows == nil {
		ks.windows = ks.slots[:0]
	} else if len(ks.windows) == len(ks.slots) && ks.inSlots() {
		// Leaving the slots: the list moves to an array of its own and
		// the slots let go of their windows.
		ws := make([]*window, len(ks.slots), 2*len(ks.slots))
		copy(ws, ks.slots[:])
		clear(ks.slots[:])
		ks.windows = ws
	}
	if last {
		ks.windows = append(ks.windows, w)
		return
	}
	i := sort.Search(len(ks.windows), func(i int) bool {
		x := ks.windows[i]
		return x.start > w.start || x.start == w.start && x.end >= w.end
	})
	ks.windows = append(ks.windows, nil)
	copy(ks.windows[i+1:], ks.windows[i:])
	ks.windows[i] = w
}

// keptSlots is the capacity of an emptied window or slice list that a key
// keeps for its next window (a key of a tumbling pipeline goes from none
// to one and back); a larger one is released. It is also the number of
// keyState.slots.
const keptSlots = 2

// inSlots reports whether ks.windows is backed by ks.slots.
func (ks *keyState) inSlots() bool {
	return cap(ks.windows) == len(ks.slots) && &ks.windows[:1][0] == &ks.slots[0]
}

// syncRetired brings the end of w, when it is the key's retired window,
// up to date from the slides header (retireOrDelete moves it there).
func (ks *keyState) syncRetired(w *window) {
	if w.retired && ks.slide != nil && ks.slide.retired {
		w.end = ks.slide.retiredEnd
	}
}

func (ks *keyState) remove(w *window) {
	for i, x := range ks.windows {
		if x == w {
			copy(ks.windows[i:], ks.windows[i+1:])
			ks.windows[len(ks.windows)-1] = nil
			ks.windows = ks.windows[:len(ks.windows)-1]
			if len(ks.windows) == 0 && !ks.inSlots() {
				ks.windows = nil // the estimate of a key without windows does not count it
			}
			return
		}
	}
}

// resort restores start order after a session's start moved.
func (ks *keyState) resort() {
	sort.Slice(ks.windows, func(i, j int) bool { return ks.windows[i].start < ks.windows[j].start })
}

const (
	flagOnTimeDone = 1 << iota
	flagLateSeen
	flagSettled
	flagHasProc
	flagHasLast
	flagRetired
	// flagLastAccumulating: the last pane was an accumulating pane that
	// bridged to retracting mode (engine.go, emitPane); without it, a
	// retracting one.
	flagLastAccumulating
	// flagLastLate: of the window's ON_TIME and LATE panes, the last one
	// was LATE (window.lastLate). Versions before it ignore it; their
	// state shows such a pane as ON_TIME to a query.
	flagLastLate
)

// Key state encodings: per-window aggregates (1), sliced (2): windows
// with their paneSeq instead of aggregates, then seq and the slices, or
// sliding (3): windows as in 1, then seq and the slices as in 2. Once the
// pipeline's definition has changed (layout.go), 4, 5 and 6 are 1, 2 and
// 3 tagged: the layout's gen follows the version, each window has its
// mode and partial mask after its timers, each slice its partial mask
// after its seq, and a sliding key its partial mask and partialTo last.
//
// The quantiles and top_k aggregates and RawValue in a last pane extended
// both encodings without a new version: they occur only in the state of a
// pipeline that has those aggregates, which a version without them cannot
// run, and state written before them never holds them.
//
// A count windows key (count.go) is 7, or 8 tagged: windows as in 1, each
// with its last record's event time after its aggregates (the first is its
// timer), a last pane with its two times after its index, then the key's
// seq.
//
// A transaction windows key (transaction.go) is 9, or 10 tagged: windows
// as in 1, each with its Ending after its aggregates, a last pane's timing
// byte with bit 0x80 set when it timed out, then the key's records by time
// as a sliding key's (3), and tagged, the same partial mask and
// partialTo.
const (
	keyStateVersion        = 1
	keyStateVersionSliced  = 2
	keyStateVersionSliding = 3
	keyStateTagged         = 3 // added to a version: tagged with a layout gen
	keyStateVersionCount   = 7 // tagged: 8
	keyStateVersionTxn     = 9 // tagged: 10
	lastTimedOut           = 0x80
)

// encodeKeyState appends the binary form of ks's windows, untagged.
func encodeKeyState(b []byte, ks *keyState, specs []AggSpec) ([]byte, error) {
	c := stateCodec{specs: specs}
	return c.encode(b, ks)
}

// encode appends the binary form of ks's windows: tagged with c.gen once
// the definition has changed.
func (c *stateCodec) encode(b []byte, ks *keyState) ([]byte, error) {
	specs := c.specs
	tagged := c.gen > 0
	v := byte(keyStateVersion)
	switch {
	case ks.sliced:
		v = keyStateVersionSliced
	case ks.sliding:
		v = keyStateVersionSliding
	}
	switch {
	case ks.counting && tagged:
		b = append(b, keyStateVersionCount+1)
		b = binary.AppendUvarint(b, uint64(c.gen))
	case ks.counting:
		b = append(b, keyStateVersionCount)
	case c.txn && tagged:
		b = append(b, keyStateVersionTxn+1)
		b = binary.AppendUvarint(b, uint64(c.gen))
	case c.txn:
		b = append(b, keyStateVersionTxn)
	case tagged:
		b = append(b, v+keyStateTagged)
		b = binary.AppendUvarint(b, uint64(c.gen))
	default:
		b = append(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(ks.windows)))
	for _, w := range ks.windows {
		ks.syncRetired(w)
		var flags byte
		if w.onTimeDone {
			flags |= flagOnTimeDone
		}
		if w.lateSeen {
			flags |= flagLateSeen
		}
		if w.settled {
			flags |= flagSettled
			if w.lastLate {
				flags |= flagLastLate
			}
		}
		if w.hasProc {
			flags |= flagHasProc
		}
		if w.last != nil {
			flags |= flagHasLast
			if w.last.mode == Accumulating {
				flags |= flagLastAccumulating
			}
		}
		if w.retired {
			flags |= flagRetired
		}
		b = append(b, flags)
		b = binary.AppendVarint(b, w.start)
		b = binary.AppendVarint(b, w.end)
		b = binary.AppendUvarint(b, uint64(w.nextIndex))
		b = binary.AppendVarint(b, w.sincePane)
		b = binary.AppendVarint(b, w.timer)
		if w.hasProc {
			b = binary.AppendVarint(b, w.proc)
		}
		if tagged {
			b = append(b, byte(w.mode))
			b = binary.AppendUvarint(b, w.partial)
		}
		if ks.sliced {
			b = binary.AppendUvarint(b, w.paneSeq)
		} else {
			var err error
			if b, err = appendAccums(b, w.acc, specs); err != nil {
				return nil, err
			}
		}
		if ks.counting {
			b = binary.AppendVarint(b, w.lastTime()) // (its first time is its timer)
		}
		if c.txn {
			b = append(b, byte(w.ended))
		}
		if w.last != nil {
			l := w.last
			b = binary.AppendVarint(b, l.start)
			b = binary.AppendVarint(b, l.end)
			timing := byte(l.timing)
			if l.timedOut {
				timing |= lastTimedOut
			}
			b = append(b, timing)
			b = binary.AppendUvarint(b, uint64(l.index))
			if ks.counting {
				b = binary.AppendVarint(b, l.firstTime)
				b = binary.AppendVarint(b, l.lastTime)
			}
			for _, v := range l.values {
				b = append(b, byte(v.Kind))
				switch v.Kind {
				case IntValue:
					b = binary.AppendVarint(b, v.Int)
				case NumValue:
					b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Num))
				case RawValue:
					b = binary.AppendUvarint(b, uint64(len(v.Raw)))
					b = append(b, v.Raw...)
				}
			}
		}
	}
	if ks.counting {
		return binary.AppendUvarint(b, ks.seq), nil
	}
	if ks.sliding || c.txn {
		var err error
		if b, err = appendSlide(b, ks, specs); err != nil || !tagged {
			return b, err
		}
		var partial uint64
		var to int64
		if ks.slide != nil {
			partial, to = ks.slide.partial, ks.slide.partialTo
		}
		b = binary.AppendUvarint(b, partial)
		return binary.AppendVarint(b, to), nil
	}
	if ks.sliced {
		b = binary.AppendUvarint(b, ks.seq)
		b = binary.AppendUvarint(b, uint64(len(ks.slices)))
		for _, sl := range ks.slices {
			b = binary.AppendVarint(b, sl.start)
			b = binary.AppendVarint(b, sl.lastF)
			b = binary.AppendUvarint(b, sl.seq)
			if tagged {
				b = binary.AppendUvarint(b, sl.partial)
			}
			var err error
			if b, err = appendAccums(b, sl.acc, specs); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// appendSlide appends a sliding key's records as a sliced key's slices
// (the seq and each slice's lastF and seq are 0).
func appendSlide(b []byte, ks *keyState, specs []AggSpec) ([]byte, error) {
	b = binary.AppendUvarint(b, 0)
	n := 0
	if ks.slide != nil {
		n = ks.slide.len()
	}
	b = binary.AppendUvarint(b, uint64(n))
	if n == 0 {
		return b, nil
	}
	err := ks.slide.each(func(t int64, acc []accum) error {
		b = binary.AppendVarint(b, t)
		b = binary.AppendVarint(b, 0)
		b = binary.AppendUvarint(b, 0)
		var err error
		b, err = appendAccums(b, acc, specs)
		return err
	})
	return b, err
}

// slide decodes a sliding or (txn) a transaction key's records
// (appendSlide).
func (d *decoder) slide(ks *keyState, specs []AggSpec, txn bool) error {
	d.uvarint()
	n := d.uvarint()
	if n > uint64(d.left()) {
		return errCorruptState
	}
	switch {
	case txn && (ks.slide == nil || !ks.slide.pristine(specs)):
		ks.slide = newTxnSlides(specs)
	case txn:
	case ks.slide == nil || !ks.slide.pristine(specs):
		ks.slide = newSlides(specs)
	}
	prev := int64(math.MinInt64)
	for i := uint64(0); i < n && d.err() == nil; i++ {
		t := d.varint()
		d.varint()
		d.uvarint()
		acc, err := d.accums(specs)
		if err != nil {
			return err
		}
		if i > 0 && t <= prev {
			return errCorruptState
		}
		prev = t
		ks.slide.load(t, acc)
	}
	return nil
}

// appendAccums appends the binary form of one set of accumulators.
func appendAccums(b []byte, acc []accum, specs []AggSpec) ([]byte, error) {
	for i := range specs {
		a := &acc[i]
		b = binary.AppendVarint(b, a.n)
		switch specs[i].Op {
		case Sum, Avg, Min, Max:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(a.f))
		case DistinctApprox:
			if a.hll == nil {
				b = binary.AppendUvarint(b, 0)
				continue
			}
			enc, err := a.hll.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", specs[i].Name, err)
			}
			b = binary.AppendUvarint(b, uint64(len(enc)))
			b = append(b, enc...)
		case Quantiles:
			if a.sk == nil {
				b = binary.AppendUvarint(b, 0)
				continue
			}
			b = a.sk.q.appendBinary(b)
		case TopK:
			if a.sk == nil {
				b = append(b, 0, 0) // floor 0, no counter
				continue
			}
			b = a.sk.top.appendBinary(b)
		}
	}
	return b, nil
}

// accums decodes one set of accumulators.
func (d *decoder) accums(specs []AggSpec) ([]accum, error) {
	acc := make([]accum, len(specs))
	return acc, d.accumsInto(acc, specs)
}

// accumsInto decodes the aggregates of specs into acc (len(specs) long).
func (d *decoder) accumsInto(acc []accum, specs []AggSpec) error {
	for j := range specs {
		a := &acc[j]
		a.n = d.varint()
		switch specs[j].Op {
		case Sum, Avg, Min, Max:
			a.f = d.float()
		case DistinctApprox:
			enc := d.bytes(d.uvarint())
			if len(enc) > 0 && d.err() == nil {
				a.hll = new(hyperloglog.Sketch)
				if err := a.hll.UnmarshalBinary(enc); err != nil {
					return fmt.Errorf("decode %s: %w", specs[j].Name, err)
				}
			}
		case Quantiles:
			sk := &sketch{}
			ok, err := d.quantiles(&specs[j], a.n, &sk.q)
			if err != nil {
				return err
			}
			if ok {
				a.sk = sk
			}
		case TopK:
			t, err := d.topK(&specs[j])
			if err != nil {
				return err
			}
			if len(t.e) > 0 || t.floor > 0 {
				a.sk = &sketch{top: *t}
			}
		}
	}
	return nil
}

var errCorruptState = errors.New("windowing: corrupt window state")

// decoder reads key state through codec.Reader, the one reader of
// windowd's binary formats; a value it cannot read is errCorruptState.
type decoder struct{ r codec.Reader }

func newDecoder(b []byte) decoder { return decoder{codec.ReaderOf(b, "window state")} }

// err is errCorruptState once a field could not be read.
func (d *decoder) err() error {
	if d.r.Err() != nil {
		return errCorruptState
	}
	return nil
}

func (d *decoder) varint() int64         { return d.r.Varint() }
func (d *decoder) uvarint() uint64       { return d.r.Uvarint() }
func (d *decoder) byte1() byte           { return d.r.Byte() }
func (d *decoder) float() float64        { return d.r.Float64() }
func (d *decoder) bytes(n uint64) []byte { return d.r.Next(n) }
func (d *decoder) left() int             { return d.r.Len() }

// decodeKeyState fills ks.windows from b (which it does not retain),
// untagged state of specs.
func decodeKeyState(b []byte, ks *keyState, specs []AggSpec) error {
	c := stateCodec{specs: specs}
	return c.decode(b, ks)
}

// decode fills ks.windows from b (which it does not retain), carrying
// state of an earlier layout to the current aggregates (layout.go).
func (c *stateCodec) decode(b []byte, ks *keyState) error {
	d := newDecoder(b)
	if ks.slide != nil && !ks.slide.pristine(c.specs) {
		ks.slide = nil // (an empty store of these specs stays: Engine.newKeyState's)
	}
	v := d.byte1()
	ks.counting = v == keyStateVersionCount || v == keyStateVersionCount+1
	txn := v == keyStateVersionTxn || v == keyStateVersionTxn+1
	if txn != c.txn {
		return errCorruptState // state of another kind of window
	}
	tagged := v > keyStateTagged
	switch {
	case ks.counting:
		tagged = v == keyStateVersionCount+1
		v = keyStateVersion
	case c.txn:
		tagged = v == keyStateVersionTxn+1
		v = keyStateVersion
	case tagged:
		v -= keyStateTagged
	}
	var gen uint32
	if tagged {
		g := d.uvarint()
		if g > math.MaxUint32 {
			return errCorruptState
		}
		gen = uint32(g)
	}
	switch v {
	case keyStateVersion:
		ks.sliced, ks.sliding = false, false
	case keyStateVersionSliced:
		ks.sliced, ks.sliding = true, false
	case keyStateVersionSliding:
		ks.sliced, ks.sliding = false, true
	default:
		return errCorruptState
	}
	specs, mode, carry, err := c.layout(gen)
	if err != nil {
		return err
	}
	n := d.uvarint()
	if n > uint64(len(b)) {
		return errCorruptState
	}
	clear(ks.slots[:])
	if n <= uint64(len(ks.slots)) {
		ks.windows = ks.slots[:0]
	} else {
		ks.windows = make([]*window, 0, n)
	}
	for i := uint64(0); i < n && d.err() == nil; i++ {
		flags := d.byte1()
		nAcc := len(specs)
		if ks.sliced {
			nAcc = 0
		}
		w := allocWindow(nAcc)
		w.onTimeDone = flags&flagOnTimeDone != 0
		w.lateSeen = flags&flagLateSeen != 0
		w.settled = flags&flagSettled != 0
		w.lastLate = flags&flagLastLate != 0
		w.hasProc = flags&flagHasProc != 0
		w.retired = flags&flagRetired != 0
		w.start = d.varint()
		w.end = d.varint()
		w.nextIndex = uint32(d.uvarint())
		w.sincePane = d.varint()
		w.timer = d.varint()
		if w.hasProc {
			w.proc = d.varint()
		}
		w.mode, w.partial = mode, 0
		if tagged {
			w.mode = Mode(d.byte1())
			w.partial = d.uvarint()
		}
		if ks.sliced {
			w.paneSeq = d.uvarint()
		} else {
			if err := d.accumsInto(w.acc, specs); err != nil {
				return err
			}
		}
		if ks.counting {
			w.paneSeq = uint64(d.varint()) // lastTime
		}
		if c.txn {
			if w.ended = Ending(d.byte1()); w.ended > Discards {
				return errCorruptState
			}
		}
		if flags&flagHasLast != 0 {
			l := &lastPane{mode: Retracting, values: make([]Value, len(specs))}
			if flags&flagLastAccumulating != 0 {
				l.mode = Accumulating
			}
			l.start = d.varint()
			l.end = d.varint()
			timing := d.byte1()
			if c.txn {
				l.timedOut = timing&lastTimedOut != 0
				timing &^= lastTimedOut
			}
			l.timing = Timing(timing)
			l.index = uint32(d.uvarint())
			if ks.counting {
				l.firstTime = d.varint()
				l.lastTime = d.varint()
			}
			for j := range l.values {
				v := &l.values[j]
				v.Kind = ValueKind(d.byte1())
				switch v.Kind {
				case IntValue:
					v.Int = d.varint()
				case NumValue:
					v.Num = d.float()
				case RawValue:
					v.Raw = string(d.bytes(d.uvarint()))
				case NullValue:
				default:
					return errCorruptState
				}
			}
			w.last = l
		}
		ks.windows = append(ks.windows, w)
	}
	ks.slices = ks.slices[:0]
	if ks.counting {
		ks.seq = d.uvarint()
	}
	if ks.sliding || c.txn {
		if err := d.slide(ks, specs, c.txn); err != nil {
			return err
		}
		if tagged {
			ks.slide.partial = d.uvarint()
			ks.slide.partialTo = d.varint()
		}
		if len(ks.windows) > 0 && ks.windows[0].retired {
			ks.slide.retired, ks.slide.retiredEnd = true, ks.windows[0].end
		}
	}
	if ks.sliced {
		ks.seq = d.uvarint()
		n := d.uvarint()
		if n > uint64(len(b)) {
			return errCorruptState
		}
		for i := uint64(0); i < n && d.err() == nil; i++ {
			sl := &slice{start: d.varint(), lastF: d.varint(), seq: d.uvarint()}
			if tagged {
				sl.partial = d.uvarint()
			}
			var err error
			if sl.acc, err = d.accums(specs); err != nil {
				return err
			}
			ks.slices = append(ks.slices, sl)
		}
	}
	if d.err() != nil {
		return d.err()
	}
	if d.left() != 0 {
		return errCorruptState
	}
	if carry != nil {
		c.carry(ks, carry)
	}
	return nil
}

// keyCache holds the engine's cached key states by shard and key: a map per
// shard, so that a lookup hashes the key string alone (Go's string-keyed
// map path, about three times faster than a struct key of shard and key).
type keyCache struct {
	shards    map[uint32]map[string]*keyState
	lastShard uint32
	last      map[string]*keyState // shards[lastShard]; nil: none
}

func newKeyCache() keyCache {
	return keyCache{shards: map[uint32]map[string]*keyState{}}
}

// shard returns the map of shard, creating it when create is set; nil when
// there is none.
func (c *keyCache) shard(shard uint32, create bool) map[string]*keyState {
	if c.last != nil && c.lastShard == shard {
		return c.last
	}
	m := c.shards[shard]
	if m == nil {
		if !create {
			return nil
		}
		m = map[string]*keyState{}
		c.shards[shard] = m
	}
	c.lastShard, c.last = shard, m
	return m
}

// get returns the cached state of (shard, key), or nil.
func (c *keyCache) get(shard uint32, key string) *keyState {
	return c.shard(shard, false)[key]
}

// put caches ks.
func (c *keyCache) put(ks *keyState) {
	c.shard(ks.shard, true)[ks.key] = ks
}

// delete drops (shard, key) from the cache.
func (c *keyCache) delete(shard uint32, key string) {
	delete(c.shard(shard, false), key)
}

// dropShard drops every key of shard and returns the bytes they were
// counted for.
func (c *keyCache) dropShard(shard uint32) (size int) {
	for _, ks := range c.shards[shard] {
		size += ks.size
	}
	delete(c.shards, shard)
	if c.lastShard == shard {
		c.last = nil
	}
	return size
}

// each calls fn with every cached key state until it returns an error.
func (c *keyCache) each(fn func(*keyState) error) error {
	for _, m := range c.shards {
		for _, ks := range m {
			if err := fn(ks); err != nil {
				return err
			}
		}
	}
	return nil
}

// clear drops every key.
func (c *keyCache) clear() {
	for _, m := range c.shards {
		clear(m)
	}
}
