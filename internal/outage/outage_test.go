package outage_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/internal/clock"
	"github.com/different-ai/differently/internal/outage"
)

func TestOutageLogsStartEveryIntervalAndEnd(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	clk := clock.NewManual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	o := outage.New("scheduler pass", log, clk, time.Minute)
	down := errors.New("connection refused")

	o.OK() // nothing was failing: nothing to say
	for range 100 {
		o.Failed(down, "pass", 7)
		clk.Advance(100 * time.Millisecond)
	}
	// 10 s have passed: one line so far.
	clk.Advance(time.Minute)
	o.Failed(down)
	o.Failed(down)
	clk.Advance(5 * time.Second)
	o.OK()
	o.OK()
	o.Failed(errors.New("again"))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="scheduler pass failed" pass=7 error="connection refused"`,
		`level=ERROR msg="scheduler pass still failing" error="connection refused" for=1m10s failures=101 unlogged=99`,
		`level=INFO msg="scheduler pass recovered" after=1m15s failures=102`,
		`level=ERROR msg="scheduler pass failed" error=again`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log:\n%s\nwant:\n%s", buf.String(), strings.Join(want, "\n"))
	}
}
