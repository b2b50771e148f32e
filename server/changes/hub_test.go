package changes

import (
	"testing"

	"github.com/different-ai/differently/server/store"
)

func woken(s *Sub) bool {
	select {
	case <-s.C:
		return true
	default:
		return false
	}
}

func TestHub(t *testing.T) {
	h := New()
	running := func(st store.State) bool { return st == store.StateRunning }
	a := h.Sandbox("sbx_a", running)
	all := h.Sandbox("sbx_a", nil)
	b := h.Sandbox("sbx_b", nil)
	var heard []store.Change
	stop := h.Listen(func(c store.Change) { heard = append(heard, c) })

	steps := []struct {
		change    store.Change
		a, all, b bool
	}{
		{store.Change{Kind: store.ChangeSandbox, ID: "sbx_a", State: store.StateProvisioning}, false, true, false},
		{store.Change{Kind: store.ChangeSandbox, ID: "sbx_a", State: store.StateRunning}, true, true, false},
		{store.Change{Kind: store.ChangeSandbox, ID: "sbx_b", State: store.StateRunning}, false, false, true},
		{store.Change{Kind: store.ChangeToken, ID: "sbx_a"}, false, false, false},
		{store.Change{Kind: store.ChangeResync}, true, true, true},
	}
	for i, st := range steps {
		h.Publish(st.change)
		if got := [3]bool{woken(a), woken(all), woken(b)}; got != [3]bool{st.a, st.all, st.b} {
			t.Fatalf("step %d (%+v): woken a, all, b = %v, want %v", i, st.change, got, [3]bool{st.a, st.all, st.b})
		}
	}
	if len(heard) != len(steps) {
		t.Fatalf("the listener heard %d changes, want %d", len(heard), len(steps))
	}

	// Wake-ups merge while one is pending; a closed Sub hears nothing more.
	h.Publish(store.Change{Kind: store.ChangeResync})
	h.Publish(store.Change{Kind: store.ChangeResync})
	if !woken(b) || woken(b) {
		t.Fatal("two pending wake-ups did not merge into one")
	}
	b.Close()
	h.Publish(store.Change{Kind: store.ChangeResync})
	if woken(b) {
		t.Fatal("a closed subscription was woken")
	}
	a.Close()
	all.Close()
	if len(h.bySandbox) != 0 {
		t.Fatalf("closed subscriptions left %d entries", len(h.bySandbox))
	}
	stop()
	h.Publish(store.Change{Kind: store.ChangePolicy})
	if len(heard) != len(steps)+3 {
		t.Fatalf("a stopped listener heard a change (%d heard)", len(heard))
	}

	select {
	case <-h.Closed():
		t.Fatal("Closed before Close")
	default:
	}
	h.Close()
	h.Close()
	<-h.Closed()
}
