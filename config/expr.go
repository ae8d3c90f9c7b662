package config

import (
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/windowd/windowd/expr"
)

// expression compiles a CEL expression (docs/SEMANTICS.md, Expressions)
// whose result must be want. Its syntax and type errors are reported at
// their place in the file: the column CEL gives, counted from where the
// expression's text starts (after a quote; on the lines of a block
// scalar).
func (d *decoder) expression(want expr.Want) conv[*expr.Program] {
	return func(n ast.Node, path string) (*expr.Program, bool) {
		src, ok := d.str(n, path)
		if !ok {
			return nil, false
		}
		prg, errs := expr.Compile(src, want)
		for _, e := range errs {
			d.errorf(d.exprPos(n, e.Line, e.Col), path, "%s", e.Msg)
		}
		return prg, errs == nil
	}
}

// exprPos is the place in the file of line and col (1-based) of the
// expression written as node n.
func (d *decoder) exprPos(n ast.Node, line, col int) pos {
	at := posOf(n)
	switch x := n.(type) {
	case *ast.StringNode:
		if line == 1 {
			tk := x.GetToken()
			if tk != nil && (tk.Type == token.SingleQuoteType || tk.Type == token.DoubleQuoteType) {
				col++ // the opening quote
			}
			return pos{at.line, at.col + col - 1}
		}
		return pos{at.line + line - 1, col}
	case *ast.LiteralNode:
		// The text starts on the line after the block indicator, at
		// that line's indentation.
		l := at.line + line
		indent := 0
		if l >= 1 && l <= len(d.lines) {
			indent = len(d.lines[l-1]) - len(strings.TrimLeft(d.lines[l-1], " "))
		}
		return pos{l, indent + col}
	}
	return at
}
