package opensandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"

	"github.com/different-ai/differently/adapters"
)

// maxEventBytes bounds one event of execd's stream.
const maxEventBytes = 16 << 20

// execEvent is one event of execd's command stream.
type execEvent struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Error *struct {
		EName  string `json:"ename"`
		EValue string `json:"evalue"`
	} `json:"error,omitempty"`
}

// readEvents parses execd's stream: SSE "data:" lines or bare JSON objects, each
// event ended by a blank line. handle returns true to stop reading.
func readEvents(body io.Reader, handle func(execEvent) (bool, error)) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var buf []byte
	dispatch := func() (bool, error) {
		data := bytes.TrimSpace(buf)
		buf = buf[:0]
		if len(data) == 0 {
			return false, nil
		}
		var ev execEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return true, adapters.Unavailable("opensandbox execd: malformed event: %v", err)
		}
		return handle(ev)
	}
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			line = bytes.TrimSuffix(line, []byte("\r"))
			var content []byte
			switch {
			case len(line) == 0:
				if stop, herr := dispatch(); stop || herr != nil {
					return herr
				}
				continue
			case line[0] == ':', bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
				continue
			case bytes.HasPrefix(line, []byte("data:")):
				content = bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			default:
				content = line
			}
			if len(buf) > 0 {
				buf = append(buf, '\n')
			}
			buf = append(buf, content...)
			if len(buf) > maxEventBytes {
				return adapters.Unavailable("opensandbox execd: an event is over %d MiB", maxEventBytes>>20)
			}
			// A complete JSON object is an event even before its blank line.
			if json.Valid(buf) {
				if stop, herr := dispatch(); stop || herr != nil {
					return herr
				}
			}
		}
		if err != nil {
			if err == io.EOF {
				_, herr := dispatch()
				return herr
			}
			return err
		}
	}
}

// readLine reads one line without its newline, bounded by maxEventBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxEventBytes {
			return nil, adapters.Unavailable("opensandbox execd: a line is over %d MiB", maxEventBytes>>20)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}
