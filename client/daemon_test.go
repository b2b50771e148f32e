package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/daemon/daemontest"
	"github.com/different-ai/differently/server/scheduler"
)

// devDaemon is a real development daemon (SQLite, devhost and fake pools) serving on
// loopback for one test.
type devDaemon struct {
	url, token string
	passes     chan scheduler.Result
}

func startDaemon(t *testing.T) *devDaemon {
	t.Helper()
	dd := &devDaemon{passes: make(chan scheduler.Result, 64)}
	d := daemontest.Start(t, func(o *daemon.Options) {
		o.OnSchedulerPass = func(scheduler.Result) {
			select {
			case dd.passes <- scheduler.Result{}:
			default: // nobody waiting: never block the scheduler
			}
		}
	})
	dd.url, dd.token = d.URL, d.Token
	return dd
}

// client returns a client whose polls wake on the daemon's scheduler passes (or the
// poll delay, whichever is first), so WaitForState follows the daemon's work rather
// than wall-clock guesses.
func (dd *devDaemon) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	wake := func(ctx context.Context, d time.Duration) error {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-dd.passes:
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	c, err := client.New(dd.url, dd.token, append([]client.Option{client.WithSleep(wake)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testCtx bounds one test's calls so a hang fails instead of stalling the suite.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
