package adapters

import (
	"sync"

	"github.com/different-ai/differently/api"
)

const maxExecOutput = api.MaxExecOutputBytes

// OutputBuffer collects one stream of a synchronous exec, keeping at most
// api.MaxExecOutputBytes (or Limit, when set) and remembering whether it dropped any.
// It is an io.Writer safe for concurrent use, so it can be a command's Stdout.
type OutputBuffer struct {
	Limit int

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

// Write keeps what fits and always reports the full length written, so a command
// is never stopped by a short write.
func (b *OutputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.Limit
	if limit <= 0 {
		limit = maxExecOutput
	}
	room := limit - len(b.buf)
	if room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf = append(b.buf, p[:room]...)
		}
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String returns what was kept.
func (b *OutputBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Truncated reports whether output was dropped.
func (b *OutputBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated
}
