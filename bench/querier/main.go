// Command querier asks windowd's query API for keys at a fixed rate, open
// loop (a slow answer does not delay the next request, and requests a
// late wake-up missed are sent at once), and reports the answers'
// latencies: bench/query.sh's load.
//
//	querier -addr 127.0.0.1:9100 -pipeline bench -keys keys.txt -rate 500
//
// Each SIGUSR1 prints the figures since the start or the last print and
// starts over; SIGTERM or SIGINT prints them and exits. A line: requests,
// 200s, 503s, other answers and errors, then the p50, p99, p99.9 and
// largest latency in milliseconds, tab-separated.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"
)

type stats struct {
	mu                  sync.Mutex
	lat                 []time.Duration
	ok, unavail, others int
}

func (s *stats) add(d time.Duration, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat = append(s.lat, d)
	switch code {
	case http.StatusOK:
		s.ok++
	case http.StatusServiceUnavailable:
		s.unavail++
	default:
		s.others++
	}
}

// take returns the figures so far as a line and starts over.
func (s *stats) take() string {
	s.mu.Lock()
	lat, ok, un, ot := s.lat, s.ok, s.unavail, s.others
	s.lat, s.ok, s.unavail, s.others = nil, 0, 0, 0
	s.mu.Unlock()
	slices.Sort(lat)
	q := func(f float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))]) / 1e6
	}
	return fmt.Sprintf("%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f", len(lat), ok, un, ot, q(0.5), q(0.99), q(0.999), q(1))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9100", "windowd's HTTP address")
	pipeline := flag.String("pipeline", "bench", "pipeline name")
	keysPath := flag.String("keys", "", "file of keys, one per line")
	rate := flag.Int("rate", 500, "requests per second")
	flag.Parse()
	f, err := os.Open(*keysPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "querier:", err)
		os.Exit(2)
	}
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		keys = append(keys, sc.Text())
	}
	f.Close()
	if len(keys) == 0 {
		fmt.Fprintln(os.Stderr, "querier: no keys")
		os.Exit(2)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	st := &stats{}
	sem := make(chan struct{}, 256)
	ask := func(key string) {
		defer func() { <-sem }()
		start := time.Now()
		resp, err := client.Get("http://" + *addr + "/api/windows?pipeline=" + url.QueryEscape(*pipeline) + "&key=" + url.QueryEscape(key))
		code := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		}
		st.add(time.Since(start), code)
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	// The rate holds on average even when this process is scheduled
	// late (it runs niced beside windowd): each wake-up sends what is
	// due since the start.
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case s := <-sig:
			fmt.Println(st.take())
			if s != syscall.SIGUSR1 {
				return
			}
		case <-tick.C:
			for due := int(time.Since(start).Seconds() * float64(*rate)); sent < due; sent++ {
				select {
				case sem <- struct{}{}:
					go ask(keys[rand.IntN(len(keys))])
				default:
					st.add(0, -1) // more than 256 waiting: counted as a failure
				}
			}
		}
	}
}
