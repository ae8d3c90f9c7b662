package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a configuration file.
type Problem struct {
	File string
	Line int // 1-based
	Col  int // 1-based
	Msg  string
}

// String formats the problem as `file:line:col: message`.
func (p Problem) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
}

// Errors is every problem found in one configuration file, sorted by
// position. Parse and Load return it (as error) when a file is not valid.
type Errors struct {
	Problems []Problem
}

// Error returns one `file:line:col: message` line per problem.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// newErrors sorts problems by position (keeping discovery order on ties) and
// drops exact duplicates, which anchors and aliases can produce.
func newErrors(problems []Problem) *Errors {
	seen := make(map[Problem]bool, len(problems))
	var unique []Problem
	for _, p := range problems {
		if !seen[p] {
			seen[p] = true
			unique = append(unique, p)
		}
	}
	slices.SortStableFunc(unique, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return &Errors{Problems: unique}
}
