package daemon_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns a pool
// that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "differently test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// TestTLS: with tls in the config the API is served over HTTPS only.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, roots := selfSigned(t, dir)
	cfg := config.Default()
	cfg.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
	d, err := daemon.New(t.Context(), daemon.Options{
		Dev: true, DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Config: cfg,
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.URL(), "https://") {
		t.Fatalf("URL %s is not https", d.URL())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	secure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := secure.Get(d.URL() + "/healthz")
	if err != nil {
		t.Fatalf("healthz over https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz over https: %d", resp.StatusCode)
	}
	// Plain HTTP to the same port gets no API answer.
	plain := "http://" + strings.TrimPrefix(d.URL(), "https://")
	if resp, err := http.Get(plain + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the API answered plain HTTP on a TLS listener")
		}
	}
	// An unknown certificate authority is refused by a client that checks.
	if _, err := http.Get(d.URL() + "/healthz"); err == nil {
		t.Fatal("a client without the test CA accepted the certificate")
	}

	// A renewed certificate written over the files is served from the next
	// handshake on, without a restart. The files' times are set apart explicitly:
	// two writes within one clock tick can share a modification time.
	_, _, renewed := selfSigned(t, dir)
	later := time.Now().Add(time.Minute)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	fresh := func(roots *x509.CertPool) *http.Client {
		return &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	}
	resp, err = fresh(renewed).Get(d.URL() + "/healthz")
	if err != nil {
		t.Fatalf("healthz with the renewed certificate: %v", err)
	}
	resp.Body.Close()
	if _, err := fresh(roots).Get(d.URL() + "/healthz"); err == nil {
		t.Fatal("the certificate from before the renewal is still served")
	}
}

// A pair that fails to load after a change leaves the previous certificate in use
// and is reported once, however many handshakes follow.
func TestBrokenRenewalKeepsTheCertificate(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	var buf bytes.Buffer
	current, err := daemon.LoadCertificates(certFile, keyFile, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	first := current()
	if err := os.WriteFile(certFile, []byte("half a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(certFile, later, later); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if current() != first {
			t.Fatal("a broken renewal replaced the certificate")
		}
	}
	if n := strings.Count(buf.String(), "did not load"); n != 1 {
		t.Fatalf("%d warnings for one broken pair:\n%s", n, buf.String())
	}
}
