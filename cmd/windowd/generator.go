package main

import (
	"context"
	"math/rand"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/windowd/windowd/config"
	"github.com/windowd/windowd/kafka"
)

// runGenerator produces the configured demo stream until ctx is done:
// JSON values {"user_id","ts","amount","page"} keyed by user_id (so a user's
// records share a partition), event times up to Disorder behind the clock,
// every LateEvery-th record LateBy behind, every MalformedEvery-th record
// not JSON.
func runGenerator(ctx context.Context, cfg *config.Config, brokers []string, log *zap.Logger, now func() time.Time) error {
	g := cfg.Generator
	opts, err := kafka.ClientOpts(cfg, brokers, log)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(g.Topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewSource(now().UnixNano()))
	tick := time.Second / time.Duration(g.Rate)
	batch := 1
	if tick < 10*time.Millisecond {
		batch = int(10 * time.Millisecond / tick)
		tick = 10 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var n int64
	log.Info("generating", zap.String("topic", g.Topic), zap.Int64("rate", g.Rate), zap.Int64("keys", g.Keys))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for i := 0; i < batch; i++ {
			n++
			user := "u" + strconv.FormatInt(rng.Int63n(g.Keys), 10)
			ts := now().UnixMilli()
			if g.Disorder > 0 {
				ts -= rng.Int63n(g.Disorder + 1)
			}
			if g.LateEvery > 0 && n%g.LateEvery == 0 {
				ts -= g.LateBy
			}
			var v []byte
			if g.MalformedEvery > 0 && n%g.MalformedEvery == 0 {
				v = []byte(`{"user_id":"` + user + `","ts":`) // truncated: not JSON
			} else {
				v = append(v, `{"user_id":"`...)
				v = append(v, user...)
				v = append(v, `","ts":`...)
				v = strconv.AppendInt(v, ts, 10)
				v = append(v, `,"amount":`...)
				v = strconv.AppendFloat(v, float64(rng.Intn(10000))/100, 'f', -1, 64)
				v = append(v, `,"page":"/p/`...)
				v = strconv.AppendInt(v, int64(rng.Intn(10)), 10)
				v = append(v, `"}`...)
			}
			cl.Produce(ctx, &kgo.Record{Key: []byte(user), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					log.Warn("produce failed", zap.Error(err))
				}
			})
		}
	}
}
