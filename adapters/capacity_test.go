package adapters_test

import (
	"testing"

	"github.com/different-ai/differently/adapters"
)

func TestCapacityFits(t *testing.T) {
	type R = adapters.Resources
	tests := []struct {
		name string
		c    adapters.Capacity
		r    R
		want bool
	}{
		{"unbounded ignores figures", adapters.Capacity{FreeCPU: 0}, R{CPU: 1000, MemoryMiB: 1 << 30}, true},
		{"bounded totals fit", adapters.Capacity{Bounded: true, FreeCPU: 4, FreeMemoryMiB: 4096}, R{CPU: 4, MemoryMiB: 4096}, true},
		{"bounded cpu over", adapters.Capacity{Bounded: true, FreeCPU: 4, FreeMemoryMiB: 4096}, R{CPU: 4.5, MemoryMiB: 1}, false},
		{"bounded memory over", adapters.Capacity{Bounded: true, FreeCPU: 4, FreeMemoryMiB: 4096}, R{CPU: 1, MemoryMiB: 4097}, false},
		{"bounded full", adapters.Capacity{Bounded: true}, R{CPU: 1, MemoryMiB: 1}, false},
		{"largest fits", adapters.Capacity{Bounded: true, FreeCPU: 8, FreeMemoryMiB: 8192, LargestFreeCPU: 4, LargestFreeMemoryMiB: 4096}, R{CPU: 4, MemoryMiB: 4096}, true},
		{"fragmented cpu", adapters.Capacity{Bounded: true, FreeCPU: 8, FreeMemoryMiB: 8192, LargestFreeCPU: 2, LargestFreeMemoryMiB: 8192}, R{CPU: 3, MemoryMiB: 1}, false},
		{"fragmented memory", adapters.Capacity{Bounded: true, FreeCPU: 8, FreeMemoryMiB: 8192, LargestFreeCPU: 8, LargestFreeMemoryMiB: 1024}, R{CPU: 1, MemoryMiB: 2048}, false},
		{"largest only for cpu", adapters.Capacity{Bounded: true, FreeCPU: 8, FreeMemoryMiB: 8192, LargestFreeCPU: 2}, R{CPU: 2, MemoryMiB: 8192}, true},
		{"largest above total is capped", adapters.Capacity{Bounded: true, FreeCPU: 2, FreeMemoryMiB: 1024, LargestFreeCPU: 16, LargestFreeMemoryMiB: 1 << 20}, R{CPU: 3, MemoryMiB: 1}, false},
		{"largest reported, total zero", adapters.Capacity{Bounded: true, FreeCPU: 0, FreeMemoryMiB: 0, LargestFreeCPU: 4, LargestFreeMemoryMiB: 4096}, R{CPU: 1, MemoryMiB: 1}, false},
		{"zero request fits anywhere", adapters.Capacity{Bounded: true}, R{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Fits(tt.r); got != tt.want {
				t.Errorf("Fits(%+v) on %+v = %v, want %v", tt.r, tt.c, got, tt.want)
			}
		})
	}
}

func TestResourcesValidate(t *testing.T) {
	for _, r := range []adapters.Resources{{CPU: -0.5}, {MemoryMiB: -1}, {DiskGiB: -1}} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if err := (adapters.Resources{CPU: 0.5, MemoryMiB: 1, DiskGiB: 1}).Validate(); err != nil {
		t.Error(err)
	}
}
