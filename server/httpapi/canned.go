package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/different-ai/differently/api"
)

// net/http answers a request it cannot parse (a request line and headers over
// MaxHeaderBytes, a malformed request, an unknown transfer coding) before any handler
// runs, by writing a fixed plain-text message straight to the connection. These are
// the bytes between the status line and the body of every such message; a handler's
// answer never has them, since net/http writes its headers sorted, with Date and a
// length, through a buffer.
const cannedHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// envelopeListener hands out connections that turn those messages into the error
// envelope every other answer uses, so a client reads one format whatever went
// wrong. It sees plaintext only: under TLS the connection carries ciphertext and the
// message passes unchanged (docs/configuration.md says so).
type envelopeListener struct{ net.Listener }

func (l envelopeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return envelopeConn{c}, nil
}

type envelopeConn struct{ net.Conn }

// Write replaces a whole canned message, which net/http writes in one call, and
// passes everything else through. The count returned is the caller's, so net/http
// takes the message as sent.
func (c envelopeConn) Write(p []byte) (int, error) {
	if out, ok := envelopeFor(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// envelopeFor reads "HTTP/1.1 <code> <text>" + cannedHeaders + <message> and answers
// the same status with a JSON envelope of code invalid_request carrying the message.
func envelopeFor(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 4 || rest[3] != ' ' {
		return nil, false
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	line, message, ok := bytes.Cut(rest, []byte(cannedHeaders))
	if !ok || bytes.ContainsAny(line, "\r\n") || bytes.ContainsAny(message, "\r\n") {
		return nil, false
	}
	text := string(message)
	switch {
	case status == 431:
		text = fmt.Sprintf("the request line and headers are over %d bytes", MaxHeaderBytes)
	case text == string(line): // net/http's message is only its status line
		text = "malformed HTTP request"
	}
	body, err := json.Marshal(api.ErrorEnvelope{Error: api.Errorf(api.CodeInvalidRequest, "%s", text)})
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", line, len(body))
	b.Write(body)
	return b.Bytes(), true
}
