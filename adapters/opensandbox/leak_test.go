package opensandbox

import (
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
)

// TestServerWordsNeverQuoteTheKey: the server's own account of a failure (a status
// message, a failed create) reaches errors and instance messages without the key,
// should the server quote a request in it.
func TestServerWordsNeverQuoteTheKey(t *testing.T) {
	a, srv := newAdapter(t, nil)
	ctx := t.Context()
	req := request("sbx_leak", "inst_leak")
	req.Template = "fail/" + testKey
	_, err := a.Create(ctx, req)
	if err == nil || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), adapters.Redacted) {
		t.Fatalf("failed create: %v", err)
	}

	inst, err := a.Create(ctx, request("sbx_ok", "inst_leak"))
	if err != nil {
		t.Fatal(err)
	}
	srv.SetState(inst.Ref, "Failed", "evicted; request had OPEN-SANDBOX-API-KEY: "+testKey)
	got, err := a.Get(ctx, inst.Ref)
	if err != nil || got.State != adapters.StateError || strings.Contains(got.Message, testKey) {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	list, err := a.List(ctx, "inst_leak")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if strings.Contains(in.Message, testKey) {
			t.Fatalf("List: %+v", in)
		}
	}
	if err := a.Stop(ctx, inst.Ref); err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("Stop of a failed sandbox: %v", err)
	}
}
