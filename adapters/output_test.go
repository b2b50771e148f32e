package adapters_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestOutputBufferTruncation(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []string
		want      string
		truncated bool
	}{
		{"under limit", 5, []string{"ab", "c"}, "abc", false},
		{"exactly at limit", 5, []string{"abc", "de"}, "abcde", false},
		{"cut mid write", 5, []string{"abc", "defg"}, "abcde", true},
		{"write after full", 3, []string{"abc", "d"}, "abc", true},
		{"single oversized write", 2, []string{"abcdef"}, "ab", true},
		{"empty write at limit", 2, []string{"ab", ""}, "ab", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &adapters.OutputBuffer{Limit: tt.limit}
			for _, w := range tt.writes {
				n, err := b.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v; want the full length", w, n, err)
				}
			}
			if b.String() != tt.want || b.Truncated() != tt.truncated {
				t.Errorf("got %q truncated=%v, want %q truncated=%v", b.String(), b.Truncated(), tt.want, tt.truncated)
			}
		})
	}
}

func TestOutputBufferDefaultLimit(t *testing.T) {
	var b adapters.OutputBuffer
	b.Write([]byte(strings.Repeat("x", api.MaxExecOutputBytes)))
	if b.Truncated() {
		t.Fatal("truncated at exactly the default limit")
	}
	b.Write([]byte("y"))
	if !b.Truncated() || len(b.String()) != api.MaxExecOutputBytes {
		t.Errorf("len %d truncated %v", len(b.String()), b.Truncated())
	}
}

func TestOutputBufferConcurrent(t *testing.T) {
	b := &adapters.OutputBuffer{Limit: 1000}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for range 200 {
				b.Write([]byte("ab"))
				_ = b.String()
				_ = b.Truncated()
			}
		})
	}
	wg.Wait()
	got := b.String()
	// Writes are atomic: the buffer holds whole "ab" pairs up to the limit.
	if len(got) != 1000 || strings.Count(got, "ab") != 500 || !b.Truncated() {
		t.Errorf("len %d, pairs %d, truncated %v", len(got), strings.Count(got, "ab"), b.Truncated())
	}
}
