package httpapi

import (
	"cmp"
	"log"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of ConnOptions.
const (
	// DefaultReadHeaderTimeout bounds the arrival of a request's line and headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that carries no request for
	// this long, so idle clients do not hold connections and goroutines for ever.
	DefaultIdleTimeout = 2 * time.Minute
	// MaxHeaderBytes is what net/http reads of a request's line and headers before
	// it refuses the request itself, with a plain-text 431 no handler sees. Below it,
	// checkSize refuses a long URL or large headers with the error envelope.
	MaxHeaderBytes = 1 << 20
	// MaxURLBytes bounds a request's target (path and query as sent): the longest
	// the API needs is a files route's path of 4096 bytes, escaped.
	MaxURLBytes = 32 << 10
	// MaxHeaderFieldBytes bounds a request's header fields, names and values.
	MaxHeaderFieldBytes = 64 << 10
	// maxConnectionsCeiling caps the default of MaxConnections.
	maxConnectionsCeiling = 4096
)

// ConnOptions bound the daemon's connections, whoever holds them: each bound applies
// before a request is authenticated, so a caller without a token cannot hold more
// than one with. A zero field takes its default.
type ConnOptions struct {
	// ReadHeaderTimeout: DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// IdleTimeout: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxConnections is how many connections are open at once; the listener accepts
	// the next one only when one closes, and the rest wait in the kernel's queue.
	// DefaultMaxConnections when 0.
	MaxConnections int
}

// NewHTTPServer is the daemon's http.Server for handler. Bodies have their own read
// deadlines (Options.BodyReadTimeout, Options.UploadReadTimeout); there is no write
// timeout, which would cut streamed execs and long waits.
func NewHTTPServer(handler http.Handler, o ConnOptions, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cmp.Or(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       cmp.Or(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errorLog,
	}
}

// LimitListener is ln accepting at most o.MaxConnections connections at once (see
// ConnOptions), whose connections answer net/http's own refusals in the error
// envelope (envelopeListener). Without a bound, every connection a client opens and leaves open
// costs a file descriptor, and once the process runs out it can no longer accept
// anyone, nor open its database connections.
func LimitListener(ln net.Listener, o ConnOptions) net.Listener {
	n := o.MaxConnections
	if n <= 0 {
		n = DefaultMaxConnections()
	}
	return envelopeListener{netutil.LimitListener(ln, n)}
}

// DefaultMaxConnections is half the process's limit on open files, so that the other
// half is left for the database, adapters and files, and at most 4096.
func DefaultMaxConnections() int {
	limit, ok := openFileLimit()
	if !ok || limit/2 >= maxConnectionsCeiling {
		return maxConnectionsCeiling
	}
	return max(int(limit/2), 16)
}
