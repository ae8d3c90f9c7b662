package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/state"
)

// planAgainst prints, for each pipeline of cfg, the plan a start on the
// state under dir would follow (service/definition.go does the same at
// start), and reports whether every start would go ahead.
func planAgainst(cfg *config.Config, dir string, stdout, stderr io.Writer) bool {
	ok := true
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		pdir := filepath.Join(dir, p.Name)
		if _, err := os.Stat(pdir); err != nil {
			fmt.Fprintf(stdout, "pipeline %s: no state in %s: it starts fresh (or restores from its changelog)\n", p.Name, pdir)
			continue
		}
		db, err := state.Open(pdir, state.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "pipeline %s: %s: %v\n", p.Name, pdir, err)
			ok = false
			continue
		}
		stored, err := db.GetMeta("definition")
		if err == nil && stored != nil {
			var old *evolve.Definition
			if old, err = evolve.Decode(stored); err == nil {
				// The input's partition count is the broker's: checked at start.
				plan := evolve.Compare(old, evolve.Of(p, old.Partitions))
				fmt.Fprintf(stdout, "pipeline %s:\n%s\n", p.Name, plan.Text())
				if plan.Refused() {
					fmt.Fprintf(stdout, "pipeline %s: a start would be refused; %s\n", p.Name, evolve.RefusalHelp)
					ok = false
				}
			}
		} else if err == nil {
			fmt.Fprintf(stdout, "pipeline %s: its state holds no definition (written by an earlier windowd): the first start records this configuration's\n", p.Name)
		}
		if err != nil {
			fmt.Fprintf(stderr, "pipeline %s: %v\n", p.Name, err)
			ok = false
		}
		db.Close()
	}
	return ok
}
