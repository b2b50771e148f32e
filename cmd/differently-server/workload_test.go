package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
	"github.com/different-ai/differently/server/store/postgres"
)

// This file holds the reliability harness's workload: the API clients that create,
// delete and exec, and the check of the end state against the backends.

// deletion deletes the sandbox of create number index once after creates have been
// answered.
type deletion struct{ index, after int }

// workload creates the sandboxes through the live replicas, in turn, and deletes
// the planned ones. Its methods run on the creators' goroutines, so they report
// with t.Errorf and never stop the test.
type workload struct {
	f    *fleet
	t    *testing.T
	seed int64

	mu        sync.Mutex
	ids       []string // by index; "" until created
	done      int      // creates answered
	pending   []deletion
	deleted   map[string]bool
	queueFull int // creates refused because the queue was full
	// lostPool is the pool whose backend the test restarts, losing its instances.
	lostPool string
}

func newWorkload(f *fleet, seed int64, n int, deletions []deletion) *workload {
	return &workload{f: f, t: f.t, seed: seed, ids: make([]string, n), pending: deletions, deleted: map[string]bool{}}
}

func (w *workload) answered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// create makes sandbox i, through the next live replica. The Idempotency-Key makes
// a retry safe when a replica dies before answering: the retry returns the sandbox
// the dead one may have stored.
func (w *workload) create(ctx context.Context, i int) {
	key := fmt.Sprintf("reliability-%d-%d", w.seed, i)
	for n := i; ; n++ {
		if ctx.Err() != nil {
			if ctx.Err() == context.DeadlineExceeded {
				w.t.Errorf("sandbox %d was not created before the deadline", i)
			}
			return
		}
		live := w.f.live()
		claimed := w.f.claimedSignal()
		c, data := w.f.do(ctx, live[n%len(live)], "POST", "/v1/sandboxes", `{}`, map[string]string{"Idempotency-Key": key})
		switch {
		case c.err != nil:
			continue // judged by checkAnswers: only a killed replica may not answer
		case c.status == http.StatusAccepted || c.status == http.StatusOK:
			var sb apiSandbox
			if err := json.Unmarshal(data, &sb); err != nil || sb.ID == "" {
				w.t.Errorf("create %d: %s: body %q (%v)", i, c, data, err)
				return
			}
			w.created(ctx, i, sb.ID)
			return
		case c.status == http.StatusServiceUnavailable && c.retryAfter != "":
			w.mu.Lock()
			w.queueFull++
			w.mu.Unlock()
			secs, _ := strconv.Atoi(c.retryAfter)
			timer := time.NewTimer(time.Duration(secs) * time.Second)
			select {
			case <-claimed:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		default:
			w.t.Errorf("create %d: %s", i, c)
			return
		}
	}
}

// created records sandbox i and makes the deletions now due.
func (w *workload) created(ctx context.Context, i int, id string) {
	w.mu.Lock()
	w.ids[i] = id
	w.done++
	var due []string
	w.pending = slices.DeleteFunc(w.pending, func(d deletion) bool {
		if d.after > w.done || w.ids[d.index] == "" {
			return false
		}
		due = append(due, w.ids[d.index])
		w.deleted[w.ids[d.index]] = true
		return true
	})
	w.mu.Unlock()
	for _, id := range due {
		w.delete(ctx, id)
	}
}

// deleteRest makes the deletions still pending once every create is answered.
func (w *workload) deleteRest(ctx context.Context) {
	w.mu.Lock()
	var due []string
	for _, d := range w.pending {
		if id := w.ids[d.index]; id != "" {
			due = append(due, id)
			w.deleted[id] = true
		}
	}
	w.pending = nil
	w.mu.Unlock()
	for _, id := range due {
		w.delete(ctx, id)
	}
}

func (w *workload) delete(ctx context.Context, id string) {
	for n := len(id); ; n++ {
		if ctx.Err() != nil {
			if ctx.Err() == context.DeadlineExceeded {
				w.t.Errorf("sandbox %s was not deleted before the deadline", id)
			}
			return
		}
		live := w.f.live()
		c, _ := w.f.do(ctx, live[n%len(live)], "DELETE", "/v1/sandboxes/"+id, "", nil)
		switch {
		case c.err != nil:
			continue
		case c.status != http.StatusAccepted:
			w.t.Errorf("delete %s: %s", id, c)
		}
		return
	}
}

func (w *workload) markDeleted(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deleted[id] = true
}

// execAll runs a command in every running sandbox, through the replicas in turn:
// running means usable, on the pool and instance the sandbox names. It returns how
// many streamed execs the backends dropped mid-stream.
func (w *workload) execAll(ctx context.Context, all map[string]apiSandbox) (drops int) {
	type job struct {
		n  int
		id string
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	faults := map[string]int{}
	streamFaults := map[string]int{} // "before <code>", "after <code>" or "dropped"
	recovered := 0                   // sandboxes whose streamed exec ran clean after a drop
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				id := j.id
				// The backends fail 20% of execs: try until one runs, checking that
				// each failure answers as the contract maps its fault.
				for try := 0; ; try++ {
					if try == 20 {
						w.t.Errorf("exec in running sandbox %s failed 20 times", id)
						break
					}
					live := w.f.live()
					c, data := w.f.do(ctx, live[(j.n+try)%len(live)], "POST", "/v1/sandboxes/"+id+"/exec", `{"command": "echo ok"}`, nil)
					if c.status != http.StatusOK {
						fault, ok := execFault(c)
						if !ok {
							w.t.Errorf("exec in running sandbox %s: %s: %s", id, c, data)
							break
						}
						mu.Lock()
						faults[fault]++
						mu.Unlock()
						continue
					}
					var res struct {
						ExitCode int    `json:"exitCode"`
						Stdout   string `json:"stdout"`
					}
					if json.Unmarshal(data, &res) != nil || res.ExitCode != 0 || res.Stdout != "echo ok\n" {
						w.t.Errorf("exec in running sandbox %s: %s: %s", id, c, data)
					}
					break
				}
				// The same for a streamed exec, whose faults strike before any output
				// or after some, or drop the backend's connection mid-stream. After a
				// drop the next try goes through the same replica: it and the backend
				// must go on serving the sandbox.
				k, dropped := j.n, false
				for try := 0; ; try++ {
					if try == 20 {
						w.t.Errorf("streamed exec in running sandbox %s failed 20 times", id)
						break
					}
					live := w.f.live()
					fault, ok := w.streamExec(ctx, live[k%len(live)], id)
					if !ok {
						break
					}
					if fault == "" {
						if dropped {
							mu.Lock()
							recovered++
							mu.Unlock()
						}
						break
					}
					if fault == "dropped" {
						dropped = true
					} else {
						k++
					}
					mu.Lock()
					streamFaults[fault]++
					mu.Unlock()
				}
			}
		})
	}
	n := 0
	for id, sb := range all {
		if sb.State == "running" {
			jobs <- job{n, id}
			n++
		}
	}
	close(jobs)
	wg.Wait()
	w.t.Logf("exec answered in all %d running sandboxes; injected exec faults answered as the contract maps them: %v; streamed: %v", n, faults, streamFaults)
	var before, after int
	for fault, k := range streamFaults {
		switch {
		case strings.HasPrefix(fault, "after "):
			after += k
		case strings.HasPrefix(fault, "before "):
			before += k
		}
	}
	if n > 0 && (before == 0 || after == 0) {
		w.t.Errorf("streamed execs met %d faults before output and %d after: the run did not exercise both", before, after)
	}
	drops = streamFaults["dropped"]
	w.t.Logf("streamed execs whose backend dropped the connection mid-stream: %d, each answered with output and then provider_unavailable; %d sandboxes ran a clean streamed exec after a drop",
		drops, recovered)
	if n > 0 && drops == 0 {
		w.t.Errorf("no backend dropped a streamed exec's connection: the run did not exercise a stream cut mid-way")
	}
	return drops
}

// streamExec streams "echo ok" in sandbox id through via (asking for frames, as
// client.ExecStream does) and judges the answer against the contract. A fault before
// output answers the status and code its injected fault maps to, like a plain exec;
// a fault after output ends, after a part of the output, with a final event carrying
// provider_unavailable and the injected fault's words; a backend that dropped the
// connection mid-stream gives the same, in the adapter client's words for a body cut
// off; a clean run delivers the output and then exitCode 0. A stream that ends
// without a final event, or not within 30 s, breaks it. fault is "before <code>",
// "after <code>" or "dropped" for a run an injected fault failed, "" for a clean
// run; ok is false when the answer broke the contract (reported to t).
func (w *workload) streamExec(ctx context.Context, via *daemonProc, id string) (fault string, ok bool) {
	const want = "echo ok\n"
	c, err := client.New(via.url, w.f.token, client.WithRetry(1, 0, 0))
	if err != nil {
		w.t.Errorf("client for %s: %v", via.name, err)
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	call := apiCall{via: via, method: "POST", path: "/v1/sandboxes/" + id + "/exec"}
	var out strings.Builder
	for ev, err := range c.ExecSandboxStream(ctx, id, api.ExecRequest{Command: "echo ok"}) {
		var refused *client.APIError
		switch {
		case errors.As(err, &refused):
			call.status, call.code, call.message = refused.Status, string(refused.Code), refused.Message
			w.f.record(call)
			code, ok := execFault(call)
			if !ok {
				w.t.Errorf("streamed exec in running sandbox %s: %s", id, call)
				return "", false
			}
			return "before " + code, true
		case err != nil && ev.Error != "":
			call.status = http.StatusOK
			w.f.record(call)
			// Over the adapter protocol a failure after output loses its code, and a
			// dropped connection has none: both read as provider_unavailable, which
			// the daemon's final event must carry.
			var se *client.StreamError
			partial := out.Len() > 0 && out.Len() < len(want) && strings.HasPrefix(want, out.String())
			if !partial || !errors.As(err, &se) || se.Code != api.CodeProviderUnavailable {
				w.t.Errorf("streamed exec in running sandbox %s via %s: output %q, then a final error %q with code %q; want a start of %q, then provider_unavailable",
					id, via.name, out.String(), ev.Error, ev.Code, want)
				return "", false
			}
			if m := injectedStreamFault.FindStringSubmatch(ev.Error); m != nil {
				return "after " + m[1], true
			}
			if droppedStream.MatchString(ev.Error) {
				return "dropped", true
			}
			w.t.Errorf("streamed exec in running sandbox %s via %s: output %q, then a final error no fault after output explains: %q",
				id, via.name, out.String(), ev.Error)
			return "", false
		case err != nil:
			// ErrStreamIncomplete, a malformed stream, or no answer in time.
			w.t.Errorf("streamed exec in running sandbox %s via %s: output %q, then %v", id, via.name, out.String(), err)
			return "", false
		case ev.IsFinal():
			call.status = http.StatusOK
			w.f.record(call)
			// Final without an error: ExitCode is set.
			if *ev.ExitCode != 0 || out.String() != want {
				w.t.Errorf("streamed exec in running sandbox %s via %s: output %q, then exit code %d (timed out: %v); want %q and exit code 0",
					id, via.name, out.String(), *ev.ExitCode, ev.TimedOut, want)
				return "", false
			}
			return "", true
		case ev.Stream != api.StreamStdout:
			w.t.Errorf("streamed exec in running sandbox %s via %s: unexpected event %+v", id, via.name, ev)
			return "", false
		default:
			out.WriteString(ev.Data)
		}
	}
	w.t.Errorf("streamed exec in running sandbox %s via %s: output %q, then the events ended without a final one or an error", id, via.name, out.String())
	return "", false
}

// acceptableFailure says why a failed sandbox may have failed under the injected
// faults, or "" when nothing in them explains its reason.
func acceptableFailure(sb apiSandbox, lostPool string) string {
	switch {
	case strings.Contains(sb.Reason, "(createErrorRate: invalid_request)"):
		return "invalid_request injected"
	case strings.Contains(sb.Reason, "(gave up after "):
		return "retryable faults used up maxAttempts"
	case sb.Reason == lostReason && sb.Pool == lostPool:
		return "instance lost with the restarted backend"
	}
	return ""
}

// check asserts the end state: sandboxes as the API reports them, instances as the
// backends list them.
func (w *workload) check(ctx context.Context, all map[string]apiSandbox, pools []string, fakeURLs map[string]string, token string) {
	t := w.t
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()

	outcomes := map[string]int{}
	for _, id := range w.ids {
		if id == "" {
			continue // reported by create
		}
		sb, ok := all[id]
		if !ok {
			t.Errorf("sandbox %s is missing from the list", id)
			continue
		}
		deleted := w.deleted[id]
		switch {
		case sb.State == "running" && !deleted:
			outcomes["running"]++
		case sb.State == "terminated" && deleted:
			outcomes["terminated (deleted)"]++
		case sb.State == "failed" && sb.Reason != "" && acceptableFailure(sb, w.lostPool) != "":
			outcomes["failed: "+acceptableFailure(sb, w.lostPool)]++
		default:
			t.Errorf("sandbox %s (deleted: %v) ended %s after %d attempts: %q", id, deleted, sb.State, sb.Attempts, sb.Reason)
		}
	}
	t.Logf("outcomes: %v; creates refused with a full queue: %d", outcomes, w.queueFull)

	st, err := postgres.Open(ctx, w.f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	installation, err := st.InstallationID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	instancesOf := map[string][]string{} // sandbox ID -> "pool/ref"
	for _, pool := range pools {
		insts := listAll(t, ctx, fakeURLs[pool], token, installation)
		for _, in := range insts {
			instancesOf[in.SandboxID] = append(instancesOf[in.SandboxID], pool+"/"+in.Ref)
			sb, ok := all[in.SandboxID]
			switch {
			case !ok:
				t.Errorf("pool %s: instance %s belongs to no sandbox (sandbox ID %q)", pool, in.Ref, in.SandboxID)
			case sb.State != "running" || sb.Pool != pool || sb.BackendRef != in.Ref:
				t.Errorf("pool %s: instance %s (%s) outlives its sandbox %s: %s on pool %q with backendRef %q",
					pool, in.Ref, in.State, sb.ID, sb.State, sb.Pool, sb.BackendRef)
			}
		}
	}
	for id, insts := range instancesOf {
		if len(insts) > 1 {
			t.Errorf("sandbox %s has %d instances: %v", id, len(insts), insts)
		}
	}
	for _, sb := range all {
		if sb.State == "running" && !slices.Contains(instancesOf[sb.ID], sb.Pool+"/"+sb.BackendRef) {
			t.Errorf("running sandbox %s has no instance %s on pool %s (backends hold %v)", sb.ID, sb.BackendRef, sb.Pool, instancesOf[sb.ID])
		}
	}
}

// listAll lists a fake backend's instances, retrying the Lists its faults fail.
func listAll(t *testing.T, ctx context.Context, url, token, installation string) []adapters.Instance {
	t.Helper()
	client, err := adapterhttp.NewClient(url, token)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		insts, err := client.List(ctx, installation)
		if err == nil {
			return insts
		}
		if !strings.Contains(err.Error(), "fake: injected list failure") {
			t.Fatalf("List on %s: %v", url, err)
		}
	}
	t.Fatalf("List on %s failed 50 times", url)
	return nil
}
