package opensandbox

import (
	"bufio"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/different-ai/differently/api"
)

// Limits of readSmall: a few kilobytes make a long line.
const (
	smallLine  = 1 << 10
	smallEvent = 16 << 10
)

// readSmall is readEvents with limits of smallLine and smallEvent.
func readSmall(stream string, handle func(execEvent) (bool, error)) error {
	r := eventReader{br: bufio.NewReaderSize(strings.NewReader(stream), 16), handle: handle, maxLine: smallLine, maxEvent: smallEvent}
	return r.read()
}

// TestReadEventsLongLines: an event on a line over the line limit reaches the
// handler as pieces of whole characters, none over the limit, the first without
// more and the others with it, whatever the framing around it; the events after
// it are read as usual.
func TestReadEventsLongLines(t *testing.T) {
	long := strings.Repeat("é", smallLine)    // a long line whatever the framing
	huge := strings.Repeat("a", smallEvent+1) // over the limit lines had before long lines
	tests := []struct {
		name, stream string
		want         []string // type:text of each event, pieces of a long one joined
		cut          bool     // the long text comes in several pieces
	}{
		{"bare", `{"type":"stdout","text":"` + long + `","timestamp":1}` + "\n\n", []string{"stdout:" + long}, true},
		{"over the event limit", `{"type":"stdout","text":"` + huge + `"}` + "\n\n", []string{"stdout:" + huge}, true},
		{"SSE", `data: {"type":"stderr","text":"` + long + `"}` + "\r\n\r\n", []string{"stderr:" + long}, true},
		{"type after the text", `{"text":"` + long + `","type":"stdout"}` + "\n\n", []string{"stdout:" + long}, true},
		{"after earlier data lines", "data: {\"type\":\"stdout\",\ndata: \"text\":\"" + long + "\"}\n\n", []string{"stdout:" + long}, true},
		{"escaped text", `{"type":"stdout","text":"` + strings.Repeat(`\u0001`, 300) + `"}` + "\n\n", []string{"stdout:" + strings.Repeat("\x01", 300)}, false},
		{"next event without a blank line", `{"type":"stdout","text":"` + long + `"}` + "\n" + `{"type":"stdout","text":"after"}` + "\n\n",
			[]string{"stdout:" + long, "stdout:after"}, true},
		{"long comment", ": " + long + "\n" + `{"type":"stdout","text":"after"}` + "\n\n", []string{"stdout:after"}, false},
		{"other event", `{"type":"init","text":"` + long + `"}` + "\n\n" + `{"type":"execution_complete"}`, []string{"init:", "execution_complete:"}, false},
	}
	for _, tt := range tests {
		var events []*strings.Builder
		cut := false
		err := readSmall(tt.stream, func(ev execEvent) (bool, error) {
			if len(ev.Text) > smallLine || !utf8.ValidString(ev.Text) {
				t.Errorf("%s: a piece of %d bytes, valid UTF-8 %v", tt.name, len(ev.Text), utf8.ValidString(ev.Text))
			}
			switch {
			case ev.more && len(events) == 0:
				t.Fatalf("%s: the first event continues another", tt.name)
			case ev.more:
				cut = true
			default:
				events = append(events, &strings.Builder{})
				events[len(events)-1].WriteString(ev.Type + ":")
			}
			events[len(events)-1].WriteString(ev.Text)
			return false, nil
		})
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got := make([]string, len(events))
		for i, b := range events {
			got[i] = b.String()
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") || cut != tt.cut {
			t.Errorf("%s: %d events, want %d: %.60q; cut in pieces %v", tt.name, len(got), len(tt.want), got, cut)
		}
	}
}

// TestReadEventsLongLineErrors: a long event that is not one JSON object ending on
// its line, or that holds more text than the event limit before naming its type,
// is provider_unavailable.
func TestReadEventsLongLineErrors(t *testing.T) {
	long := strings.Repeat("a", smallLine+1)
	tests := []struct{ name, stream, want string }{
		{"cut short", `{"type":"stdout","text":"` + long + "\n\n", "malformed event"},
		{"continued on the next line", `{"type":"stdout","text":"` + long + `",` + "\n" + `"x":1}` + "\n\n", "malformed event"},
		{"type after too much text", `{"text":"` + strings.Repeat("a", smallEvent+1) + `","type":"stdout"}` + "\n\n", "names its type after its text"},
	}
	for _, tt := range tests {
		err := readSmall(tt.stream, func(execEvent) (bool, error) { return false, nil })
		if !api.IsCode(err, api.CodeProviderUnavailable) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want provider_unavailable saying %q", tt.name, err, tt.want)
		}
	}
}
