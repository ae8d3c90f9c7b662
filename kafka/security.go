package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/windowd/windowd/config"
)

// tlsConfig builds the client TLS configuration of kafka.tls.
func tlsConfig(t *config.TLS) (*tls.Config, error) { return t.ClientConfig("kafka.tls") }

// saslMechanism is franz-go's mechanism for kafka.sasl.
func saslMechanism(s *config.SASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case config.SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsMechanism(), nil
	case config.SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha256Mechanism(), nil
	case config.SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: unsupported mechanism %q", s.Mechanism)
}

// SecurityError turns an error of a Kafka request about resource (for
// messages: "input topic clicks") into the error windowd stops on when the
// cluster refused its credentials, certificate or permissions, none of which
// a retry fixes; it returns nil for any other error (an unreachable or
// starting broker is retried).
//
// What franz-go returns (v1.22, Kafka 4.x):
//   - wrong SASL password: kerr.SaslAuthenticationFailed wrapped with the
//     broker's message ("SASL_AUTHENTICATION_FAILED: SASL Authentication
//     failed.: Authentication failed during authentication due to invalid
//     credentials with SASL mechanism SCRAM-SHA-512");
//   - SASL on a listener without SASL: kerr.IllegalSaslState; a mechanism
//     the listener does not enable: kerr.UnsupportedSaslMechanism;
//   - broker certificate not trusted or not for this name: "unable to dial:"
//     wrapping a *tls.CertificateVerificationError;
//   - no or unknown client certificate on an mTLS listener: the broker's
//     alert, a *net.OpError with Op "remote error" ("remote error: tls: bad
//     certificate"), on the first read;
//   - ACLs: kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
//     kerr.GroupAuthorizationFailed.
//
// A listener of the wrong kind (TLS to a plaintext port, no SASL on a SASL
// port) makes the broker close the connection: franz-go returns a
// *kgo.ErrFirstReadEOF with a hint, which is retried like any closed
// connection.
func SecurityError(k *config.Kafka, err error, resource string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism):
		user, mech := "", "no SASL configured"
		if k.SASL != nil {
			user, mech = k.SASL.Username, k.SASL.Mechanism
		}
		hint := ""
		if errors.Is(err, kerr.IllegalSaslState) {
			hint = " (does this listener take SASL?)"
		}
		return fmt.Errorf("kafka authentication failed for user %q (%s): %s%s", user, mech, brokerMessage(err), hint)
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed):
		return fmt.Errorf("kafka authorization failed for %s (%s): %s", principal(k), resource, brokerMessage(err))
	case isTLSFailure(err):
		return fmt.Errorf("kafka TLS handshake failed (brokers %s): %s", strings.Join(k.Brokers, ","), strings.TrimPrefix(err.Error(), "unable to dial: "))
	}
	return nil
}

// brokerMessage is the broker's explanation in a wrapped Kafka error
// ("CODE: description: broker message"), else the whole error.
func brokerMessage(err error) string {
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if rest, ok := strings.CutPrefix(msg, ke.Error()+": "); ok && rest != "" {
			return rest
		}
	}
	return msg
}

// principal names who windowd authenticates as, for messages.
func principal(k *config.Kafka) string {
	switch {
	case k.SASL != nil:
		return fmt.Sprintf("user %q", k.SASL.Username)
	case k.TLS != nil && k.TLS.CertFile != "":
		return "the client certificate " + k.TLS.CertFile
	}
	return "the anonymous user"
}

// isTLSFailure says whether err comes from the TLS handshake: a broker
// certificate that does not verify, or the broker's alert (a missing or
// untrusted client certificate, no common protocol version or cipher).
func isTLSFailure(err error) bool {
	var (
		verify *tls.CertificateVerificationError
		header tls.RecordHeaderError
		alert  tls.AlertError
		unk    x509.UnknownAuthorityError
		host   x509.HostnameError
		inv    x509.CertificateInvalidError
		op     *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &unk) || errors.As(err, &host) || errors.As(err, &inv) ||
		errors.As(err, &op) && op.Op == "remote error"
}
