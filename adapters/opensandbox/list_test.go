package opensandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/different-ai/differently/api"
)

// pagedServer serves ids in pages, calling after(page) once a page is written.
func pagedServer(t *testing.T, ids *[]string, after func(page int)) *Adapter {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		size, _ := strconv.Atoi(r.URL.Query().Get("pageSize"))
		from, to := min((page-1)*size, len(*ids)), min(page*size, len(*ids))
		items := []map[string]any{}
		for _, id := range (*ids)[from:to] {
			items = append(items, map[string]any{"id": id, "status": map[string]any{"state": "Running"},
				"metadata": map[string]string{MetaInstallation: "inst_1", MetaSandboxID: "sbx_" + id}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items,
			"pagination": map[string]any{"page": page, "pageSize": size, "hasNextPage": to < len(*ids), "totalItems": len(*ids)}})
		after(page)
	}))
	t.Cleanup(srv.Close)
	a, err := New(Config{APIURL: srv.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A sandbox deleted between two pages shifts the next ones back a page: the list
// is read again rather than returned without the one that moved; one that changes
// at every read fails rather than come back partial.
func TestListReadsAgainWhenPagesShift(t *testing.T) {
	var ids []string
	for i := range 51 {
		ids = append(ids, fmt.Sprintf("os-%02d", i))
	}
	deleted := false
	a := pagedServer(t, &ids, func(page int) {
		if page == 1 && !deleted {
			deleted = true
			ids = append(ids[:3:3], ids[4:]...) // os-03 deleted meanwhile
		}
	})
	list, err := a.List(context.Background(), "inst_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 50 {
		t.Fatalf("listed %d instances, want the 50 left", len(list))
	}
	seen := map[string]bool{}
	for _, in := range list {
		seen[in.Ref] = true
	}
	if !seen["os-50"] || seen["os-03"] {
		t.Fatalf("listed %v", seen)
	}

	n := 0
	churn := pagedServer(t, &ids, func(page int) {
		if page == 1 {
			n++
			ids = append(ids, fmt.Sprintf("new-%d", n)) // created at every read
		}
	})
	churn.pageSize = 10
	if _, err := churn.List(context.Background(), "inst_1"); api.CodeOf(err) != api.CodeProviderUnavailable {
		t.Fatalf("a list that never holds still: %v", err)
	}
}

// A server that leaves totalItems out is listed without the check.
func TestListWithoutTotalItems(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"items":[{"id":"os-1","status":{"state":"Running"},"metadata":{"`+MetaInstallation+
			`":"inst_1"}}],"pagination":{"hasNextPage":false}}`)
	}))
	t.Cleanup(srv.Close)
	a, err := New(Config{APIURL: srv.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	if list, err := a.List(context.Background(), "inst_1"); err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v", list, err)
	}
}
