package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/evolve"
	"github.com/windowd/windowd/state"
	"github.com/windowd/windowd/windowing"
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
		stored = bytes.Clone(stored) // GetMeta's buffer is the next read's
		if err == nil && stored != nil {
			var old *evolve.Definition
			if old, err = evolve.Decode(stored); err == nil {
				// The input's partition count is the broker's: checked at start.
				cur := evolve.Of(p, old.Partitions)
				plan := evolve.Compare(old, cur)
				fmt.Fprintf(stdout, "pipeline %s:\n%s\n", p.Name, plan.Text())
				if plan.Refused() {
					fmt.Fprintf(stdout, "pipeline %s: a start would be refused; %s\n", p.Name, evolve.RefusalHelp)
					ok = false
				} else if why := engineRefusal(p, db, stored, cur, "state directory "+pdir); why != nil {
					fmt.Fprintf(stdout, "pipeline %s: a start would be refused: %v\n", p.Name, why)
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

// engineRefusal is what the engine would refuse at a start on db under
// p's definition cur, once the plan is accepted: a drain it cannot run
// (windowing.ErrDrain: the previous drain not finished, drain removed
// before the frontier passed it, a cut not after the records the state
// read). The start builds its engine on the state with evolve.Start's
// evolution (service/definition.go, service/engine.go); so does this,
// without writing anything (the store's writes wait for a commit, which
// never comes). A join has no drain; an exactly_once state left by an
// unclean stop is not what the start runs on.
func engineRefusal(p *config.Pipeline, db *state.DB, stored []byte, cur *evolve.Definition, where string) error {
	if p.Join != nil {
		return nil
	}
	if p.Delivery == config.ExactlyOnce {
		// After an unclean stop an exactly_once start discards the
		// state (service/exactlyonce.go): what the engine refuses is
		// decided on the state it restores from the changelog.
		clean, err := db.GetMeta("clean")
		if err != nil {
			return err
		}
		if len(clean) != 1 || clean[0] != 1 {
			return nil
		}
	}
	_, _, ev, err := evolve.Start(stored, true, 0, cur, where)
	if err != nil {
		return err
	}
	_, err = windowing.New(p.Spec, p.Watermark, db, noPanes{}, windowing.Options{ShardByPartition: true, Evolve: ev})
	return err
}

// noPanes is the emitter of engineRefusal's engine, which processes no
// record.
type noPanes struct{}

func (noPanes) Pane(*windowing.Pane) error                           { return nil }
func (noPanes) Dropped(*windowing.Event, windowing.DropReason) error { return nil }
