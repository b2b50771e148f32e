package httpx

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Limits of ReadObject.
const (
	// MaxExecAnswer bounds a synchronous exec answer read with ReadObject. Its output
	// is cut to api.MaxExecOutputBytes as it is read, so this only stops an answer
	// that will not end; the providers hold a command's whole output in memory to
	// send it, so a real answer this large is unlikely to arrive at all.
	MaxExecAnswer = 1 << 30
	// maxValueBytes bounds the JSON text of one member decoded into Fields.Values.
	maxValueBytes = 1 << 20
	// maxKeyBytes is the longest key compared with the Fields; a longer key matches
	// none of them and its value is skipped.
	maxKeyBytes = 256
	// maxLiteralBytes bounds a number, true, false or null.
	maxLiteralBytes = 4 << 10
	// maxDepth bounds the nesting of skipped values, as encoding/json does.
	maxDepth = 10000
	// readBuffer is how much of the input ReadObject holds at a time.
	readBuffer = 64 << 10
)

// ErrTooLarge is returned by ReadObject for input over its limit.
var ErrTooLarge = errors.New("input over its size limit")

// MalformedError reports input that is not one JSON object.
type MalformedError struct {
	// Offset is the number of bytes read before the fault.
	Offset int64
	Msg    string
}

func (e *MalformedError) Error() string { return fmt.Sprintf("%s (at byte %d)", e.Msg, e.Offset) }

// Fields says what ReadObject does with the members of an object. Members are
// handled in the order they come, so a writer of Strings can rely on the Values
// decoded before it. A key names an entry as encoding/json matches keys to struct
// fields: exactly, or else ignoring case. A member named in neither map is skipped
// without being kept. Unlike encoding/json, which keeps the last, a key given twice
// is handled twice: a string's writer gets both values, one after the other.
type Fields struct {
	// Strings maps a key to the writer its value is decoded into as it is read, so a
	// string of any length is never held whole. Each write is whole characters, of at
	// most 64 KiB. The value must be a JSON string or null (which writes nothing).
	Strings map[string]io.Writer
	// Values maps a key to a pointer its value is decoded into with encoding/json.
	// The value's JSON text may be at most 1 MiB.
	Values map[string]any
}

// ReadObject reads one JSON object from r, reading at most limit bytes, and hands
// its members to f. It decodes strings as encoding/json does (invalid UTF-8 and
// lone surrogates become U+FFFD) and checks the whole input is valid JSON: one
// object and nothing after it but white space.
//
// Input that is not one JSON object is a *MalformedError; input over limit is
// ErrTooLarge; an error of r or of a writer is returned as is.
func ReadObject(r io.Reader, limit int64, f Fields) error {
	d := &objectReader{br: bufio.NewReaderSize(&limitReader{r: r, left: limit}, readBuffer), f: f}
	c, err := d.skipSpace()
	if err != nil {
		return err
	}
	if c != '{' {
		return d.malformed("not a JSON object")
	}
	if err := d.object(0, true); err != nil {
		return err
	}
	return d.end()
}

// limitReader reads at most left bytes of r, then fails with ErrTooLarge, for
// good, if r has more.
type limitReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.over {
		return 0, ErrTooLarge
	}
	if l.left <= 0 {
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.over = true
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// objectReader is the state of one ReadObject.
type objectReader struct {
	br  *bufio.Reader
	f   Fields
	off int64 // bytes consumed

	// capturing keeps the bytes consumed in capture: the JSON text of a member of
	// Values.
	capturing bool
	capture   []byte
	// decoded is str's buffer of characters decoded one at a time.
	decoded []byte
}

func (d *objectReader) malformed(format string, args ...any) error {
	return &MalformedError{Offset: d.off, Msg: fmt.Sprintf(format, args...)}
}

// fail turns a read error into the error ReadObject returns: the end of the input
// before the object's end is malformed, any other error is the reader's own.
func (d *objectReader) fail(err error) error {
	if err == io.EOF {
		return d.malformed("unexpected end of JSON input")
	}
	return err
}

// avail returns the buffered input, reading more if there is none. The slice is
// valid until the next read.
func (d *objectReader) avail() ([]byte, error) {
	if _, err := d.br.Peek(1); err != nil {
		return nil, d.fail(err)
	}
	b, _ := d.br.Peek(d.br.Buffered())
	return b, nil
}

// take consumes p, a prefix of the buffered input.
func (d *objectReader) take(p []byte) error {
	if d.capturing {
		if len(d.capture)+len(p) > maxValueBytes {
			return d.malformed("a value is over %d KiB", maxValueBytes>>10)
		}
		d.capture = append(d.capture, p...)
	}
	n, _ := d.br.Discard(len(p))
	d.off += int64(n)
	return nil
}

// next consumes and returns one byte.
func (d *objectReader) next() (byte, error) {
	b, err := d.avail()
	if err != nil {
		return 0, err
	}
	c := b[0]
	return c, d.take(b[:1])
}

// skipSpace consumes white space and returns the next byte without consuming it.
func (d *objectReader) skipSpace() (byte, error) {
	for {
		b, err := d.avail()
		if err != nil {
			return 0, err
		}
		i := 0
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if err := d.take(b[:i]); err != nil {
			return 0, err
		}
		if i < len(b) {
			return b[i], nil
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// end checks that nothing but white space follows the object.
func (d *objectReader) end() error {
	for {
		b, err := d.br.Peek(1)
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		case !isSpace(b[0]):
			return d.malformed("data after the JSON object")
		}
		if err := d.take(b); err != nil {
			return err
		}
	}
}

// object reads an object whose '{' is next. At the top level its members go to the
// Fields; deeper down they are only checked.
func (d *objectReader) object(depth int, top bool) error {
	return d.list(depth, '}', "object member", func() error { return d.member(depth, top) })
}

func (d *objectReader) array(depth int) error {
	return d.list(depth, ']', "array element", func() error { return d.value(depth + 1) })
}

// list reads an object or an array whose opening bracket is next, calling item for
// each of its members or elements (white space before it skipped), up to the
// closing bracket.
func (d *objectReader) list(depth int, closing byte, what string, item func() error) error {
	if depth > maxDepth {
		return d.malformed("JSON nested too deeply")
	}
	if _, err := d.next(); err != nil {
		return err
	}
	c, err := d.skipSpace()
	if err != nil {
		return err
	}
	if c == closing {
		_, err := d.next()
		return err
	}
	for {
		if err := item(); err != nil {
			return err
		}
		if c, err = d.skipSpace(); err != nil {
			return err
		}
		if _, err := d.next(); err != nil {
			return err
		}
		switch c {
		case closing:
			return nil
		case ',':
			if _, err := d.skipSpace(); err != nil {
				return err
			}
		default:
			return d.malformed("invalid character %q after an %s", c, what)
		}
	}
}

// member reads one key and its value, white space before the key skipped.
func (d *objectReader) member(depth int, top bool) error {
	c, err := d.next()
	if err != nil {
		return err
	}
	if c != '"' {
		return d.malformed("invalid character %q looking for an object key", c)
	}
	var key keyBuffer
	if err := d.str(&key); err != nil {
		return err
	}
	if c, err = d.skipSpace(); err != nil {
		return err
	}
	if c != ':' {
		return d.malformed("invalid character %q after an object key", c)
	}
	if _, err := d.next(); err != nil {
		return err
	}
	if _, err := d.skipSpace(); err != nil {
		return err
	}
	if !top || key.long {
		return d.value(depth + 1)
	}
	if name, w, ok := field(d.f.Strings, key.b); ok {
		return d.stringField(name, w)
	}
	if name, v, ok := field(d.f.Values, key.b); ok {
		return d.valueField(name, v)
	}
	return d.value(depth + 1)
}

// field finds the entry of m a key names as encoding/json matches a key to a struct
// field: exactly, or else ignoring case, so that an answer ReadObject replaced the
// struct decoding of reads the same.
func field[T any](m map[string]T, key []byte) (string, T, bool) {
	if v, ok := m[string(key)]; ok {
		return string(key), v, true
	}
	for name, v := range m {
		if bytes.EqualFold([]byte(name), key) {
			return name, v, true
		}
	}
	var zero T
	return "", zero, false
}

// stringField decodes a member of Strings into w.
func (d *objectReader) stringField(key string, w io.Writer) error {
	b, err := d.avail()
	if err != nil {
		return err
	}
	switch b[0] {
	case '"':
		if err := d.take(b[:1]); err != nil {
			return err
		}
		return d.str(w)
	case 'n':
		return d.literal()
	}
	return d.malformed("%q is not a string", key)
}

// valueField decodes a member of Values from its JSON text.
func (d *objectReader) valueField(key string, v any) error {
	d.capturing, d.capture = true, d.capture[:0]
	err := d.value(1)
	d.capturing = false
	if err != nil {
		return err
	}
	if err := json.Unmarshal(d.capture, v); err != nil {
		return d.malformed("%q: %v", key, err)
	}
	return nil
}

// value checks and consumes any JSON value.
func (d *objectReader) value(depth int) error {
	b, err := d.avail()
	if err != nil {
		return err
	}
	switch b[0] {
	case '{':
		return d.object(depth, false)
	case '[':
		return d.array(depth)
	case '"':
		if err := d.take(b[:1]); err != nil {
			return err
		}
		return d.str(io.Discard)
	}
	return d.literal()
}

// literal reads a number, true, false or null.
func (d *objectReader) literal() error {
	var lit []byte
	for {
		b, err := d.br.Peek(1)
		if err != nil && err != io.EOF {
			return err
		}
		if len(b) == 0 || !isLiteral(b[0]) {
			break
		}
		if len(lit) == maxLiteralBytes {
			return d.malformed("a number is over %d KiB", maxLiteralBytes>>10)
		}
		lit = append(lit, b[0])
		if err := d.take(b); err != nil {
			return err
		}
	}
	if len(lit) == 0 {
		if _, err := d.avail(); err != nil {
			return err
		}
		c, _ := d.br.Peek(1)
		return d.malformed("invalid character %q looking for a value", c[0])
	}
	if !json.Valid(lit) {
		return d.malformed("invalid literal %q", lit[:min(len(lit), 32)])
	}
	return nil
}

func isLiteral(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.'
}

// keyBuffer keeps the first maxKeyBytes of a key; a longer key is marked long.
type keyBuffer struct {
	b    []byte
	long bool
}

func (k *keyBuffer) Write(p []byte) (int, error) {
	if len(k.b)+len(p) > maxKeyBytes {
		k.long = true
		return len(p), nil
	}
	k.b = append(k.b, p...)
	return len(p), nil
}
