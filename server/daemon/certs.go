package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certificates serves the API's TLS certificate and takes up a renewed one without a
// restart: a handshake that finds either file changed (modification time or size)
// loads the pair again. A pair that fails to load, half-written during a renewal
// say, leaves the previous certificate in use, is logged once, and is tried again
// at the next handshake. The check is two stats per handshake, which costs little
// beside the handshake itself.
type certificates struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod fileStamp
	keyMod  fileStamp
	// badCert and badKey are the stamps of the last pair that failed to load, so
	// that a broken pair is reported once, not at every handshake until it is fixed.
	badCert, badKey fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// loadCertificates loads the pair once, so that a missing or broken file stops the
// start rather than the first handshake.
func loadCertificates(certFile, keyFile string, log *slog.Logger) (*certificates, error) {
	c := &certificates{certFile: certFile, keyFile: keyFile, log: log}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certificates) load() error {
	cs, err := stamp(c.certFile)
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	ks, err := stamp(c.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate key: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	c.cert, c.certMod, c.keyMod = &pair, cs, ks
	return nil
}

func (c *certificates) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs, cerr := stamp(c.certFile)
	ks, kerr := stamp(c.keyFile)
	if cerr == nil && kerr == nil && (cs != c.certMod || ks != c.keyMod) {
		if err := c.load(); err == nil {
			c.log.Info("tls certificate reloaded", "file", c.certFile)
		} else if cs != c.badCert || ks != c.badKey {
			c.badCert, c.badKey = cs, ks
			c.log.Warn("tls certificate changed but did not load; serving the previous one", "error", err)
		}
	}
	return c.cert, nil
}
