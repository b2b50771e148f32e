package pgtest

import (
	"net"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Refusing listens on loopback as a PostgreSQL server that refuses every connection
// attempt with a FATAL error of the given SQLSTATE (57P03 "the database system is
// starting up", 53300 "too many connections", ...), as a real server does while it
// cannot take clients. It returns the host:port; the listener and its connections end
// with the test. Clients must not ask for TLS (sslmode=disable).
func Refusing(t testing.TB, code string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code,
					Message: "refused by pgtest.Refusing"})
				_ = be.Flush()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
