package kafka

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestUnanswered: what the service retries (a broker that did not answer)
// against what it stops on (a refusal).
func TestUnanswered(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", fmt.Errorf("unable to dial: %w", refused), true},
		{"connection closed", fmt.Errorf("unable to initialize a producer ID: %w", errors.New("EOF")), true},
		{"retriable code past its retries", fmt.Errorf("loading: %w", kerr.CoordinatorNotAvailable), true},
		{"refusal", fmt.Errorf("loading: %w", kerr.TransactionalIDAuthorizationFailed), false},
		{"certificate", fmt.Errorf("unable to dial: %w", x509.UnknownAuthorityError{}), false},
		{"canceled", fmt.Errorf("assigning: %w", context.Canceled), false},
	} {
		if got := Unanswered(tt.err); got != tt.want {
			t.Errorf("%s: Unanswered(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
