package poolstest_test

import (
	"slices"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/pools/poolstest"
	"github.com/different-ai/differently/server/store"
)

func named(name string) pools.View { return pools.View{Pool: store.Pool{Name: name}, Healthy: true} }

func names(vs []pools.View) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Pool.Name)
	}
	return out
}

func TestViews(t *testing.T) {
	p := poolstest.New(named("b"), named("a"))
	p.Set(named("c"))
	p.Set(pools.View{Pool: store.Pool{Name: "a"}})
	if got, want := names(p.Views()), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Views = %v, want %v", got, want)
	}
	if v, ok := p.View("a"); !ok || v.Healthy {
		t.Errorf("View(a) = %+v, %v; want the view Set last", v, ok)
	}
	if !p.Update("b", func(v *pools.View) { v.Healthy = false }) || p.Update("zz", func(*pools.View) {}) {
		t.Error("Update reports a pool it lacks, or misses one it has")
	}
	if v, _ := p.View("b"); v.Healthy {
		t.Error("Update did not change the view")
	}
	views := p.Views()
	views[0].Healthy = true
	if v, _ := p.View("a"); v.Healthy {
		t.Error("a change to the slice Views returned reached the source")
	}
	p.Replace(named("z"))
	if got := names(p.Views()); !slices.Equal(got, []string{"z"}) {
		t.Errorf("after Replace: %v", got)
	}
}

func TestRecords(t *testing.T) {
	p := poolstest.New(named("a"))
	if _, ok := p.BeginCreate("a"); !ok {
		t.Fatal("BeginCreate refused")
	}
	p.EndCreate(pools.CreateTicket{}, pools.CreateOutage, nil)
	p.MarkUnhealthy("a", nil)
	if !slices.Equal(p.Outcomes(), []pools.CreateOutcome{pools.CreateOutage}) || !slices.Equal(p.Marked(), []string{"a"}) {
		t.Errorf("outcomes %v, marked %v", p.Outcomes(), p.Marked())
	}
	if v, _ := p.View("a"); !v.Healthy {
		t.Error("MarkUnhealthy changed the view")
	}
}

func TestLiveCapacity(t *testing.T) {
	fk := fake.New(fake.Config{TotalCPU: 4, TotalMemoryMiB: 4096})
	want, err := fk.Capacity(t.Context())
	if err != nil || !want.Bounded {
		t.Fatalf("the fake's capacity: %+v, %v", want, err)
	}
	v := named("a")
	v.Adapter = fk
	p := poolstest.New(v)
	if got, _ := p.View("a"); got.Capacity != (adapters.Capacity{}) {
		t.Errorf("capacity %+v without LiveCapacity, want the view's", got.Capacity)
	}
	p.LiveCapacity = true
	if got, _ := p.View("a"); got.Capacity != want {
		t.Errorf("capacity %+v with LiveCapacity, want the adapter's %+v", got.Capacity, want)
	}
}
