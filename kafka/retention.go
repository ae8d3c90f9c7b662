package kafka

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/windowd/windowd/sink"
)

// TimeLimitsOf reads the time settings of topics (retention.ms,
// message.timestamp.type, message.timestamp.before.max.ms, as the broker
// resolves them: the topic's own or the broker's default). A topic the
// broker does not describe is missing from the answer.
func TimeLimitsOf(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]sink.TimeLimits, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(tctx, topics...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]sink.TimeLimits, len(rcs))
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		l := sink.TimeLimits{Retention: -1, BeforeMax: math.MaxInt64}
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			switch c.Key {
			case sink.SettingRetention, sink.SettingBeforeMax:
				v, err := strconv.ParseInt(*c.Value, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("topic %s: %s=%q: %w", rc.Name, c.Key, *c.Value, err)
				}
				if c.Key == sink.SettingRetention {
					l.Retention = v
				} else {
					l.BeforeMax = v
				}
			case sink.SettingTimeType:
				l.LogAppendTime = *c.Value == "LogAppendTime"
			}
		}
		out[rc.Name] = l
	}
	return out, nil
}
