package adapters

import (
	"errors"
	"io"

	"github.com/different-ai/differently/api"
)

// CapFile wraps a file's content so that it yields at most api.MaxFileBytes: a
// reader that has more fails with payload_too_large instead of ending, so that a
// file which grew past the limit is refused rather than passed on cut. what names
// the file in that error.
func CapFile(r io.ReadCloser, what string) io.ReadCloser {
	return &cappedFile{r: r, left: api.MaxFileBytes, what: what}
}

type cappedFile struct {
	r    io.ReadCloser
	left int64
	what string
	err  error
}

func (c *cappedFile) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		// The limit has been reached: only the end may follow.
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		switch {
		case n > 0:
			c.err = TooLarge("%s is over %d bytes", c.what, api.MaxFileBytes)
		case errors.Is(err, io.EOF):
			c.err = io.EOF
		default:
			c.err = err
		}
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if err != nil {
		c.err = err
	}
	return n, err
}

func (c *cappedFile) Close() error { return c.r.Close() }

// ReadCapped reads content to its end, refusing more than api.MaxFileBytes: the
// buffered WriteFile of an adapter that streams (WriteFileFrom) and the other way
// round share one implementation through it and bytes.Reader.
func ReadCapped(content io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(content, api.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > api.MaxFileBytes {
		return nil, TooLarge("%s is over %d bytes", what, api.MaxFileBytes)
	}
	return data, nil
}
