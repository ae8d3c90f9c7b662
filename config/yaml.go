package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/windowd/windowd/expr"
)

// This file holds the schema-independent machinery: positions, alias
// resolution, checked mappings and value converters. load.go and
// pipeline.go use it to describe the windowd schema.

// pos is a 1-based line and column in the file.
type pos struct{ line, col int }

func (p pos) before(q pos) bool {
	return p.line < q.line || p.line == q.line && p.col < q.col
}

// posOf returns where a node is written. A block mapping starts at its first
// key (goccy reports its first ':').
func posOf(n ast.Node) pos {
	switch x := n.(type) {
	case nil:
		return pos{1, 1}
	case *ast.MappingNode:
		if !x.IsFlowStyle && len(x.Values) > 0 && x.Values[0] != nil {
			return posOf(x.Values[0])
		}
	case *ast.MappingValueNode:
		if x.Key != nil {
			return posOf(x.Key)
		}
	}
	return tokenPos(n.GetToken())
}

func tokenPos(tk *token.Token) pos {
	if tk == nil || tk.Position == nil {
		return pos{1, 1}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

// tokenText is the text of a scalar as written.
func tokenText(n ast.Node) string {
	if n == nil {
		return ""
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

// text returns the value of a string scalar.
func text(n ast.Node) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		if x.Value != nil {
			return x.Value.Value, true
		}
	}
	return "", false
}

// describe names a value for `expected X, got Y` messages.
func describe(n ast.Node) string {
	switch n.(type) {
	case nil:
		return "nothing"
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "null"
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := text(n)
		return quote(s)
	}
	return tokenText(n) // numbers, booleans, .inf, .nan
}

// quote quotes s for a message, shortening long values.
func quote(s string) string {
	if r := []rune(s); len(r) > 40 {
		s = string(r[:37]) + "..."
	}
	return strconv.Quote(s)
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// decoder collects problems while it walks the document.
type decoder struct {
	file        string
	lines       []string // of the source, to keep columns on their line
	problems    []Problem
	anchors     []anchorDef
	mergeBudget int // merged mappings still allowed, against merge-key bombs
	// aggExprs are the expressions of the aggregates read last
	// (aggregates), for the pipeline being read.
	aggExprs []*expr.Program
	// aggInputs are the inputs the aggregates read last name
	// (aggregates[].input; name "": every input), for the pipeline
	// being read.
	aggInputs []aggInput
	// closeWhen and discardWhen: the transaction window's expressions
	// read last (window).
	closeWhen, discardWhen *expr.Program
	// binary are the pipelines' input formats that need schema_registry.
	binary []binaryInput
	// inputMaps are the inputs read last (inputs), for the pipeline being
	// read.
	inputMaps []*mapping
}

type anchorDef struct {
	name string
	at   pos
	node ast.Node
}

const (
	maxAliasChain = 16 // anchors, aliases and tags followed to reach one value
	maxMergeDepth = 8  // merge keys inside merged mappings
	maxMerges     = 1000
)

func (d *decoder) errorf(at pos, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	msg = strings.ReplaceAll(msg, "\n", " ") // one problem, one line
	// An implicit null (`key:` and nothing) is placed past the end of its line.
	if at.line >= 1 && at.line <= len(d.lines) {
		at.col = min(at.col, utf8.RuneCountInString(d.lines[at.line-1])+1)
	}
	d.problems = append(d.problems, Problem{File: d.file, Line: at.line, Col: at.col, Msg: msg})
}

func (d *decoder) expected(n ast.Node, path, what string) {
	d.errorf(posOf(n), path, "expected %s, got %s", what, describe(n))
}

// syntaxError reports a goccy parse error at its position.
func (d *decoder) syntaxError(err error) {
	at, msg := pos{1, 1}, err.Error()
	var ye interface {
		GetToken() *token.Token
		GetMessage() string
	}
	if errors.As(err, &ye) {
		at, msg = tokenPos(ye.GetToken()), ye.GetMessage()
	}
	d.errorf(at, "", "syntax error: %s", msg)
}

// collectAnchors records every anchor of the document, for resolve.
func (d *decoder) collectAnchors(n ast.Node) {
	switch x := n.(type) {
	case *ast.AnchorNode:
		if x.Value == nil {
			return
		}
		d.anchors = append(d.anchors, anchorDef{name: tokenText(x.Name), at: posOf(x), node: x.Value})
		d.collectAnchors(x.Value)
	case *ast.TagNode:
		d.collectAnchors(x.Value)
	case *ast.MappingNode:
		for _, kv := range x.Values {
			d.collectAnchors(kv)
		}
	case *ast.MappingValueNode:
		d.collectAnchors(x.Key)
		d.collectAnchors(x.Value)
	case *ast.MappingKeyNode:
		d.collectAnchors(x.Value)
	case *ast.SequenceNode:
		for _, v := range x.Values {
			d.collectAnchors(v)
		}
	}
}

// resolve follows anchors, aliases and tags to the node holding the value.
// It returns nil, after reporting it, when that fails.
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	for range maxAliasChain {
		switch x := n.(type) {
		case *ast.AnchorNode:
			if x.Value == nil {
				return &ast.NullNode{Token: x.Start}
			}
			n = x.Value
		case *ast.TagNode:
			if x.Value == nil {
				return &ast.NullNode{Token: x.Start}
			}
			if x.Start != nil && x.Start.Value == "!!str" {
				switch x.Value.(type) {
				case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
					tk := x.Value.GetToken()
					return &ast.StringNode{Token: tk, Value: tokenText(x.Value)}
				}
			}
			n = x.Value
		case *ast.AliasNode:
			name, at := tokenText(x.Value), posOf(x)
			var target ast.Node
			for _, a := range d.anchors {
				if a.name == name && a.at.before(at) {
					target = a.node
				}
			}
			if target == nil {
				d.errorf(at, path, "undefined alias %q", name)
				return nil
			}
			n = target
		default:
			return n
		}
	}
	d.errorf(posOf(n), path, "too many nested aliases")
	return nil
}

// field is one key of a checked mapping.
type field struct {
	key   pos      // where the key is written
	value ast.Node // resolved value; nil when unusable (already reported)
}

// mapping is a YAML mapping checked against a list of known keys. Unknown
// and duplicate keys are reported when it is built.
type mapping struct {
	d      *decoder
	path   string
	at     pos // where the mapping is introduced: missing fields are reported here
	fields map[string]field
	broken bool // not a mapping (reported): missing fields are not reported again
}

// mapping checks n (resolved; nil when absent) against the known keys.
func (d *decoder) mapping(n ast.Node, path string, at pos, known ...string) *mapping {
	m := &mapping{d: d, path: path, at: at, fields: map[string]field{}}
	switch x := n.(type) {
	case nil:
		// absent: every field takes its default
	case *ast.MappingNode:
		d.addFields(m, x, known, 0)
	default:
		d.expected(n, path, "a mapping")
		m.broken = true
	}
	return m
}

// addFields adds the entries of mn to m. Merge keys (`<<: *defaults`) add the
// fields of other mappings that m does not set itself.
func (d *decoder) addFields(m *mapping, mn *ast.MappingNode, known []string, depth int) {
	var merges []ast.Node
	for _, kv := range mn.Values {
		if kv == nil {
			continue
		}
		if _, ok := kv.Key.(*ast.MergeKeyNode); ok {
			merges = append(merges, kv.Value)
			continue
		}
		at := posOf(kv.Key)
		name, ok := keyName(kv.Key)
		if !ok {
			d.errorf(at, m.path, "field names must be strings, got %s", describe(kv.Key))
			continue
		}
		path := m.child(name)
		if prev, dup := m.fields[name]; dup {
			if depth == 0 {
				d.errorf(at, path, "duplicate field %q (first at line %d)", name, prev.key.line)
			}
			continue
		}
		if !slices.Contains(known, name) {
			d.errorf(at, path, "unknown field %q%s", name, suggest(name, known))
			continue
		}
		m.fields[name] = field{key: at, value: d.resolve(kv.Value, path)}
	}
	path := m.child("<<")
	for _, mv := range merges {
		var sources []ast.Node
		switch x := d.resolve(mv, path).(type) {
		case nil:
		case *ast.MappingNode:
			sources = append(sources, x)
		case *ast.SequenceNode:
			for _, v := range x.Values {
				sources = append(sources, d.resolve(v, path))
			}
		default:
			d.expected(x, path, "a mapping or a list of mappings")
		}
		for _, src := range sources {
			sm, ok := src.(*ast.MappingNode)
			switch {
			case src == nil:
			case !ok:
				d.expected(src, path, "a mapping")
			case depth >= maxMergeDepth || d.mergeBudget >= maxMerges:
				d.errorf(posOf(src), path, "too many nested merge keys")
			default:
				d.mergeBudget++
				d.addFields(m, sm, known, depth+1)
			}
		}
	}
}

// keyName returns the name of a mapping key.
func keyName(k ast.Node) (string, bool) {
	switch x := k.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.MappingKeyNode:
		return keyName(x.Value)
	case *ast.AnchorNode:
		return keyName(x.Value)
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode:
		return tokenText(k), true
	}
	return "", false
}

func (m *mapping) child(key string) string {
	if m.path == "" {
		return key
	}
	return m.path + "." + key
}

func (m *mapping) has(key string) bool {
	_, ok := m.fields[key]
	return ok
}

// keyAt is where key is written (the mapping's position when absent).
func (m *mapping) keyAt(key string) pos {
	if f, ok := m.fields[key]; ok {
		return f.key
	}
	return m.at
}

// valueAt is where the value of key is written.
func (m *mapping) valueAt(key string) pos {
	if f, ok := m.fields[key]; ok && f.value != nil {
		return posOf(f.value)
	}
	return m.keyAt(key)
}

// raw is the value of key as written, for messages.
func (m *mapping) raw(key string) string {
	n := m.fields[key].value
	if s, ok := text(n); ok {
		return s
	}
	return tokenText(n)
}

// require reports key as missing unless it is present.
func (m *mapping) require(key string) {
	if !m.has(key) && !m.broken {
		m.d.errorf(m.at, m.child(key), "required")
	}
}

// sub checks the mapping under key; an absent key gives an empty mapping
// whose missing fields are reported where m is.
func (m *mapping) sub(key string, known ...string) *mapping {
	f, ok := m.fields[key]
	if !ok {
		sm := m.d.mapping(nil, m.child(key), m.at, known...)
		sm.broken = m.broken
		return sm
	}
	sm := m.d.mapping(f.value, m.child(key), f.key, known...)
	if f.value == nil {
		sm.broken = true
	}
	return sm
}

// conv converts a resolved, present value, reporting why it cannot.
type conv[T any] func(n ast.Node, path string) (T, bool)

// opt converts an optional field; an absent field gives def. ok is false
// (and def returned) when the field is present but invalid (reported).
func opt[T any](m *mapping, key string, def T, c conv[T]) (v T, ok bool) {
	f, present := m.fields[key]
	switch {
	case !present:
		return def, true
	case f.value == nil:
		return def, false
	}
	if v, ok = c(f.value, m.child(key)); !ok {
		return def, false
	}
	return v, true
}

// req converts a required field, reporting it when absent.
func req[T any](m *mapping, key string, c conv[T]) (T, bool) {
	var zero T
	if !m.has(key) {
		m.require(key)
		return zero, false
	}
	return opt(m, key, zero, c)
}

// item is one entry of a list.
type item struct {
	node ast.Node // resolved; nil when unusable (reported)
	at   pos      // the entry's `-`, or the value in a flow list
}

func (d *decoder) list(n ast.Node, path string) ([]item, bool) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.expected(n, path, "a list")
		return nil, false
	}
	items := make([]item, 0, len(seq.Values))
	for i, v := range seq.Values {
		at := posOf(v)
		if !seq.IsFlowStyle && len(seq.Entries) == len(seq.Values) && seq.Entries[i] != nil && seq.Entries[i].Start != nil {
			at = tokenPos(seq.Entries[i].Start)
		}
		items = append(items, item{node: d.resolve(v, index(path, i)), at: at})
	}
	return items, true
}

func (d *decoder) nonEmptyList(n ast.Node, path string) ([]item, bool) {
	items, ok := d.list(n, path)
	if ok && len(items) == 0 {
		d.errorf(posOf(n), path, "must not be empty")
		return nil, false
	}
	return items, ok
}

// str accepts a non-empty string.
func (d *decoder) str(n ast.Node, path string) (string, bool) {
	s, ok := text(n)
	switch {
	case !ok:
		d.expected(n, path, "a string")
		return "", false
	case s == "":
		d.errorf(posOf(n), path, "must not be empty")
		return "", false
	}
	return s, true
}

// pattern accepts a string matching re, naming it what and giving hint when it does not.
func (d *decoder) pattern(re *regexp.Regexp, what, hint string) conv[string] {
	return func(n ast.Node, path string) (string, bool) {
		s, ok := d.str(n, path)
		if ok && !re.MatchString(s) {
			d.errorf(posOf(n), path, "invalid %s %q (%s)", what, s, hint)
			return "", false
		}
		return s, ok
	}
}

func (d *decoder) integer(n ast.Node, path string) (int64, bool) {
	x, ok := n.(*ast.IntegerNode)
	if !ok {
		d.expected(n, path, "an integer")
		return 0, false
	}
	switch v := x.Value.(type) {
	case int64:
		return v, true
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true
		}
	}
	d.errorf(posOf(n), path, "%s is out of range", tokenText(n))
	return 0, false
}

// intIn accepts an integer in [lo, hi].
func (d *decoder) intIn(lo, hi int64) conv[int64] {
	return func(n ast.Node, path string) (int64, bool) {
		v, ok := d.integer(n, path)
		switch {
		case !ok:
			return 0, false
		case v >= lo && v <= hi:
			return v, true
		case hi >= math.MaxInt32 && v < lo:
			d.errorf(posOf(n), path, "must be at least %d", lo)
		case hi >= math.MaxInt32:
			d.errorf(posOf(n), path, "must be at most %d", hi)
		default:
			d.errorf(posOf(n), path, "must be between %d and %d", lo, hi)
		}
		return 0, false
	}
}

func (d *decoder) boolean(n ast.Node, path string) (bool, bool) {
	if b, ok := n.(*ast.BoolNode); ok {
		return b.Value, true
	}
	d.expected(n, path, "true or false")
	return false, false
}

// bound is the range a duration must be in.
type bound uint8

const (
	anySign     bound = iota
	nonNegative       // >= 0
	positive          // > 0
)

const durationHint = `use a duration string like "10s"`

// duration accepts a Go duration string holding whole milliseconds and
// returns the milliseconds.
func (d *decoder) duration(b bound) conv[int64] {
	return func(n ast.Node, path string) (int64, bool) {
		at := posOf(n)
		s, ok := text(n)
		if !ok {
			if _, isInt := n.(*ast.IntegerNode); isInt {
				d.errorf(at, path, "%s is not a duration (%s)", tokenText(n), durationHint)
			} else {
				d.expected(n, path, `a duration string like "10s"`)
			}
			return 0, false
		}
		dur, err := time.ParseDuration(s)
		switch {
		case err != nil:
			d.errorf(at, path, "invalid duration %s (%s)", quote(s), durationHint)
		case dur%time.Millisecond != 0:
			d.errorf(at, path, "duration %s is not a whole number of milliseconds", quote(s))
		case b == positive && dur <= 0:
			d.errorf(at, path, "must be greater than 0")
		case b == nonNegative && dur < 0:
			d.errorf(at, path, "must not be negative")
		default:
			return dur.Milliseconds(), true
		}
		return 0, false
	}
}

// choice is one allowed value of an enumeration.
type choice[T any] struct {
	name string
	val  T
}

// named is the choices of an enumeration, each by its String.
func named[T fmt.Stringer](vs ...T) []choice[T] {
	cs := make([]choice[T], len(vs))
	for i, v := range vs {
		cs[i] = choice[T]{v.String(), v}
	}
	return cs
}

// oneOf accepts one of the names of choices.
func oneOf[T any](d *decoder, choices []choice[T]) conv[T] {
	names := make([]string, len(choices))
	for i, c := range choices {
		names[i] = c.name
	}
	want := orList(names)
	return func(n ast.Node, path string) (T, bool) {
		var zero T
		s, ok := text(n)
		if !ok {
			d.expected(n, path, want)
			return zero, false
		}
		for _, c := range choices {
			if c.name == s {
				return c.val, true
			}
		}
		d.errorf(posOf(n), path, "invalid value %s (want %s)", quote(s), want)
		return zero, false
	}
}

// orList formats names as `a, b or c`.
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// address accepts host:port; a dial address needs a host and a non-zero port.
func (d *decoder) address(dial bool) conv[string] {
	return func(n ast.Node, path string) (string, bool) {
		s, ok := d.str(n, path)
		if !ok {
			return "", false
		}
		host, port, err := net.SplitHostPort(s)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || dial && (host == "" || p == 0) {
			d.errorf(posOf(n), path, "invalid address %s (want host:port)", quote(s))
			return "", false
		}
		return s, true
	}
}

var sizeRE = regexp.MustCompile(`^([0-9]+) ?([A-Za-z]*)$`)

var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
}

// parseSize reads "67108864", "64MiB", "64 MB" (units are case-insensitive).
func parseSize(s string) (int64, bool) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	unit, ok := sizeUnits[strings.ToLower(m[2])]
	v, err := strconv.ParseInt(m[1], 10, 64)
	if !ok || err != nil || v > math.MaxInt64/unit {
		return 0, false
	}
	return v * unit, true
}

// byteSize accepts a byte count (an integer, or a string with a unit) of at least minimum.
func (d *decoder) byteSize(minimum int64, minText string) conv[int64] {
	return func(n ast.Node, path string) (int64, bool) {
		var v int64
		if _, isInt := n.(*ast.IntegerNode); isInt {
			var ok bool
			if v, ok = d.integer(n, path); !ok {
				return 0, false
			}
		} else {
			s, ok := text(n)
			if !ok {
				d.expected(n, path, `a byte count or a size like "64MiB"`)
				return 0, false
			}
			if v, ok = parseSize(s); !ok {
				d.errorf(posOf(n), path, `invalid size %s (use a byte count or a size like "64MiB")`, quote(s))
				return 0, false
			}
		}
		if v < minimum {
			d.errorf(posOf(n), path, "must be at least %s", minText)
			return 0, false
		}
		return v, true
	}
}

// suggest returns ` (did you mean "x"?)` for the known key closest to name, if close.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(name, k); dist < bestDist && dist < len(k) {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// maxFileBytes bounds the files the configuration names (CA bundles, keys,
// password files).
const maxFileBytes = 4 << 20

// readFile reads file, named by the value of key, and reports at that value
// why it cannot.
func (d *decoder) readFile(m *mapping, key, file string) ([]byte, bool) {
	b, err := readLimited(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.errorf(m.valueAt(key), m.child(key), "cannot read %q: %v", file, err)
		return nil, false
	}
	return b, true
}

// readLimited reads a regular file of at most maxFileBytes (a device or a
// pipe could block or never end).
func readLimited(file string) ([]byte, error) {
	fi, err := os.Stat(file)
	switch {
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, errors.New("is a directory")
	case !fi.Mode().IsRegular():
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err == nil && len(b) > maxFileBytes {
		err = fmt.Errorf("larger than %d MiB", maxFileBytes>>20)
	}
	return b, err
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expanded accepts a non-empty string in which every ${NAME} is replaced by
// the value of the environment variable NAME. When secret, no message shows
// any part of the value: only the names of variables.
func (d *decoder) expanded(secret bool) conv[string] {
	return func(n ast.Node, path string) (string, bool) {
		at := posOf(n)
		raw, ok := text(n)
		switch {
		case !ok && secret:
			d.errorf(at, path, "expected a string, got %s", describeSecret(n))
			return "", false
		case !ok:
			d.expected(n, path, "a string")
			return "", false
		case raw == "":
			d.errorf(at, path, "must not be empty")
			return "", false
		}
		s, ok := d.expandEnv(raw, at, path)
		if ok && s == "" {
			// raw holds only references here, no literal text.
			d.errorf(at, path, "%s expands to an empty string", quote(raw))
			return "", false
		}
		return s, ok
	}
}

// expandEnv replaces every ${NAME} of s by the environment variable NAME,
// reporting each unset variable and a "${" that starts no valid reference.
func (d *decoder) expandEnv(s string, at pos, path string) (string, bool) {
	var b strings.Builder
	ok := true
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), ok
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		j := strings.IndexByte(s, '}')
		if j < 0 || !envNameRE.MatchString(s[:j]) {
			d.errorf(at, path, `"${" must start a reference ${NAME} (NAME: a letter or '_', then letters, digits and '_')`)
			return "", false
		}
		name := s[:j]
		v, set := os.LookupEnv(name)
		if !set {
			d.errorf(at, path, "environment variable %s is not set", name)
			ok = false
		}
		b.WriteString(v)
		s = s[j+1:]
	}
}

// describeSecret names the kind of a value that is not a string, without
// showing the value.
func describeSecret(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.MappingNode, *ast.SequenceNode, *ast.NullNode:
		return describe(n)
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number (quote the value)"
	case *ast.BoolNode:
		return "a boolean (quote the value)"
	}
	return "a value that is not a string"
}
