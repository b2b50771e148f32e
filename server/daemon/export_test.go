package daemon

import (
	"crypto/tls"
	"log/slog"
)

// LoadCertificates lets the external tests drive the TLS
// certificate's reloading without a handshake.
func LoadCertificates(certFile, keyFile string, log *slog.Logger) (func() *tls.Certificate, error) {
	c, err := loadCertificates(certFile, keyFile, log)
	if err != nil {
		return nil, err
	}
	return func() *tls.Certificate {
		cert, _ := c.get(&tls.ClientHelloInfo{})
		return cert
	}, nil
}
