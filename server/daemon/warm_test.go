package daemon_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/different-ai/differently/internal/pgtest"
)

type warmPool struct {
	Warm []struct {
		Size int `json:"size"`
	} `json:"warm"`
	WarmStatus []warmStatus `json:"warmStatus"`
}

type warmStatus struct {
	Template string `json:"template"`
	Target   int    `json:"target"`
	Ready    int    `json:"ready"`
	Starting int    `json:"starting"`
	Hits     int64  `json:"hits"`
	Misses   int64  `json:"misses"`
	// ClaimP50Ms and ClaimP99Ms are absent before the first hit.
	ClaimP50Ms *float64 `json:"claimP50Ms"`
	ClaimP99Ms *float64 `json:"claimP99Ms"`
}

// waitWarm waits, pass by pass of the scheduler, until the pool's only warm shape has
// ready sandboxes ready and none starting.
func (r *replica) waitWarm(pool string, ready int) {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var p warmPool
		r.call("GET", "/v1/admin/pools/"+pool, nil, 200, &p)
		if len(p.WarmStatus) == 1 && p.WarmStatus[0].Ready == ready && p.WarmStatus[0].Starting == 0 {
			return
		}
		select {
		case <-r.passes:
		case <-deadline:
			r.t.Fatalf("pool %s: warm status %+v after 30 s, want %d ready", pool, p.WarmStatus, ready)
		}
	}
}

// waitHits waits, pass by pass of the scheduler, until the pool's only warm shape
// has counted hits, and returns its status.
func (r *replica) waitHits(pool string, hits int64) warmStatus {
	r.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var p warmPool
		r.call("GET", "/v1/admin/pools/"+pool, nil, 200, &p)
		if len(p.WarmStatus) == 1 && p.WarmStatus[0].Hits >= hits {
			if p.WarmStatus[0].Hits > hits {
				r.t.Fatalf("pool %s: %d hits, want %d", pool, p.WarmStatus[0].Hits, hits)
			}
			return p.WarmStatus[0]
		}
		select {
		case <-r.passes:
		case <-deadline:
			r.t.Fatalf("pool %s: warm status %+v after 30 s, want %d hits", pool, p.WarmStatus, hits)
		}
	}
}

type warmSandbox struct {
	ID         string            `json:"id"`
	State      string            `json:"state"`
	Pool       string            `json:"pool"`
	BackendRef string            `json:"backendRef"`
	Labels     map[string]string `json:"labels"`
	ExpiresAt  *time.Time        `json:"expiresAt"`
}

// A pool keeps its warm shape filled; a create asking for that shape is answered
// with one, already running, under the warm sandbox's ID and instance, with its own
// labels and TTL, and the pool starts another; a create the shape does not match, or
// one with its own environment, is created cold; a shape set to size 0 is emptied.
func TestWarmPool(t *testing.T) {
	for _, st := range []struct{ name, url string }{{"sqlite", ""}, {"postgres", pgtest.SchemaURL(t)}} {
		t.Run(st.name, func(t *testing.T) {
			r := start(t, t.TempDir(), st.url)
			r.call("POST", "/v1/admin/pools", map[string]any{
				"name": "warmfake", "adapter": "fake", "trust": "private",
				"warm": []map[string]any{{"template": "python", "resources": map[string]any{"cpu": 1}, "size": 2}},
			}, 201, nil)
			r.waitWarm("warmfake", 2)
			var before warmPool
			r.call("GET", "/v1/admin/pools/warmfake", nil, 200, &before)
			if w := before.WarmStatus[0]; w.Hits != 0 || w.Misses != 0 || w.ClaimP50Ms != nil || w.ClaimP99Ms != nil {
				t.Fatalf("warm status before any create: %+v, want no hits, misses or claim times", w)
			}

			onPool := map[string]any{"allowedPools": []string{"warmfake"}}
			var sb warmSandbox
			r.call("POST", "/v1/sandboxes", map[string]any{"template": "python", "resources": map[string]any{"cpu": 1},
				"placement": onPool, "labels": map[string]string{"team": "a"}, "ttlSeconds": 600}, 202, &sb)
			if sb.State != "running" || sb.Pool != "warmfake" || sb.BackendRef == "" || sb.Labels["differently.dev/warm"] != "true" ||
				sb.Labels["team"] != "a" || sb.ExpiresAt == nil {
				t.Fatalf("a create matching the warm shape: %+v, want it running at once, warm, with its labels and TTL", sb)
			}
			var events struct {
				Items []struct {
					Type string `json:"type"`
				} `json:"items"`
			}
			r.call("GET", "/v1/sandboxes/"+sb.ID+"/events", nil, 200, &events)
			last := events.Items[len(events.Items)-1].Type
			if last != "claimed" {
				t.Fatalf("events %+v, want the claim last", events.Items)
			}
			res := r.exec(sb.ID, "true")
			if res.ExitCode != 0 {
				t.Fatalf("exec in the claimed sandbox: %+v", res)
			}
			// The pool starts another, and its answer counts the hit once the filler
			// has recorded it (at the pass that starts the refill, as a rule).
			r.waitWarm("warmfake", 2)
			w := r.waitHits("warmfake", 1)
			if w.Misses != 0 || w.ClaimP50Ms == nil || *w.ClaimP50Ms <= 0 || w.ClaimP99Ms == nil || *w.ClaimP99Ms < *w.ClaimP50Ms {
				t.Fatalf("warm status after one claim: %+v, want one hit with its claim's time", w)
			}

			var cold warmSandbox
			r.call("POST", "/v1/sandboxes", map[string]any{"template": "python", "resources": map[string]any{"cpu": 1},
				"placement": onPool, "env": map[string]string{"K": "v"}}, 202, &cold)
			if cold.Labels["differently.dev/warm"] != "" {
				t.Fatalf("a create with its own environment was served warm: %+v", cold)
			}
			var other warmSandbox
			r.call("POST", "/v1/sandboxes", map[string]any{"template": "node", "placement": onPool}, 202, &other)
			if other.Labels["differently.dev/warm"] != "" {
				t.Fatalf("a create of another template was served warm: %+v", other)
			}

			r.call("PATCH", "/v1/admin/pools/warmfake", map[string]any{
				"warm": []map[string]any{{"template": "python", "resources": map[string]any{"cpu": 1}, "size": 0}}}, 200, nil)
			r.waitWarm("warmfake", 0)
			for _, id := range []string{sb.ID, cold.ID, other.ID} {
				if got := r.waitState(id, "running"); got.State != "running" {
					t.Fatal(fmt.Sprintf("sandbox %s: %s", id, got.State))
				}
			}
		})
	}
}

// A pool whose only sandboxes are warm is deleted in one call, its warm sandboxes
// ended with it; a tenant's sandbox, even one served warm, still refuses the delete,
// and the pool keeps its warm shape meanwhile.
func TestDeletePoolWithWarm(t *testing.T) {
	for _, st := range []struct{ name, url string }{{"sqlite", ""}, {"postgres", pgtest.SchemaURL(t)}} {
		t.Run(st.name, func(t *testing.T) {
			r := start(t, t.TempDir(), st.url)
			r.call("POST", "/v1/admin/pools", map[string]any{
				"name": "warmdel", "adapter": "fake", "trust": "private",
				"warm": []map[string]any{{"template": "python", "resources": map[string]any{"cpu": 1}, "size": 2}},
			}, 201, nil)
			r.waitWarm("warmdel", 2)
			var sb warmSandbox
			r.call("POST", "/v1/sandboxes", map[string]any{"template": "python", "resources": map[string]any{"cpu": 1},
				"placement": map[string]any{"allowedPools": []string{"warmdel"}}}, 202, &sb)
			if sb.Labels["differently.dev/warm"] != "true" {
				t.Fatalf("create matching the warm shape: %+v, want it served warm", sb)
			}
			r.waitWarm("warmdel", 2)

			var refused struct {
				Error struct {
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			r.call("DELETE", "/v1/admin/pools/warmdel", nil, 409, &refused)
			if refused.Error.Details["sandboxes"] != float64(1) {
				t.Fatalf("delete with a tenant's sandbox: %+v, want details.sandboxes 1", refused)
			}
			r.waitWarm("warmdel", 2)

			r.call("DELETE", "/v1/sandboxes/"+sb.ID, nil, 202, nil)
			r.waitState(sb.ID, "terminated")
			r.call("DELETE", "/v1/admin/pools/warmdel", nil, 204, nil)
			r.call("GET", "/v1/admin/pools/warmdel", nil, 404, nil)
		})
	}
}
