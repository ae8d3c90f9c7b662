package schema

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/windowd/windowd/config"
)

// MaxSchemas bounds the schema ids a Registry keeps (docs/OPERATIONS.md,
// Limits); past it, one entry is dropped for each new one.
const MaxSchemas = 10_000

const (
	// requestTimeout bounds one registry request.
	requestTimeout = 10 * time.Second
	// unknownFor is how long an id the registry said it does not know is
	// not asked for again: a topic full of records with a bad id must not
	// become one request per record.
	unknownFor = 10 * time.Second
	// firstBackoff and maxBackoff bound the wait after a failed request
	// during which lookups of ids not cached fail at once.
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
)

// Options configure a Registry.
type Options struct {
	URL      string
	Username string // basic auth; empty: none
	Password string
	TLS      *tls.Config // nil: Go's defaults
	// Now is the clock of the backoff and the unknown-id cache; nil: time.Now.
	Now func() time.Time
}

// Registry fetches schemas by id from a Confluent-compatible Schema
// Registry, with their references, and keeps them. It is safe for
// concurrent use.
type Registry struct {
	cl  *sr.Client
	url string
	now func() time.Time

	mu        sync.Mutex
	byID      map[int]*entry
	downUntil time.Time // after a failed request: ids not cached fail at once until then
	backoff   time.Duration
	lastErr   *Unavailable

	up       atomic.Bool  // the last request reached the registry
	failures atomic.Int64 // requests that failed (Unavailable)
	fetched  atomic.Int64 // schemas fetched
}

// entry is one id's schema with the texts of its references (by the name
// they are imported or referenced as, transitively), or why it cannot be
// had (unknown until then).
type entry struct {
	schema  sr.Schema
	deps    map[string]string
	bad     string
	expires time.Time // of a bad entry
}

// New returns a Registry for opts.
func New(opts Options) (*Registry, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = opts.TLS
	copts := []sr.ClientOpt{
		sr.URLs(opts.URL),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: requestTimeout}),
		sr.UserAgent("windowd"),
	}
	if opts.Username != "" {
		copts = append(copts, sr.BasicAuth(opts.Username, opts.Password))
	}
	cl, err := sr.NewClient(copts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	r := &Registry{cl: cl, url: opts.URL, now: opts.Now, byID: map[int]*entry{}}
	if r.now == nil {
		r.now = time.Now
	}
	r.up.Store(true)
	return r, nil
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return r.url }

// Up reports whether the last request reached the registry (or none was
// made yet).
func (r *Registry) Up() bool { return r.up.Load() }

// Failures counts the requests that could not reach the registry or got a
// server error.
func (r *Registry) Failures() int64 { return r.failures.Load() }

// Fetched counts the schemas fetched.
func (r *Registry) Fetched() int64 { return r.fetched.Load() }

// BadRecord is why a record cannot be decoded: the caller dead-letters it
// with Reason.
type BadRecord struct{ Reason string }

func (e *BadRecord) Error() string { return e.Reason }

// Unavailable says the registry could not be asked for a schema (it cannot
// be reached, refused the credentials, or answered with a server error).
// The record is fine: the caller waits until Retry and tries again.
type Unavailable struct {
	URL   string
	Err   error
	Retry time.Time
}

func (e *Unavailable) Error() string {
	return "schema registry " + e.URL + " unavailable: " + e.Err.Error()
}

func (e *Unavailable) Unwrap() error { return e.Err }

// lookup returns id's schema and references.
func (r *Registry) lookup(id int) (*entry, error) {
	now := r.now()
	r.mu.Lock()
	e := r.byID[id]
	if e != nil && (e.bad == "" || now.Before(e.expires)) {
		r.mu.Unlock()
		if e.bad != "" {
			return nil, &BadRecord{e.bad}
		}
		return e, nil
	}
	if now.Before(r.downUntil) {
		err := r.lastErr
		r.mu.Unlock()
		return nil, err
	}
	r.mu.Unlock()

	e, err := r.fetch(id)
	r.mu.Lock()
	defer r.mu.Unlock()
	var un *Unavailable
	if errors.As(err, &un) {
		r.up.Store(false)
		r.failures.Add(1)
		r.backoff = min(max(2*r.backoff, firstBackoff), maxBackoff)
		r.downUntil = now.Add(r.backoff)
		un.Retry = r.downUntil
		r.lastErr = un
		return nil, un
	}
	r.up.Store(true)
	r.backoff, r.downUntil = 0, time.Time{}
	if err != nil {
		e = &entry{bad: err.Error(), expires: now.Add(unknownFor)}
	} else {
		r.fetched.Add(1)
	}
	if _, ok := r.byID[id]; !ok && len(r.byID) >= MaxSchemas {
		for k := range r.byID {
			delete(r.byID, k)
			break
		}
	}
	r.byID[id] = e
	if e.bad != "" {
		return nil, &BadRecord{e.bad}
	}
	return e, nil
}

// fetch asks the registry for id's schema and, transitively, the schemas it
// references. A 404 is a *BadRecord; any other failure an *Unavailable.
func (r *Registry) fetch(id int) (*entry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*requestTimeout)
	defer cancel()
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		return nil, r.classify(err, "schema id "+strconv.Itoa(id)+" is not in the registry")
	}
	e := &entry{schema: s, deps: map[string]string{}}
	// References, breadth first; a name seen once is not fetched again
	// (shared and circular imports).
	queue := append([]sr.SchemaReference(nil), s.References...)
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if _, ok := e.deps[ref.Name]; ok {
			continue
		}
		if len(e.deps) >= 1000 {
			return nil, &BadRecord{fmt.Sprintf("schema id %d references more than 1000 schemas", id)}
		}
		rs, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return nil, r.classify(err, fmt.Sprintf("schema id %d references %q (subject %q version %d), which is not in the registry", id, ref.Name, ref.Subject, ref.Version))
		}
		e.deps[ref.Name] = rs.Schema.Schema
		queue = append(queue, rs.Schema.References...)
	}
	return e, nil
}

// classify turns a request's error into a *BadRecord with notFound when
// the registry answered 404, and into an *Unavailable otherwise.
func (r *Registry) classify(err error, notFound string) error {
	var re *sr.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return &BadRecord{notFound}
	}
	if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
		err = fmt.Errorf("%w (check schema_registry.basic_auth)", err)
	}
	return &Unavailable{URL: r.url, Err: err}
}

// FromConfig returns a Registry for schema_registry (url overrides its URL
// when not empty; c may then be nil).
func FromConfig(c *config.SchemaRegistry, url string) (*Registry, error) {
	opts := Options{URL: url}
	if c != nil {
		if opts.URL == "" {
			opts.URL = c.URL
		}
		opts.Username, opts.Password = c.Username, c.Password.Reveal()
		if c.TLS != nil {
			tc, err := c.TLS.ClientConfig("schema_registry.tls")
			if err != nil {
				return nil, err
			}
			opts.TLS = tc
		}
	}
	return New(opts)
}
