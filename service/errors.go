package service

import (
	"errors"
	"fmt"

	"github.com/windowd/windowd/kafka"
)

// The service's errors, by what the caller does with them. Every check is
// errors.Is or errors.As, so wrapping keeps the class.
//
//   - fatal (fatalError, isFatal): local state could not be written or the
//     cluster refused output. The pipeline stops at once, without
//     committing; a restart resumes from the last checkpoint
//     (docs/OPERATIONS.md).
//   - errFenced, inside a fatal error: under exactly_once the broker
//     fenced the producer (a zombie). The pipeline stops, and the service
//     rebuilds it: it rejoins the group with a new producer epoch.
//   - errRejoin, inside a fatal error: under exactly_once a transaction's
//     end got no answer (the broker is unreachable), so its outcome is
//     unknown. The service rebuilds the pipeline as for errFenced: the new
//     producer epoch aborts the transaction if it is still open, and the
//     partitions restore from the changelog and offsets, which hold
//     exactly what committed. An unreachable broker is never a reason to
//     exit.
//   - errUnanswered: a request the pipeline cannot go on without (the
//     producer id, loaded by its first transaction and by an assignment)
//     got no answer. The service rebuilds the pipeline as for errFenced; it
//     rejoins the group once the broker is back.
//   - errRolledBack: a transaction aborted and the pipeline rolled back
//     to its last committed transaction. Not a failure: the rewound
//     consumer delivers the rest again.
//   - anything else a commit cycle returns is retryable: nothing was
//     committed, the next cycle tries again.
//   - kafka.SecurityError's refusals (credentials, certificates, ACLs)
//     stop the start; an unreachable broker is retried, never fatal.

// fatalError marks errors after which the pipeline must stop without
// committing: local state could not be written, or output was refused.
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }

func (f fatalError) Unwrap() error { return f.err }

func isFatal(err error) bool {
	var f fatalError
	return errors.As(err, &f)
}

// errFenced marks a pipeline stopped because its transactional producer
// was fenced or its transaction timed out on the broker: a zombie. The
// service rebuilds such a pipeline, which rejoins the group with a new
// producer epoch and restores what it is given from the changelog, as
// Kafka Streams does (docs/OPERATIONS.md).
var errFenced = errors.New("fenced")

// errRejoin marks a pipeline stopped because a transaction's outcome is
// unknown (see above); like errFenced, the service rebuilds it.
var errRejoin = errors.New("transaction outcome unknown")

// errUnanswered marks a pipeline stopped because a request it cannot go
// on without got no answer (see above); the service rebuilds it.
var errUnanswered = errors.New("the cluster did not answer")

// unanswered marks err with errUnanswered when the cluster did not answer
// the request that returned it (kafka.Unanswered); a refusal stays as it is.
func unanswered(err error) error {
	if kafka.Unanswered(err) {
		return fmt.Errorf("%w: %w", errUnanswered, err)
	}
	return err
}

// rejoins reports an error after which the service rebuilds the pipeline.
func rejoins(err error) bool {
	return errors.Is(err, errFenced) || errors.Is(err, errRejoin) || errors.Is(err, errUnanswered)
}

// errRolledBack reports a commit cycle whose transaction aborted: the
// pipeline is back at its last committed transaction and the consumer
// rewinds there. Not a failure.
var errRolledBack = errors.New("transaction aborted; rolled back to the last committed transaction")
