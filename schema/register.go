package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"
)

// Refused is the registry's refusal of a schema windowd registers: it is
// incompatible with the subject's earlier versions under the subject's
// compatibility level, or invalid. Message is the registry's own.
type Refused struct {
	Subject string
	Message string
}

func (e *Refused) Error() string {
	return fmt.Sprintf("schema registry refused the pane schema for subject %q: %s", e.Subject, e.Message)
}

// Register registers s under subject and returns its id; a schema the
// subject has already is not registered again (the registry answers its
// id). The registry checks s against the subject's compatibility level: a
// refusal (HTTP 409 incompatible, 422 invalid) is a *Refused, any other
// failure an *Unavailable.
func (r *Registry) Register(ctx context.Context, subject string, s sr.Schema) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	ss, err := r.cl.CreateSchema(ctx, subject, s)
	if err == nil {
		r.up.Store(true)
		return ss.ID, nil
	}
	var re *sr.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity) {
		r.up.Store(true)
		msg := re.Message
		if msg == "" {
			msg = string(re.Raw)
		}
		return 0, &Refused{Subject: subject, Message: msg}
	}
	r.up.Store(false)
	r.failures.Add(1)
	return 0, r.classify(err, "subject "+subject+" not found")
}
