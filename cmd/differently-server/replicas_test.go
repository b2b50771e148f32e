package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters/adapterhttp"
	"github.com/different-ai/differently/internal/pgtest"
	"github.com/different-ai/differently/server/store/postgres"
)

// TestReplicasProvisionExactlyOnce runs three daemon processes on one PostgreSQL
// schema in front of one fault-injecting fake backend (slow Creates, lost responses,
// failed attempts), kills one replica with SIGKILL while its Creates are in flight,
// starts a replacement, and checks that every sandbox ends running with exactly one
// backend instance, that deleting them leaves the backend empty, and that killing the
// reconciling leader hands the lease to another replica.
//
// Nothing here sleeps: the daemons run at debug level and log one line per scheduler
// and reconcile pass; every line from a live replica, and every event, makes the test
// look again, at the API or at the replicas' metrics.
func TestReplicasProvisionExactlyOnce(t *testing.T) {
	const (
		sandboxes   = 30
		killAfter   = 15 // sandboxes created before the first replica dies
		interval    = time.Second
		leasePeriod = 3 * interval // reconcile.Run's lease: three intervals
		// budget bounds the whole test. A typical run takes about 50 s under -race: the
		// killed replica's sandboxes wait out their claims (the provision timeout plus
		// the scheduler's 10 s margin) before another replica takes them over.
		budget = 240 * time.Second
	)
	deadline := time.Now().Add(budget)
	dbURL := pgtest.SchemaURL(t)
	const adapterToken = "replicas-test-adapter-token"
	// Creates take long enough (1.5 s) that one seen starting in the logs is still in
	// flight when its replica is killed, even on a loaded machine.
	fakeURL := serve(t, []string{"DIFFERENTLY_ADAPTER_TOKEN=" + adapterToken},
		"--adapter", "fake", "--config-json",
		`{"createLatencyMs": 1500, "dropCreateResponses": 3, "createErrors": ["insufficient_capacity", "sandbox_failed"]}`)

	cfg := fmt.Sprintf(`database:
  url: %q
listen: 127.0.0.1:0
scheduler:
  provisionTimeoutSeconds: 3
  reconcileIntervalSeconds: %d
  maxAttempts: 10
pools:
  - name: shared
    adapter: remote
    config:
      endpoint: %q
    credentials:
      env: SHARED_ADAPTER_TOKEN
`, dbURL, int(interval/time.Second), fakeURL)
	f := newFleet(t, dbURL, cfg, []string{"SHARED_ADAPTER_TOKEN=" + adapterToken})

	reps := []*daemonProc{f.start("r0"), f.start("r1"), f.start("r2")}

	// Create through the replicas in turn; kill the first replica that has a Create in flight.
	var ids []string
	create := func(via *daemonProc) {
		var sb apiSandbox
		f.call(via, "POST", "/v1/sandboxes", `{"placement": {"allowedPools": ["shared"]}}`, http.StatusAccepted, &sb)
		ids = append(ids, sb.ID)
	}
	for i := range killAfter {
		create(reps[i%3])
	}
	// The fake's first Creates answer the injected errors at once, so wait for a Create
	// made after them: that one takes createLatencyMs and is in flight. Whichever replica
	// starts one first is the victim; which replica claims what is up to the database.
	var victim *daemonProc
	f.waitFor("a replica to start a Create after the injected errors", deadline, func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		total := 0
		for _, p := range reps {
			total += p.creates
			if victim == nil && p.lateCreates > 0 {
				victim = p
			}
		}
		return victim != nil, fmt.Sprintf("%d Creates started", total)
	})
	f.kill(victim)
	held := f.heldBy(victim)
	t.Logf("killed %s holding %d sandboxes: %v", victim.name, len(held), held)
	if len(held) == 0 {
		t.Errorf("the killed replica held no sandbox: the test did not exercise a crash mid-work")
	}
	var alive []*daemonProc
	for _, p := range reps {
		if p != victim {
			alive = append(alive, p)
		}
	}
	for i := killAfter; i < sandboxes; i++ {
		create(alive[i%len(alive)])
		if i == killAfter+5 {
			alive = append(alive, f.start("r3")) // a replacement joins mid-work
		}
	}

	f.waitFor("every sandbox running", deadline, func() (bool, string) {
		byState := f.states(alive[0], ids)
		return len(byState["running"]) == len(ids), summary(byState)
	})

	// Ask for a pass now: nothing may be left to repair.
	var rep struct {
		Pools []struct {
			Pool           string   `json:"pool"`
			Skipped        string   `json:"skipped"`
			OrphansDeleted []string `json:"orphansDeleted"`
			Adopted        []string `json:"adopted"`
			Requeued       []string `json:"requeued"`
			Lost           []string `json:"lost"`
			StateChanged   []string `json:"stateChanged"`
			Duplicates     []string `json:"duplicates"`
		} `json:"pools"`
	}
	c, data := f.reconcileNow(t.Context(), alive[1], deadline)
	if c.status != http.StatusOK || json.Unmarshal(data, &rep) != nil {
		t.Fatalf("%s: %s", c, data)
	}
	if len(rep.Pools) != 1 || rep.Pools[0].Pool != "shared" {
		t.Fatalf("reconcile report covers %+v, want pool shared only", rep.Pools)
	}
	if p := rep.Pools[0]; p.Skipped != "" || len(p.OrphansDeleted)+len(p.Adopted)+len(p.Requeued)+len(p.Lost)+len(p.StateChanged)+len(p.Duplicates) > 0 {
		t.Errorf("reconcile after the run found work: %+v", p)
	}

	// The backend itself: one instance per sandbox, and it is the sandbox's own.
	ctx := t.Context()
	st, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	installation, err := st.InstallationID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := adapterhttp.NewClient(fakeURL, adapterToken)
	if err != nil {
		t.Fatal(err)
	}
	insts, err := backend.List(ctx, installation)
	if err != nil {
		t.Fatal(err)
	}
	refsOf := map[string][]string{}
	for _, in := range insts {
		refsOf[in.SandboxID] = append(refsOf[in.SandboxID], in.Ref)
	}
	sbs := f.list(alive[0])
	for _, id := range ids {
		refs := refsOf[id]
		if len(refs) != 1 {
			t.Errorf("sandbox %s has %d backend instances %v, want exactly 1", id, len(refs), refs)
			continue
		}
		if got := sbs[id].BackendRef; got != refs[0] {
			t.Errorf("sandbox %s: backendRef %q, but its instance is %q", id, got, refs[0])
		}
	}
	for sid, refs := range refsOf {
		if !slices.Contains(ids, sid) {
			t.Errorf("instances %v belong to no sandbox of this test (sandbox ID %q)", refs, sid)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Delete everything through the surviving replicas; the backend must end empty.
	for i, id := range ids {
		f.call(alive[i%len(alive)], "DELETE", "/v1/sandboxes/"+id, "", http.StatusAccepted, nil)
	}
	f.waitFor("every sandbox terminated", deadline, func() (bool, string) {
		byState := f.states(alive[0], ids)
		return len(byState["terminated"]) == len(ids), summary(byState)
	})
	if insts, err := backend.List(ctx, installation); err != nil || len(insts) != 0 {
		t.Errorf("after deleting every sandbox the backend lists %d instances (%v): %+v", len(insts), err, insts)
	}

	// Leader failover: kill the replica that reconciles; another must take over within
	// two lease periods (plus one interval for its next try).
	var leader *daemonProc
	f.waitFor("a leader's reconcile pass", deadline, func() (bool, string) {
		var status string
		leader, status = f.leader()
		return leader != nil, status
	})
	f.kill(leader)
	killedAt := time.Now()
	before := f.leaderPasses()
	var successor *daemonProc
	takeover := killedAt.Add(2*leasePeriod + interval)
	f.waitFor("another replica to take the reconciler lease", takeover, func() (bool, string) {
		err := f.readMetrics()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.procs {
			if !p.killed && p.reconciler.passes["interval"] > before[p] {
				successor = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("no leader's reconcile pass since %s died (%v)", leader.name, err)
	})
	t.Logf("leader %s killed; %s reconciled %s later", leader.name, successor.name, time.Since(killedAt).Round(10*time.Millisecond))
}

// leader is the live daemon that holds the reconciler lease, by the metrics of
// every live daemon, once it ran a pass as the leader; nil, and why, while no one
// daemon does (a replica that lost the lease says so at its next attempt).
func (f *fleet) leader() (*daemonProc, string) {
	if err := f.readMetrics(); err != nil {
		return nil, err.Error()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var leaders []*daemonProc
	var names []string
	for _, p := range f.procs {
		if !p.killed && p.url != "" && p.reconciler.leader && p.reconciler.passes["interval"] > 0 {
			leaders = append(leaders, p)
			names = append(names, p.name)
		}
	}
	if len(leaders) != 1 {
		return nil, fmt.Sprintf("daemons %v lead and ran a pass, want exactly one", names)
	}
	return leaders[0], ""
}

// leaderPasses reads every live daemon's metrics and returns the passes each daemon
// ran as the leader.
func (f *fleet) leaderPasses() map[*daemonProc]int {
	f.t.Helper()
	if err := f.readMetrics(); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[*daemonProc]int{}
	for _, p := range f.procs {
		out[p] = p.reconciler.passes["interval"]
	}
	return out
}

// states groups ids by state, failing the test at once on a failed sandbox: with
// the injected faults and maxAttempts none may fail.
func (f *fleet) states(via *daemonProc, ids []string) map[string][]string {
	f.t.Helper()
	sbs := f.list(via)
	out := map[string][]string{}
	for _, id := range ids {
		sb, ok := sbs[id]
		if !ok {
			f.t.Fatalf("sandbox %s is missing from the list", id)
		}
		if sb.State == "failed" {
			f.t.Fatalf("sandbox %s failed after %d attempts: %s\n%s", id, sb.Attempts, sb.Reason, f.tails())
		}
		out[sb.State] = append(out[sb.State], id)
	}
	return out
}
