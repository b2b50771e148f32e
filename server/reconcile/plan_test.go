package reconcile

import (
	"reflect"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/server/store"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var timing = Timing{Now: t0, ProvisionTimeout: 120 * time.Second, Grace: 30 * time.Second}

// sb builds a sandbox last changed age ago.
func sb(id, pool string, state store.State, ref string, age time.Duration) store.Sandbox {
	return store.Sandbox{ID: id, Pool: pool, State: state, BackendRef: ref,
		StateChangedAt: t0.Add(-age), UpdatedAt: t0.Add(-age)}
}

// claimed puts sb under a claim that expires in (negative: expired ago).
func claimed(sb store.Sandbox, in time.Duration) store.Sandbox {
	exp := t0.Add(in)
	sb.ClaimedBy, sb.ClaimExpiresAt = "replica-1", &exp
	return sb
}

func inst(ref, sandbox string, state adapters.InstanceState) adapters.Instance {
	return adapters.Instance{Ref: ref, SandboxID: sandbox, State: state}
}

func TestPlan(t *testing.T) {
	old, fresh := time.Hour, time.Second
	tests := []struct {
		name      string
		instances []adapters.Instance
		sandboxes []store.Sandbox
		want      []Action
	}{
		{"in agreement",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old)},
			nil},
		{"unknown or terminal sandbox: orphan",
			[]adapters.Instance{inst("r1", "gone", adapters.StateRunning)},
			nil,
			[]Action{{Kind: DeleteOrphan, SandboxID: "gone", Ref: "r1", Reason: "no live sandbox owns this instance"}}},
		{"leftover of a sandbox now on another pool",
			[]adapters.Instance{inst("r-old", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "q", store.StateRunning, "r-new", old)},
			[]Action{{Kind: DeleteOrphan, SandboxID: "s1", Ref: "r-old", Reason: "left behind by a sandbox now on pool q"}}},
		{"shared backend: the other pool's current instance is left alone",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "q", store.StateRunning, "r1", old)},
			nil},
		{"sandbox on another pool still being placed: left alone",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "q", store.StateProvisioning, "", old)},
			nil},
		{"stale provisioning with an instance: adopt",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", old)},
			[]Action{{Kind: Adopt, SandboxID: "s1", Ref: "r1"}}},
		{"stale provisioning with two instances: adopt one, delete the other",
			[]adapters.Instance{inst("r2", "s1", adapters.StateRunning), inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", old)},
			[]Action{{Kind: Adopt, SandboxID: "s1", Ref: "r1"}, {Kind: DeleteDuplicate, SandboxID: "s1", Ref: "r2", Reason: "second instance of one sandbox"}}},
		{"fresh provisioning: left to the provisioner",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", fresh)},
			nil},
		{"provisioning just past the timeout, within the adopt margin: left to the Create in flight",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", 121*time.Second), sb("s2", "p", store.StateProvisioning, "", 130*time.Second)},
			nil},
		{"claim lapsed and past the timeout: adopted with no margin of the reconciler's own",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{claimed(sb("s1", "p", store.StateProvisioning, "", 121*time.Second), 0)},
			[]Action{{Kind: Adopt, SandboxID: "s1", Ref: "r1"}}},
		{"claim lapsed before the timeout: left alone",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{claimed(sb("s1", "p", store.StateProvisioning, "", 119*time.Second), -time.Second)},
			nil},
		{"provisioning past timeout and margin but under a live claim: left alone",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{claimed(sb("s1", "p", store.StateProvisioning, "", old), time.Second), claimed(sb("s2", "p", store.StateProvisioning, "", old), time.Minute)},
			nil},
		{"lapsed claim does not protect a stale sandbox",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{claimed(sb("s1", "p", store.StateProvisioning, "", old), -time.Second)},
			[]Action{{Kind: Adopt, SandboxID: "s1", Ref: "r1"}}},
		{"stale provisioning with only a pending instance: requeued, never adopted",
			[]adapters.Instance{inst("r1", "s1", adapters.StatePending)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", old)},
			[]Action{{Kind: Requeue, SandboxID: "s1", Reason: "provisioning timed out with the instance still pending on the backend; requeued"}}},
		{"stale provisioning whose own instance is pending: requeued, nothing deleted",
			[]adapters.Instance{inst("r1", "s1", adapters.StatePending), inst("r2", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "r1", old)},
			[]Action{{Kind: Requeue, SandboxID: "s1", Reason: "provisioning timed out with the instance still pending on the backend; requeued"}}},
		{"stale provisioning with a pending and a ready instance: adopt the ready one",
			[]adapters.Instance{inst("r1", "s1", adapters.StatePending), inst("r2", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", old)},
			[]Action{{Kind: Adopt, SandboxID: "s1", Ref: "r2"}, {Kind: DeleteDuplicate, SandboxID: "s1", Ref: "r1", Reason: "second instance of one sandbox"}}},
		{"stale provisioning without an instance: requeue",
			nil,
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", old)},
			[]Action{{Kind: Requeue, SandboxID: "s1", Reason: "provisioning timed out with no instance on the backend; requeued"}}},
		{"running sandbox whose instance is gone: lost",
			nil,
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old), sb("s2", "p", store.StateStopped, "r2", old)},
			[]Action{{Kind: Lost, SandboxID: "s1", Ref: "r1", Reason: "backend instance disappeared"}, {Kind: Lost, SandboxID: "s2", Ref: "r2", Reason: "backend instance disappeared"}}},
		{"recently changed sandbox is not failed",
			nil,
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", fresh)},
			nil},
		{"sandbox on another pool is not lost here",
			nil,
			[]store.Sandbox{sb("s1", "q", store.StateRunning, "r1", old)},
			nil},
		{"duplicate beside the current instance",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning), inst("r9", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old)},
			[]Action{{Kind: DeleteDuplicate, SandboxID: "s1", Ref: "r9", Reason: "second instance of one sandbox"}}},
		{"backend stopped a running sandbox: follow",
			[]adapters.Instance{inst("r1", "s1", adapters.StateStopped)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old)},
			[]Action{{Kind: Follow, SandboxID: "s1", Ref: "r1", State: store.StateStopped, Reason: "stopped on the backend"}}},
		{"backend reports an error: fail with its message",
			[]adapters.Instance{{Ref: "r1", SandboxID: "s1", State: adapters.StateError, Message: "OOM killed"}},
			[]store.Sandbox{sb("s1", "p", store.StatePaused, "r1", old)},
			[]Action{{Kind: Follow, SandboxID: "s1", Ref: "r1", State: store.StateFailed, Reason: "backend reports the instance failed: OOM killed"}}},
		{"state not followed within the grace period",
			[]adapters.Instance{inst("r1", "s1", adapters.StateStopped)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", fresh)},
			nil},
		{"terminating and queued sandboxes are left to the scheduler",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning), inst("r2", "s2", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateTerminating, "r1", old), sb("s2", "p", store.StateQueued, "", old)},
			nil},
		{"an instance listed twice is adopted, not also deleted as its own duplicate",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning), inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateProvisioning, "", old)},
			[]Action{{Kind: Adopt, SandboxID: "s1", Ref: "r1"}}},
		{"a running sandbox's instance listed twice is left alone",
			[]adapters.Instance{inst("r1", "s1", adapters.StateRunning), inst("r1", "s1", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old)},
			nil},
		{"a live sandbox's own instance listed without its sandbox is not an orphan",
			[]adapters.Instance{inst("r1", "", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old)},
			nil},
		{"a live sandbox's own instance listed under another sandbox is not deleted",
			[]adapters.Instance{inst("r1", "s2", adapters.StateRunning)},
			[]store.Sandbox{sb("s1", "p", store.StateRunning, "r1", old), sb("s2", "p", store.StateRunning, "r2", old)},
			[]Action{{Kind: Lost, SandboxID: "s2", Ref: "r2", Reason: "backend instance disappeared"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]store.Sandbox{}
			for _, s := range tt.sandboxes {
				m[s.ID] = s
			}
			got := Plan("p", tt.instances, m, timing)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
