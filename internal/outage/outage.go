// Package outage logs a failure that repeats, a database that is down say, as one
// line when it starts, one a minute while it lasts and one when it ends, instead of
// a line per attempt: a loop retrying several times a second would otherwise bury
// everything else in the log, and say nothing more for it.
package outage

import (
	"log/slog"
	"sync"
	"time"

	"github.com/different-ai/differently/internal/clock"
)

// DefaultEvery is how often a failure that lasts is logged again.
const DefaultEvery = time.Minute

// Log follows one kind of attempt. Its methods are safe for concurrent use.
type Log struct {
	what  string
	log   *slog.Logger
	clk   clock.Clock
	every time.Duration

	mu       sync.Mutex
	failing  bool
	since    time.Time // when the failure started
	logged   time.Time // when it was last logged
	failures int       // attempts failed since it started
	quiet    int       // failures since it was last logged
}

// New follows attempts at what ("scheduler pass"), logging to log at Error while
// they fail and at Info when they recover, again every every (DefaultEvery when 0).
func New(what string, log *slog.Logger, clk clock.Clock, every time.Duration) *Log {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Log{what: what, log: log, clk: clk, every: every}
}

// Failed records a failed attempt. The first of a run is logged with err and
// attrs; later ones are counted, and logged at most once per interval with the
// latest error and how many went unlogged.
func (l *Log) Failed(err error, attrs ...any) {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures++
	switch {
	case !l.failing:
		l.failing, l.since, l.logged, l.quiet = true, now, now, 0
		l.log.Error(l.what+" failed", append(attrs, "error", err)...)
	case now.Sub(l.logged) >= l.every:
		l.log.Error(l.what+" still failing", append(attrs, "error", err, "for", now.Sub(l.since).Round(time.Second),
			"failures", l.failures, "unlogged", l.quiet)...)
		l.logged, l.quiet = now, 0
	default:
		l.quiet++
	}
}

// OK records a successful attempt, and logs the end of a failure if one was going.
func (l *Log) OK() {
	now := l.clk.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failing {
		return
	}
	l.log.Info(l.what+" recovered", "after", now.Sub(l.since).Round(time.Second), "failures", l.failures)
	l.failing, l.failures, l.quiet = false, 0, 0
}
