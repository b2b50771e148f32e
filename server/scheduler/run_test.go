package scheduler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/store"
)

func TestRunProvisionsAndTerminatesOnNotify(t *testing.T) {
	passes := make(chan Result)
	stop := make(chan struct{})
	fk := fake.New(fake.Config{})
	// A tick of an hour: only Notify (and each loop's first pass) can make progress.
	e := newEnv(t, Options{Tick: time.Hour, OnPass: func(r Result) {
		select {
		case passes <- r:
		case <-stop:
		}
	}}, view("fake", fk))

	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		e.s.Run(ctx)
		close(returned)
	}()
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			cancel()
			close(stop) // unblocks an OnPass nobody reads any more
		})
	}
	defer func() {
		shutdown()
		<-returned
	}()

	// waitFor reads pass results until one satisfies ok. The deadline only keeps a
	// broken build from hanging; no test step waits on time.
	waitFor := func(what string, ok func(Result) bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case r := <-passes:
				if ok(r) {
					return
				}
			case <-deadline:
				t.Fatalf("no pass %s", what)
			}
		}
	}

	sb := e.create(t, store.Sandbox{})
	e.s.Notify()
	waitFor("started the sandbox", func(r Result) bool { return r.Pass == PassProvision && r.Started == 1 })
	wantState(t, e.get(t, sb.ID), store.StateRunning)

	e.set(t, sb.ID, toTerminating)
	e.s.Notify()
	waitFor("terminated the sandbox", func(r Result) bool { return r.Pass == PassTerminate && r.Terminated == 1 })
	wantState(t, e.get(t, sb.ID), store.StateTerminated)
	if fk.Instances() != 0 {
		t.Errorf("instances = %d", fk.Instances())
	}

	shutdown()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNewNeedsInstallation(t *testing.T) {
	if _, err := New(nil, poolstest.New(), nil, Options{}); err == nil {
		t.Fatal("New accepted options without an installation")
	}
}

// claimFails is a store whose claims fail, as while the database is down.
type claimFails struct{ store.Store }

func (claimFails) ClaimSandboxes(context.Context, time.Time, string, time.Duration, int) ([]store.Sandbox, error) {
	return nil, errors.New("connection refused")
}

// Passes failing over and over, as while the database is down, are logged when the
// failure starts and when it ends, not once per pass.
func TestFailingPassesAreLoggedOnce(t *testing.T) {
	e := newEnv(t, Options{}, view("fake", fake.New(fake.Config{})))
	e.create(t, store.Sandbox{})
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	down, err := New(claimFails{e.st}, e.pools, e.clk, Options{Installation: installation, ReplicaID: "replica-2", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		down.report(down.ProvisionOnce(t.Context()))
	}
	if n := strings.Count(buf.String(), "scheduler pass failed"); n != 1 {
		t.Fatalf("%d lines for 20 failed passes:\n%s", n, buf.String())
	}
	up, err := New(e.st, e.pools, e.clk, Options{Installation: installation, ReplicaID: "replica-2", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	up.passLogs = down.passLogs // the same replica, its database back
	up.report(up.ProvisionOnce(t.Context()))
	if !strings.Contains(buf.String(), `msg="scheduler pass recovered" replica=replica-2 pass=provision`) {
		t.Fatalf("no recovery line:\n%s", buf.String())
	}
}
