package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientConfig builds the client TLS configuration of t (kafka.tls or
// schema_registry.tls, named by field in errors): at least TLS 1.2, the CA
// bundle (else the system roots), the client certificate for mTLS, and the
// name to verify (else the server's host, which the client sets per dial).
func (t *TLS) ClientConfig(field string) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as for tests only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", field, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: no PEM certificate in %s", field, t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file and key_file: %w", field, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
