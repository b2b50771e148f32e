package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// outcome names what one call answered: "ok" or the error's code.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return string(api.CodeOf(err))
}

// trace runs a fixed sequence of calls, one at a time, and records every answer.
func trace(a *Adapter, n int) []string {
	var out []string
	for i := range n {
		id := fmt.Sprintf("sbx_%d", i%7) // revisits IDs, so the existing-instance path runs too
		inst, err := a.Create(bg, req(id))
		out = append(out, "create "+outcome(err))
		_, err = a.List(bg, "inst_a")
		out = append(out, "list "+outcome(err))
		if err == nil && i%3 == 0 {
			out = append(out, "delete "+outcome(a.Delete(bg, inst.Ref)))
		}
	}
	return out
}

func TestRandomFaultsDeterministicForASeed(t *testing.T) {
	cfg := Config{FaultSeed: 7, CreateErrorRate: 0.3, DropCreateResponseRate: 0.2, DeleteErrorRate: 0.3, ListErrorRate: 0.2}
	first, second := trace(New(cfg), 200), trace(New(cfg), 200)
	if !slices.Equal(first, second) {
		t.Fatal("the same seed and calls gave different faults")
	}
	cfg.FaultSeed = 8
	if slices.Equal(first, trace(New(cfg), 200)) {
		t.Error("seeds 7 and 8 gave the same 200 calls' faults")
	}
	// Turning one fault off draws nothing for it, and leaves no fault of its kind.
	cfg.ListErrorRate = 0
	for _, o := range trace(New(cfg), 200) {
		if strings.HasPrefix(o, "list ") && o != "list ok" {
			t.Fatalf("listErrorRate 0 gave %q", o)
		}
	}
}

func TestRandomFaults(t *testing.T) {
	const calls = 2000
	tests := []struct {
		name string
		cfg  Config
		// op makes one call and returns its answer; i counts calls from 0.
		op func(a *Adapter, i int) error
		// codes counts the answers wanted; a share is checked within ±0.04 of it.
		want map[string]float64
	}{
		{
			name: "createErrorRate draws every code by default",
			cfg:  Config{CreateErrorRate: 0.5},
			op:   func(a *Adapter, i int) error { _, err := a.Create(bg, req(fmt.Sprint("sbx_", i))); return err },
			want: map[string]float64{"ok": 0.5, "insufficient_capacity": 0.1, "sandbox_failed": 0.1,
				"provider_unavailable": 0.1, "invalid_request": 0.1, "internal": 0.1},
		},
		{
			name: "createErrorCodes narrows the draw",
			cfg:  Config{CreateErrorRate: 0.2, CreateErrorCodes: []api.Code{api.CodeInvalidRequest}},
			op:   func(a *Adapter, i int) error { _, err := a.Create(bg, req(fmt.Sprint("sbx_", i))); return err },
			want: map[string]float64{"ok": 0.8, "invalid_request": 0.2},
		},
		{
			name: "createErrorRate 1 fails every Create",
			cfg:  Config{CreateErrorRate: 1, CreateErrorCodes: []api.Code{api.CodeSandboxFailed}},
			op:   func(a *Adapter, i int) error { _, err := a.Create(bg, req("sbx_1")); return err },
			want: map[string]float64{"sandbox_failed": 1},
		},
		{
			name: "dropCreateResponseRate",
			cfg:  Config{DropCreateResponseRate: 0.25},
			op:   func(a *Adapter, i int) error { _, err := a.Create(bg, req(fmt.Sprint("sbx_", i%50))); return err },
			want: map[string]float64{"ok": 0.75, "provider_unavailable": 0.25},
		},
		{
			name: "deleteErrorRate draws both codes by default",
			cfg:  Config{DeleteErrorRate: 0.4},
			op:   func(a *Adapter, i int) error { return a.Delete(bg, "fake_missing") },
			want: map[string]float64{"ok": 0.6, "provider_unavailable": 0.2, "internal": 0.2},
		},
		{
			name: "deleteErrorCodes narrows the draw",
			cfg:  Config{DeleteErrorRate: 0.4, DeleteErrorCodes: []api.Code{api.CodeInternal}},
			op:   func(a *Adapter, i int) error { return a.Delete(bg, "fake_missing") },
			want: map[string]float64{"ok": 0.6, "internal": 0.4},
		},
		{
			name: "listErrorRate",
			cfg:  Config{ListErrorRate: 0.1},
			op:   func(a *Adapter, i int) error { _, err := a.List(bg, "inst_a"); return err },
			want: map[string]float64{"ok": 0.9, "provider_unavailable": 0.1},
		},
		{
			name: "execErrorRate draws every code by default",
			cfg:  Config{ExecErrorRate: 0.5},
			op:   execOnce,
			want: map[string]float64{"ok": 0.5, "provider_unavailable": 0.1, "insufficient_capacity": 0.1,
				"invalid_state": 0.1, "not_found": 0.1, "internal": 0.1},
		},
		{
			name: "execErrorCodes narrows the draw",
			cfg:  Config{ExecErrorRate: 0.3, ExecErrorCodes: []api.Code{api.CodeInvalidState}},
			op:   execOnce,
			want: map[string]float64{"ok": 0.7, "invalid_state": 0.3},
		},
		{
			name: "rates 0 inject nothing",
			cfg:  Config{FaultSeed: 3},
			op: func(a *Adapter, i int) error {
				inst, err := a.Create(bg, req(fmt.Sprint("sbx_", i%10)))
				if err == nil {
					_, err = a.List(bg, "inst_a")
				}
				if err == nil {
					_, err = a.Exec(bg, inst.Ref, api.ExecRequest{Command: "true"})
				}
				if err == nil && i%2 == 0 {
					err = a.Delete(bg, inst.Ref)
				}
				return err
			},
			want: map[string]float64{"ok": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.cfg)
			got := map[string]int{}
			for i := range calls {
				got[outcome(tt.op(a, i))]++
			}
			for o, n := range got {
				if _, ok := tt.want[o]; !ok {
					t.Errorf("%d answers %q, want none", n, o)
				}
			}
			for o, share := range tt.want {
				if g := float64(got[o]) / calls; g < share-0.04 || g > share+0.04 {
					t.Errorf("%q answered %.3f of calls, want %.2f ± 0.04 (%v)", o, g, share, got)
				}
			}
		})
	}
}

// execOnce runs one exec, alternately plain and streamed, in a running instance.
func execOnce(a *Adapter, i int) error {
	inst, err := a.Create(bg, req("sbx_exec"))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if i%2 == 0 {
		res, err := a.Exec(bg, inst.Ref, api.ExecRequest{Command: "echo hi"})
		if err == nil && res.Stdout != "echo hi\n" {
			return fmt.Errorf("exec answered %+v", res)
		}
		return err
	}
	_, err = a.ExecStream(bg, inst.Ref, api.ExecRequest{Command: "echo hi"}, func(api.ExecEvent) error { return nil })
	return err
}

func TestRandomFaultsKeepTheContract(t *testing.T) {
	// A dropped answer still made the instance, and a retry finds that same one.
	a := New(Config{DropCreateResponseRate: 1})
	_, err := a.Create(bg, req("sbx_1"))
	wantCode(t, err, api.CodeProviderUnavailable)
	_, err = a.Create(bg, req("sbx_1"))
	wantCode(t, err, api.CodeProviderUnavailable)
	if list, _ := a.List(bg, "inst_a"); len(list) != 1 || list[0].State != adapters.StateRunning {
		t.Fatalf("after two lost answers List = %+v, want one running instance", list)
	}

	// A failed Delete deletes nothing; an injected Create failure makes nothing.
	b := New(Config{DeleteErrorRate: 1, CreateErrorRate: 1, CreateErrorCodes: []api.Code{api.CodeInternal}})
	_, err = b.Create(bg, req("sbx_1"))
	wantCode(t, err, api.CodeInternal)
	if b.Instances() != 0 {
		t.Fatalf("an injected Create failure made %d instances", b.Instances())
	}
	c := New(Config{DeleteErrorRate: 1})
	inst := mustCreate(t, c, req("sbx_1"))
	if err := c.Delete(bg, inst.Ref); !api.IsCode(err, api.CodeProviderUnavailable) && !api.IsCode(err, api.CodeInternal) {
		t.Fatalf("Delete = %v, want an injected failure", err)
	}
	if _, err := c.Get(bg, inst.Ref); err != nil {
		t.Errorf("the instance is gone after a failed Delete: %v", err)
	}

	// Exec faults run nothing, leave the instance as it was, and never hide the
	// errors the instance itself would give.
	var ran int
	e := New(Config{ExecErrorRate: 1, ExecFunc: func(context.Context, InstanceView, api.ExecRequest) (api.ExecResult, error) {
		ran++
		return api.ExecResult{}, nil
	}})
	inst = mustCreate(t, e, req("sbx_1"))
	_, err = e.Exec(bg, inst.Ref, api.ExecRequest{Command: "true"})
	if e := api.AsError(err); e == nil || !strings.Contains(e.Message, "(execErrorRate: "+string(e.Code)+")") {
		t.Fatalf("Exec = %v, want an injected failure naming its code", err)
	}
	if ran != 0 {
		t.Fatalf("an injected exec failure ran the command")
	}
	if got, _ := e.Get(bg, inst.Ref); got.State != adapters.StateRunning {
		t.Fatalf("an injected exec failure changed the instance: %+v", got)
	}
	_, err = e.Exec(bg, "fake_missing", api.ExecRequest{Command: "true"})
	wantCode(t, err, api.CodeNotFound)
	_, err = e.Exec(bg, inst.Ref, api.ExecRequest{})
	wantCode(t, err, api.CodeInvalidRequest)
	if err := e.Stop(bg, inst.Ref); err != nil {
		t.Fatal(err)
	}
	_, err = e.Exec(bg, inst.Ref, api.ExecRequest{Command: "true"})
	if e := api.AsError(err); e == nil || e.Code != api.CodeInvalidState || strings.Contains(e.Message, "injected") {
		t.Fatalf("Exec on a stopped instance = %v, want the real invalid_state", err)
	}

	// An invalid request is refused as such, whatever the rates.
	d := New(Config{CreateErrorRate: 1, CreateErrorCodes: []api.Code{api.CodeSandboxFailed}, MaxCPU: 1})
	_, err = d.Create(bg, adapters.CreateRequest{ID: "sbx_1", Installation: "i", Resources: adapters.Resources{CPU: 2}})
	wantCode(t, err, api.CodeInvalidRequest)
}

func TestCreateLatencyJitter(t *testing.T) {
	var mu sync.Mutex
	var got []time.Duration
	a := New(Config{CreateLatency: 100 * time.Millisecond, CreateLatencyJitter: 50 * time.Millisecond, FaultSeed: 1,
		Sleep: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, d)
			return nil
		}})
	for i := range 100 {
		mustCreate(t, a, req(fmt.Sprint("sbx_", i)))
	}
	mustCreate(t, a, req("sbx_0")) // an existing instance takes no latency
	if len(got) != 100 {
		t.Fatalf("%d sleeps for 100 new instances", len(got))
	}
	lo, hi := slices.Min(got), slices.Max(got)
	if lo < 100*time.Millisecond || hi > 150*time.Millisecond || hi-lo < 25*time.Millisecond {
		t.Errorf("latencies range over [%v, %v], want spread within [100ms, 150ms]", lo, hi)
	}
}

func TestRandomFaultsConcurrent(t *testing.T) {
	// Many callers at once: the draws are safe under -race, and faults never make a
	// second instance for one sandbox.
	a := New(Config{FaultSeed: 11, CreateErrorRate: 0.3, DropCreateResponseRate: 0.3, DeleteErrorRate: 0.3,
		ListErrorRate: 0.3, CreateLatency: time.Millisecond, CreateLatencyJitter: time.Millisecond,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprint("sbx_", (g+i)%20)
				if inst, err := a.Create(bg, req(id)); err == nil && i%5 == 0 {
					_ = a.Delete(bg, inst.Ref)
				}
				_, _ = a.List(bg, "inst_a")
			}
		})
	}
	wg.Wait()
	a.cfg.ListErrorRate = 0 // no caller left: safe to change
	list, err := a.List(bg, "inst_a")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, in := range list {
		if seen[in.SandboxID] {
			t.Errorf("sandbox %s has two instances: %+v", in.SandboxID, list)
		}
		seen[in.SandboxID] = true
	}
}

// streamTrace runs streamed execs of a command printing out on stdout and errOut on
// stderr, and describes each: "ok", "before <code>", "after <code> <bytes emitted>"
// or "drop <bytes emitted>".
// It fails t on any answer the contract does not allow.
func streamTrace(t *testing.T, cfg Config, n int, out, errOut string) []string {
	t.Helper()
	var ran int
	cfg.ExecFunc = func(context.Context, InstanceView, api.ExecRequest) (api.ExecResult, error) {
		ran++
		return api.ExecResult{Stdout: out, Stderr: errOut, ExitCode: 3}, nil
	}
	a := New(cfg)
	inst := mustCreate(t, a, req("sbx_stream"))
	var trace []string
	for range n {
		var got strings.Builder
		var events []api.ExecEvent
		before := ran
		st, err := a.ExecStream(bg, inst.Ref, api.ExecRequest{Command: "x"}, func(ev api.ExecEvent) error {
			events = append(events, ev)
			got.WriteString(ev.Data)
			return nil
		})
		e := api.AsError(err)
		switch {
		case err == nil:
			if got.String() != out+errOut || st.Code != 3 || ran != before+1 {
				t.Fatalf("clean stream emitted %q and exit %d (ran %d times), want %q and 3 once", got.String(), st.Code, ran-before, out+errOut)
			}
			trace = append(trace, "ok")
		case e == nil:
			t.Fatalf("ExecStream = %v, want an api.Error", err)
		case strings.Contains(e.Message, "fake: injected exec failure (execErrorRate: "+string(e.Code)+")"):
			if len(events) > 0 || ran != before {
				t.Fatalf("a fault before output emitted %+v and ran the command %d times", events, ran-before)
			}
			trace = append(trace, "before "+string(e.Code))
		case e.Message == "fake: injected stream drop (execStreamDropRate)":
			full := out + errOut
			if e.Code != api.CodeProviderUnavailable || !errors.Is(err, ErrStreamDropped) {
				t.Fatalf("a dropped stream answered %v, want provider_unavailable wrapping ErrStreamDropped", err)
			}
			if got.Len() == 0 && full != "" || !strings.HasPrefix(full, got.String()) || len(full) > 1 && got.Len() == len(full) || ran != before+1 {
				t.Fatalf("a dropped stream emitted %q of %q (ran %d times), want a start of it, not all", got.String(), full, ran-before)
			}
			trace = append(trace, fmt.Sprintf("drop %d", got.Len()))
		case strings.Contains(e.Message, "fake: injected exec failure after output (execErrorRate: "+string(e.Code)+")"):
			full := out + errOut
			if got.Len() == 0 || !strings.HasPrefix(full, got.String()) || len(full) > 1 && got.Len() == len(full) || ran != before+1 {
				t.Fatalf("a fault after output emitted %q of %q (ran %d times), want a start of it, not all", got.String(), full, ran-before)
			}
			for _, ev := range events {
				if ev.IsFinal() || ev.Data == "" {
					t.Fatalf("a fault after output emitted %+v", ev)
				}
			}
			trace = append(trace, fmt.Sprintf("after %s %d", e.Code, got.Len()))
		default:
			t.Fatalf("ExecStream = %v, want an injected failure naming its code", err)
		}
	}
	return trace
}

func TestStreamedExecFaults(t *testing.T) {
	const calls = 2000
	out, errOut := "0123456789\n", "warn\n"
	trace := streamTrace(t, Config{FaultSeed: 5, ExecErrorRate: 0.5}, calls, out, errOut)
	shares := map[string]int{}
	lengths := map[string]bool{}
	for _, o := range trace {
		kind, rest, _ := strings.Cut(o, " ")
		shares[kind]++
		if kind == "after" {
			code, n, _ := strings.Cut(rest, " ")
			shares[code]++
			lengths[n] = true
		}
		if kind == "before" {
			shares[rest]++
		}
	}
	for kind, want := range map[string]float64{"ok": 0.5, "before": 0.25, "after": 0.25, "not_found": 0.1, "internal": 0.1} {
		if g := float64(shares[kind]) / calls; g < want-0.04 || g > want+0.04 {
			t.Errorf("%q: %.3f of calls, want %.2f ± 0.04 (%v)", kind, g, want, shares)
		}
	}
	// Cuts fall anywhere from the first byte to the last but one, stderr included.
	for _, n := range []string{"1", "11", "12", "15"} {
		if !lengths[n] {
			t.Errorf("no fault after output emitted %s bytes; emitted lengths: %v", n, lengths)
		}
	}
	if lengths["16"] {
		t.Errorf("a fault after output emitted all 16 bytes")
	}

	// One seed gives the same faults, cuts included; another seed others.
	cfg := Config{FaultSeed: 5, ExecErrorRate: 0.5}
	if again := streamTrace(t, cfg, calls, out, errOut); !slices.Equal(trace, again) {
		t.Error("the same seed and calls gave different streamed faults")
	}
	cfg.FaultSeed = 6
	if slices.Equal(trace, streamTrace(t, cfg, calls, out, errOut)) {
		t.Error("seeds 5 and 6 gave the same streamed faults")
	}
}

func TestStreamedExecFaultEdges(t *testing.T) {
	// A one-byte output is all a fault after output can emit; a silent command's
	// fault comes before any output, whichever kind was drawn.
	for _, o := range streamTrace(t, Config{ExecErrorRate: 1, ExecErrorCodes: []api.Code{api.CodeInternal}}, 200, "x", "") {
		if o != "before internal" && o != "after internal 1" {
			t.Fatalf("one byte of output: %q", o)
		}
	}
	a := New(Config{ExecErrorRate: 1, ExecFunc: func(context.Context, InstanceView, api.ExecRequest) (api.ExecResult, error) {
		return api.ExecResult{}, nil
	}})
	inst := mustCreate(t, a, req("sbx_1"))
	for range 50 {
		_, err := a.ExecStream(bg, inst.Ref, api.ExecRequest{Command: "true"}, func(ev api.ExecEvent) error {
			t.Fatalf("a silent command emitted %+v", ev)
			return nil
		})
		if api.AsError(err) == nil {
			t.Fatalf("ExecStream = %v, want an injected failure", err)
		}
	}

	// An emit failure after output ends the call with emit's error, and a plain Exec
	// never draws a fault after output.
	b := New(Config{FaultSeed: 2, ExecErrorRate: 1})
	inst = mustCreate(t, b, req("sbx_1"))
	for range 100 {
		res, err := b.Exec(bg, inst.Ref, api.ExecRequest{Command: "echo hi"})
		if e := api.AsError(err); e == nil || strings.Contains(e.Message, "after output") || res.Stdout != "" {
			t.Fatalf("Exec = %+v, %v; want a fault before output", res, err)
		}
	}
	stop := fmt.Errorf("client gone")
	for range 100 {
		_, err := b.ExecStream(bg, inst.Ref, api.ExecRequest{Command: "echo hi"}, func(api.ExecEvent) error { return stop })
		if err != stop && (api.AsError(err) == nil || strings.Contains(api.AsError(err).Message, "after output")) {
			t.Fatalf("ExecStream with a failing emit = %v, want emit's error or a fault before output", err)
		}
	}
}

func TestStreamedExecDrops(t *testing.T) {
	const calls = 2000
	out, errOut := "0123456789\n", "warn\n"
	cfg := Config{FaultSeed: 9, ExecErrorRate: 0.2, ExecStreamDropRate: 0.5}
	trace := streamTrace(t, cfg, calls, out, errOut)
	shares := map[string]int{}
	lengths := map[string]bool{}
	for _, o := range trace {
		kind, rest, _ := strings.Cut(o, " ")
		shares[kind]++
		if kind == "drop" {
			lengths[rest] = true
		}
	}
	// A drop is drawn only for the execs execErrorRate left alone.
	for kind, want := range map[string]float64{"ok": 0.4, "drop": 0.4, "before": 0.1, "after": 0.1} {
		if g := float64(shares[kind]) / calls; g < want-0.04 || g > want+0.04 {
			t.Errorf("%q: %.3f of calls, want %.2f ± 0.04 (%v)", kind, g, want, shares)
		}
	}
	for _, n := range []string{"1", "11", "15"} {
		if !lengths[n] {
			t.Errorf("no dropped stream emitted %s bytes; emitted lengths: %v", n, lengths)
		}
	}
	if again := streamTrace(t, cfg, calls, out, errOut); !slices.Equal(trace, again) {
		t.Error("the same seed and calls gave different drops")
	}

	// A plain Exec never draws a drop; a silent command's drop comes before output.
	a := New(Config{ExecStreamDropRate: 1})
	inst := mustCreate(t, a, req("sbx_1"))
	for range 50 {
		if res, err := a.Exec(bg, inst.Ref, api.ExecRequest{Command: "echo hi"}); err != nil || res.Stdout != "echo hi\n" {
			t.Fatalf("Exec = %+v, %v; want the echo", res, err)
		}
	}
	for _, o := range streamTrace(t, Config{ExecStreamDropRate: 1}, 50, "", "") {
		if o != "drop 0" {
			t.Fatalf("a silent command's stream: %q, want a drop before any output", o)
		}
	}
}
