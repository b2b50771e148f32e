package freestyle_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/different-ai/differently/adapters/freestyle"
	"github.com/different-ai/differently/api"
)

// seed makes n VMs of installation directly on the fake, faster than Create.
func seed(t *testing.T, e *env, installation string, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("sbx_%s_%03d", installation, i)
		body, _ := json.Marshal(map[string]any{"slug": freestyle.Slug(id),
			"metadata": map[string]string{"dly-installation": installation, "dly-sandbox-id": id},
			"firewall": map[string]any{"rules": []any{}}})
		rawPost(t, e, "/v5/vms", body)
	}
}

func TestListPagesThroughEverything(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	seed(t, e, "inst_a", 230)
	seed(t, e, "inst_b", 5)
	list, err := e.a.List(t.Context(), "inst_a")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, inst := range list {
		if inst.SandboxID == "" {
			t.Fatalf("instance %+v without a sandbox ID", inst)
		}
		ids[inst.SandboxID] = true
	}
	if len(list) != 230 || len(ids) != 230 {
		t.Fatalf("listed %d instances (%d distinct), want 230", len(list), len(ids))
	}
}

func TestListFailsWhenAPageFails(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	seed(t, e, "inst_a", 150)
	e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v5/vms" && r.URL.Query().Get("offset") == "100" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	if list, err := e.a.List(t.Context(), "inst_a"); !api.IsCode(err, api.CodeProviderUnavailable) || list != nil {
		t.Fatalf("list with a failing second page: %d instances, %v", len(list), err)
	}
}

// TestListRestartsWhenTheSetChanges: a VM deleted between two pages shifts the
// offsets; the list must start over rather than silently skip a VM.
func TestListRestartsWhenTheSetChanges(t *testing.T) {
	e := newEnv(t, freestyle.Config{})
	seed(t, e, "inst_a", 150)
	victim := e.fake.VMs()[0].ID
	deleted := false
	e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v5/vms" && r.URL.Query().Get("offset") == "100" && !deleted {
			deleted = true
			del := httptest.NewRequestWithContext(r.Context(), http.MethodDelete, "/v5/vms/"+victim, nil)
			del.Header.Set("Authorization", "Bearer "+testKey)
			e.fake.Handle(httptest.NewRecorder(), del)
		}
		return false
	})
	list, err := e.a.List(t.Context(), "inst_a")
	if err != nil || len(list) != 149 {
		t.Fatalf("list after a concurrent delete: %d instances, %v; want 149", len(list), err)
	}
	// A set that never holds still fails the List instead of returning part of it.
	n := 0
	e.fake.SetIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v5/vms" && r.URL.Query().Get("offset") == "100" {
			n++ // every attempt sees a different total
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"vms":[],"totalCount":%d}`, 149+n)
			return true
		}
		return false
	})
	if _, err := e.a.List(t.Context(), "inst_a"); !api.IsCode(err, api.CodeProviderUnavailable) {
		t.Fatalf("list of a set that keeps changing: %v", err)
	}
}
