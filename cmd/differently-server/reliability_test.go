package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/reconcile"
	"github.com/different-ai/differently/server/store"
	"github.com/different-ai/differently/server/store/postgres"
)

// reliabilitySeedEnv reruns TestReliability with the seed a failed run logged.
const reliabilitySeedEnv = "DIFFERENTLY_RELIABILITY_SEED"

// TestReliability is the reliability harness: hundreds of sandboxes go through three
// daemon replicas on one PostgreSQL while two fake backends, served over the adapter
// HTTP protocol, inject every Create error code, lost Create answers, Delete and
// List failures, exec failures, streamed execs whose connection drops mid-stream and
// latency at random, while replicas are SIGKILLed
// and restarted at random points, one backend is SIGKILLed and restarted (empty: the
// fake keeps its instances in memory), and some sandboxes are deleted mid-flight.
// Once everything has settled, the reconciler has failed the sandboxes whose
// instances the restarted backend lost, and a reconcile pass finds nothing left to do
// (and again after every sandbox left is deleted, when the backends must end empty):
//
//   - every sandbox is running, terminated (only if the test deleted it) or failed
//     with a reason the faults explain: an injected invalid_request, which fails a
//     sandbox at once, retryable faults that used up maxAttempts (rare: the rates
//     and maxAttempts 10 make that unlikely), or, on the restarted backend's pool
//     only, an instance lost with the restart;
//   - every backend instance belongs to a running sandbox on that pool that names it
//     as its backendRef, and every running sandbox has exactly that one instance,
//     in which exec works, plain and streamed, though it may take a few tries: every
//     exec the backend fails before any output must answer the status and code the
//     contract maps its fault to, and every streamed exec it fails after some output
//     must end with a final event carrying provider_unavailable and the fault's
//     words, never without a final event or not at all; so must every streamed exec
//     whose backend dropped the connection mid-stream (at least one must have), after
//     which the same replica goes on serving the sandbox;
//   - no reconciler ever had to delete a second instance of a sandbox, follow a
//     state the backend changed, or fail a sandbox whose instance disappeared, but
//     on the restarted backend's pool;
//   - every API answer of 5xx is one the contract allows: 503 with Retry-After from
//     a full create queue, or 503 provider_unavailable from an injected exec outage
//     or capacity fault. (A reconcile pass whose Delete the backend refused answers
//     200 with the failure among its report's errors.) A request that got no answer
//     went to a replica the test killed.
//   - every daemon still running exits cleanly on SIGTERM, and no daemon reported a
//     data race.
//
// Randomness comes from one seed, logged at the start; set DIFFERENTLY_RELIABILITY_SEED
// to replay a run's plan (which sandboxes are deleted when, when replicas and which
// backend die, the backends' fault draws). Goroutine and process scheduling still vary between runs.
//
// Nothing here sleeps to wait for state: the test waits on the daemons' log lines,
// and a create refused because the queue is full is retried after the next
// provisioning pass that claimed work (or the Retry-After delay, if sooner).
func TestReliability(t *testing.T) {
	if testing.Short() {
		t.Skip("the reliability harness takes about a minute")
	}
	const (
		sandboxes = 300
		creators  = 12  // concurrent API clients
		deleteP   = 0.2 // share of sandboxes deleted mid-flight
		kills     = 4
		// budget bounds the whole test; a run takes 55 to 75 s under -race. The
		// sandboxes a killed replica was creating wait out provisionTimeoutSeconds plus
		// the reconciler's 30 s adoption margin before another replica takes them
		// over, so the replicas die early in the run.
		budget = 170 * time.Second
	)
	began := time.Now()
	deadline := began.Add(budget)
	seed := reliabilitySeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x72656c79))

	dbURL := pgtest.SchemaURL(t)
	const adapterToken = "reliability-test-adapter-token"
	pools := []string{"a", "b"}
	fakeURLs := map[string]string{}
	backends := map[string]*backendProc{}
	execCodes, _ := json.Marshal(execFaultCodes)
	for i, pool := range pools {
		// Per Create: 10% injected errors (2% of each code), 4% lost answers, and
		// 50-450 ms to make an instance. 15% of Deletes, 10% of Lists and 20% of
		// execs fail; half of the streamed ones that fail do so after some output.
		// Of the streamed execs left, 5% lose their connection mid-stream: about a
		// dozen in a run.
		faults := fmt.Sprintf(`{"faultSeed": %d, "createLatencyMs": 50, "createLatencyJitterMs": 400,
			"createErrorRate": 0.1, "dropCreateResponseRate": 0.04, "deleteErrorRate": 0.15, "listErrorRate": 0.1,
			"execErrorRate": 0.2, "execErrorCodes": %s, "execStreamDropRate": 0.05}`,
			(seed+int64(i)+1)&(1<<62-1), execCodes)
		backends[pool] = startBackend(t, []string{"DIFFERENTLY_ADAPTER_TOKEN=" + adapterToken},
			"--adapter", "fake", "--config-json", faults)
		fakeURLs[pool] = backends[pool].url
	}
	cfg := fmt.Sprintf(`database:
  url: %q
listen: 127.0.0.1:0
scheduler:
  provisionTimeoutSeconds: 4
  reconcileIntervalSeconds: 1
  maxAttempts: 10
  # Below the number of sandboxes, so that a burst of creates meets a full queue.
  maxQueued: 40
pools:
`, dbURL)
	for _, pool := range pools {
		cfg += fmt.Sprintf(`  - name: %s
    adapter: remote
    maxStarting: 16
    config:
      endpoint: %q
    credentials:
      env: RELIABILITY_ADAPTER_TOKEN
`, pool, fakeURLs[pool])
	}
	f := newFleet(t, dbURL, cfg, []string{"RELIABILITY_ADAPTER_TOKEN=" + adapterToken})
	slots := []*daemonProc{f.start("r0"), f.start("r1"), f.start("r2")}

	// The plan, drawn before anything runs so that a seed always gives the same one.
	// Replicas die once this many Creates have started fleet-wide, and a replacement
	// starts a few Creates later, before the next death: two replicas always live.
	// minLostOnCrash is how many sandboxes must run on the crashing backend's pool
	// before it is killed.
	const minLostOnCrash = 3
	type chaosStep struct{ killAt, restartAt, victim int }
	plan := make([]chaosStep, kills)
	for i := range plan {
		plan[i].killAt = 10 + rng.IntN(220)
	}
	slices.SortFunc(plan, func(a, b chaosStep) int { return a.killAt - b.killAt })
	for i := range plan {
		plan[i].victim = rng.IntN(len(slots))
		plan[i].restartAt = plan[i].killAt + rng.IntN(30)
		if i+1 < len(plan) {
			plan[i].restartAt = min(plan[i].restartAt, plan[i+1].killAt)
		}
	}
	// Deletes: a deletion's sandbox is deleted once as many creates as its after
	// field says have been answered, which catches it queued, provisioning, backing
	// off or running.
	var deletions []deletion
	for i := range sandboxes {
		if rng.Float64() < deleteP {
			deletions = append(deletions, deletion{index: i, after: i + rng.IntN(60)})
		}
	}
	// One backend dies once it holds running sandboxes, yet early enough that they
	// are past the reconciler's 30 s grace for recent changes by the time the
	// sandboxes a killed replica was creating are taken over (see budget), so the
	// run does not wait for them; it comes back some Creates later.
	crash := backendCrash{pool: pools[rng.IntN(len(pools))], killAt: 40 + rng.IntN(60)}
	crash.restartAt = crash.killAt + 10 + rng.IntN(30)
	t.Logf("seed %d (rerun with %s=%d); replicas die at Creates %v; pool %s's backend dies at Create %d and returns at %d; %d sandboxes deleted mid-flight",
		seed, reliabilitySeedEnv, seed, plan, crash.pool, crash.killAt, crash.restartAt, len(deletions))

	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	w := newWorkload(f, seed, sandboxes, deletions)
	w.lostPool = crash.pool
	work := make(chan int)
	var wg sync.WaitGroup
	for range creators {
		wg.Go(func() {
			for i := range work {
				w.create(ctx, i)
			}
		})
	}
	go func() {
		defer close(work)
		for i := range sandboxes {
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	creatorsDone := make(chan struct{})
	go func() {
		wg.Wait()
		w.deleteRest(ctx) // deletions whose turn never came
		close(creatorsDone)
	}()
	// A test that fails early stops its clients before it ends: they report to t.
	defer func() {
		cancel()
		<-creatorsDone
	}()

	// Chaos, driven from the test's goroutine by the daemons' log lines. The first
	// victim is the replica with the most sandboxes provisioning, killed once it has
	// one, so that at least one death surely leaves Creates in flight for the others
	// to recover; the other victims are the plan's.
	step, down := 0, -1
	restarts := make([]int, len(slots))
	heldProvisioning := 0
	f.waitFor("every create answered and every planned kill and restart done", deadline, func() (bool, string) {
		n := f.createLines()
		switch {
		case crash.state == 0 && n >= crash.killAt:
			// Only once the pool runs a few sandboxes: the crash must lose some for the
			// reconciler to recover, and deletes mid-flight take some of them away. The
			// planned downtime starts when the kill does.
			running := len(f.listQuery(f.live()[0], "state=running&pool="+crash.pool))
			if running < minLostOnCrash {
				break
			}
			backends[crash.pool].kill()
			crash.state = 1
			crash.restartAt += n - crash.killAt
			t.Logf("%s: killed pool %s's backend after %d Creates, with %d sandboxes running on it",
				time.Since(began).Round(time.Millisecond), crash.pool, n, running)
		case crash.state == 1 && n >= crash.restartAt:
			backends[crash.pool].restart()
			crash.state = 2
			t.Logf("%s: restarted pool %s's backend after %d Creates", time.Since(began).Round(time.Millisecond), crash.pool, f.createLines())
		}
		for step < len(plan) {
			s := plan[step]
			switch {
			case down < 0 && n >= s.killAt:
				down = s.victim
				if step == 0 {
					var provisioning int
					down, provisioning = busiest(f, slots, down)
					// As the backend's crash waits for running sandboxes, the first
					// death waits for its victim to hold a Create in flight, unless
					// every create has been answered; its downtime starts then.
					select {
					case <-creatorsDone:
					default:
						if provisioning == 0 {
							down = -1
							break
						}
					}
					if down < 0 {
						break
					}
					plan[step].restartAt += n - s.killAt
				}
				f.kill(slots[down])
				held := map[string]int{}
				for _, h := range f.heldBy(slots[down]) {
					held[h[strings.LastIndex(h, "(")+1:len(h)-1]]++
				}
				heldProvisioning += held["provisioning"]
				t.Logf("%s: killed %s after %d Creates, holding %v", time.Since(began).Round(time.Millisecond), slots[down].name, n, held)
				continue
			case down >= 0 && n >= s.restartAt:
				restarts[down]++
				slots[down] = f.start(fmt.Sprintf("r%d.%d", down, restarts[down]))
				t.Logf("%s: started %s after %d Creates", time.Since(began).Round(time.Millisecond), slots[down].name, f.createLines())
				down = -1
				step++
				continue
			}
			break
		}
		select {
		case <-creatorsDone:
		default:
			return false, fmt.Sprintf("%d of %d creates answered, %d Creates started", w.answered(), sandboxes, n)
		}
		return step == len(plan) && crash.state == 2, fmt.Sprintf("%d Creates started, chaos step %d of %d, backend crash step %d of 2",
			n, step, len(plan), crash.state)
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%s: every create answered, chaos over", time.Since(began).Round(time.Millisecond))
	if heldProvisioning == 0 {
		t.Errorf("no replica died while provisioning: the run did not exercise recovery from a crash mid-Create")
	}

	settle(t, f, began, deadline)
	installation := installationID(t, ctx, dbURL)
	lost := awaitLost(t, ctx, f, crash.pool, fakeURLs[crash.pool], adapterToken, installation, deadline)
	t.Logf("%s: %d sandboxes on pool %s failed with the instances its backend's restart lost", time.Since(began).Round(time.Millisecond), lost, crash.pool)
	if lost == 0 {
		t.Errorf("the restarted backend lost no running sandbox: the run did not exercise the reconciler's recovery from it")
	}
	reconcileClean(t, ctx, f, began, deadline, len(pools), crash.pool)
	w.check(ctx, f.list(f.live()[0]), pools, fakeURLs, adapterToken)
	drops := w.execAll(ctx, f.list(f.live()[0]))
	awaitDropsLogged(t, backends, drops, deadline)
	if t.Failed() {
		t.FailNow()
	}

	// Delete everything left through the API, as a last wave under the same faults:
	// the backends must end empty.
	all := f.list(f.live()[0])
	var last []string
	for id, sb := range all {
		if sb.State == "running" {
			last = append(last, id)
		}
	}
	slices.Sort(last)
	for _, id := range last {
		w.markDeleted(id)
		w.delete(ctx, id)
	}
	settle(t, f, began, deadline)
	reconcileClean(t, ctx, f, began, deadline, len(pools), crash.pool)
	w.check(ctx, f.list(f.live()[0]), pools, fakeURLs, adapterToken)

	checkAnswers(t, f)
	checkRepairs(t, f, crash.pool)
	t.Logf("warnings and errors the daemons logged: %v", f.logged)
	if len(f.races) > 0 {
		t.Errorf("daemons %v reported data races", f.races)
	}
	t.Logf("%s: checked; %d Creates started fleet-wide", time.Since(began).Round(time.Millisecond), f.createLines())
}

// backendCrash is the plan for the backend that dies: its pool, the Create counts at
// which it is killed and restarted, and how far that went (0 up, 1 killed, 2
// restarted).
type backendCrash struct {
	pool              string
	killAt, restartAt int
	state             int
}

// installationID reads the installation the daemons stamp on every instance.
func installationID(t *testing.T, ctx context.Context, dbURL string) string {
	t.Helper()
	st, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, err := st.InstallationID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// settle waits until no sandbox is queued, provisioning or terminating, and logs
// the last one to settle.
func settle(t *testing.T, f *fleet, began, deadline time.Time) {
	t.Helper()
	var lastOpen apiSandbox
	f.waitFor("no sandbox queued, provisioning or terminating", deadline, func() (bool, string) {
		open := f.listQuery(f.live()[0], "state=queued&state=provisioning&state=terminating")
		byState := map[string][]string{}
		for id, sb := range open {
			byState[sb.State] = append(byState[sb.State], id)
			lastOpen = sb
		}
		return len(open) == 0, summary(byState)
	})
	t.Logf("%s: settled; the last sandbox to settle was %s (%s after %d attempts: %q)", time.Since(began).Round(time.Millisecond),
		lastOpen.ID, lastOpen.State, lastOpen.Attempts, lastOpen.Reason)
}

// reconcileClean reconciles until a pass lists every pool and has nothing left to
// do. Once the sandboxes have settled, deleting orphans (instances of sandboxes
// deleted while their Create's answer was lost, or while a killed replica created
// them) is the only work a pass may find; a List or Delete the backends fail makes
// another pass needed.
func reconcileClean(t *testing.T, ctx context.Context, f *fleet, began, deadline time.Time, pools int, lostPool string) {
	t.Helper()
	var orphans []string
	for i := 0; ; i++ {
		if i == 40 {
			t.Fatalf("no clean reconcile pass in 40 tries\n%s", f.tails())
		}
		live := f.live()
		c, data := f.reconcileNow(ctx, live[i%len(live)], deadline)
		if c.status != http.StatusOK {
			t.Logf("reconcile: %s", c) // judged with every other answer by checkAnswers
			continue
		}
		var rep reconcile.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("reconcile report %q: %v", data, err)
		}
		clean := len(rep.Pools) == pools
		for _, p := range rep.Pools {
			orphans = append(orphans, p.OrphansDeleted...)
			lost := len(p.Lost)
			if p.Pool == lostPool {
				lost = 0 // awaitLost waited for these, but a pass may still find one first
			}
			if n := len(p.Adopted) + len(p.Requeued) + lost + len(p.StateChanged) + len(p.Duplicates); n > 0 {
				t.Errorf("reconcile after settling changed sandboxes on pool %s: %+v", p.Pool, p)
			}
			// A failed action (an orphan Delete the backend refused) is in the
			// report's errors; the pass is clean once nothing failed or was done.
			if p.Skipped != "" || len(p.OrphansDeleted) > 0 || len(p.Lost) > 0 || len(p.Errors) > 0 {
				clean = false
			}
		}
		if clean {
			break
		}
	}
	t.Logf("%s: reconciled; %d orphans deleted on the way", time.Since(began).Round(time.Millisecond), len(orphans))
}

// busiest returns the index of the slot whose replica has the most sandboxes
// provisioning, preferring def on a tie, and how many it has.
func busiest(f *fleet, slots []*daemonProc, def int) (best, provisioning int) {
	claims := f.claims()
	count := func(p *daemonProc) int {
		f.mu.Lock()
		replica := p.replica
		f.mu.Unlock()
		n := 0
		for _, sb := range claims[replica] {
			if replica != "" && sb.State == store.StateProvisioning {
				n++
			}
		}
		return n
	}
	best, provisioning = def, count(slots[def])
	for i, p := range slots {
		if n := count(p); n > provisioning {
			best, provisioning = i, n
		}
	}
	return best, provisioning
}

// reliabilitySeed is DIFFERENTLY_RELIABILITY_SEED, or a fresh seed.
func reliabilitySeed(t *testing.T) int64 {
	if s := os.Getenv(reliabilitySeedEnv); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil || seed < 0 {
			t.Fatalf("%s=%q: want a non-negative integer", reliabilitySeedEnv, s)
		}
		return seed
	}
	return time.Now().UnixNano() & (1<<62 - 1)
}

// checkAnswers judges every API answer of the run against the contract: which 5xx
// it allows, and that only a killed replica may leave a request unanswered.
func checkAnswers(t *testing.T, f *fleet) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	allowed := map[string]int{}
	unanswered := 0
	for _, c := range f.calls {
		switch {
		case c.status == 0:
			if !c.via.killed {
				t.Errorf("no answer from a replica the test did not kill: %s", c)
			}
			unanswered++
		case c.status < 500:
		case c.method == "POST" && c.path == "/v1/sandboxes" && c.status == http.StatusServiceUnavailable &&
			c.code == "provider_unavailable" && c.retryAfter != "" && strings.Contains(c.message, "queue is full"):
			allowed["503 queue full"]++
		case c.method == "POST" && strings.HasSuffix(c.path, "/exec") && allowedExec5xx(c):
			allowed["503 injected exec fault"]++
		default:
			t.Errorf("an answer the contract does not allow: %s", c)
		}
	}
	t.Logf("%d API calls; allowed 5xx: %v; %d unanswered by killed replicas", len(f.calls), allowed, unanswered)
}

// checkRepairs judges what the reconcilers repaired during the run: the changes
// they made to sandboxes, by their events, and the instances they deleted, by every
// replica's metrics (a killed one's as read just before it died). Adopting and
// requeueing the sandboxes of a killed replica, deleting orphans (instances made
// for a sandbox that was deleted or requeued while its Create's answer was lost),
// and failing the sandboxes whose instances the restarted backend lost, are their
// job here. A second instance of one sandbox, an instance lost from the
// backend, or a state the backend changed would each mean an invariant broke at some
// point, even if a later pass repaired it.
func checkRepairs(t *testing.T, f *fleet, lostPool string) {
	t.Helper()
	counts := map[reconcile.ActionKind]int{}
	for _, e := range f.reconcilerEvents() {
		action := repairOf(e)
		counts[action]++
		switch action {
		case reconcile.Adopt, reconcile.Requeue:
		case reconcile.Lost:
			// Failing the sandboxes whose instances the restarted backend lost is
			// the reconciler's job; an instance vanishing anywhere else is not.
			if e.Pool != lostPool {
				t.Errorf("a reconciler had to repair what should never break: %s", e)
			}
		default:
			t.Errorf("a reconciler had to repair what should never break: %s", e)
		}
	}
	if err := f.readMetrics(); err != nil {
		t.Error(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		for fd, n := range p.reconciler.findings {
			switch fd.kind {
			case "orphan_deleted":
				counts[reconcile.DeleteOrphan] += n
			case "duplicate_deleted":
				counts[reconcile.DeleteDuplicate] += n
				if n > 0 {
					t.Errorf("a reconciler had to repair what should never break: %s deleted %d duplicate instances on pool %s", p.name, n, fd.pool)
				}
			}
		}
	}
	t.Logf("reconcilers' repairs during the run: %v", counts)
}

// repairOf is the reconcile action that made one of a reconciler's events.
func repairOf(e event) reconcile.ActionKind {
	switch {
	case e.Type == "adopted":
		return reconcile.Adopt
	case e.Type == "requeued":
		return reconcile.Requeue
	case e.Type == "failed" && e.Code == "not_found":
		return reconcile.Lost
	case e.Type == "failed", e.Type == "observed":
		return reconcile.Follow
	}
	// No action records another type: its own name is flagged as unexpected.
	return reconcile.ActionKind(e.Type)
}
