package store

import (
	"testing"
	"time"
)

func TestWarmStatsQuantiles(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	var s WarmStats
	if _, ok := s.ClaimQuantile(0.5); ok {
		t.Fatal("a quantile of no claims")
	}
	s.Observe(false, time.Hour)
	if _, ok := s.ClaimQuantile(0.5); ok || s.Misses != 1 || s.Hits != 0 {
		t.Fatalf("a miss counted as a claim: %+v", s)
	}
	// Ten claims: four at most 1 ms, four in (5, 10] ms, one exactly at 25 ms (the
	// bound belongs to its bucket), one slower than the last bound.
	for _, d := range []float64{0.2, 0.5, 0.9, 1, 6, 7, 8, 9, 25, 3000} {
		s.Observe(true, ms(d))
	}
	want := []int64{4, 0, 0, 4, 1, 0, 0, 0, 0, 0, 1}
	for i, c := range s.ClaimCounts {
		if c != want[i] {
			t.Fatalf("counts %v, want %v", s.ClaimCounts, want)
		}
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.2, ms(0.5)},   // the second of four in [0, 1] ms
		{0.4, ms(1)},     // the last of them
		{0.5, ms(6.25)},  // the first of four in (5, 10] ms
		{0.8, ms(10)},    // the last of them
		{0.9, ms(25)},    // the one in (10, 25] ms
		{0.99, ms(1000)}, // beyond the last bound: the bound
	} {
		got, ok := s.ClaimQuantile(tc.q)
		if !ok || (got-tc.want).Abs() > time.Microsecond {
			t.Errorf("quantile %v = %v, want %v", tc.q, got, tc.want)
		}
	}
	var sum WarmStats
	sum.Add(WarmStats{Hits: 1, ClaimCounts: []int64{1}})
	sum.Add(s)
	if sum.Hits != 11 || sum.Misses != 1 || sum.ClaimCounts[0] != 5 || len(sum.ClaimCounts) != len(want) {
		t.Fatalf("sum %+v", sum)
	}
}
