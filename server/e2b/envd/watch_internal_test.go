package envd

import (
	"strings"
	"testing"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/server/e2b/envd/gen/filesystempb"
)

func TestDiffSnapshots(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	file := func(size int64, mode uint32, mod time.Time) adapters.FileInfo {
		return adapters.FileInfo{Name: "x", Size: size, Mode: mode, ModTime: mod}
	}
	dir := func(mod time.Time) adapters.FileInfo {
		return adapters.FileInfo{Name: "x", IsDir: true, Mode: 0o755, ModTime: mod}
	}
	a := file(1, 0o644, t0)
	tests := []struct {
		name     string
		old, cur snapshot
		want     string
	}{
		{"nothing changed", snapshot{"a": a, "d": dir(t0)}, snapshot{"a": a, "d": dir(t0)}, ""},
		{"created", snapshot{}, snapshot{"b": a, "a": file(2, 0o644, t0)}, "CREATE:a CREATE:b"},
		{"removed", snapshot{"a": a, "d": dir(t0)}, snapshot{}, "REMOVE:a REMOVE:d"},
		{"written: size", snapshot{"a": a}, snapshot{"a": file(2, 0o644, t0)}, "WRITE:a"},
		{"written: time", snapshot{"a": a}, snapshot{"a": file(1, 0o644, t0.Add(time.Nanosecond))}, "WRITE:a"},
		{"chmod", snapshot{"a": a}, snapshot{"a": file(1, 0o600, t0)}, "CHMOD:a"},
		{"written and chmod", snapshot{"a": a}, snapshot{"a": file(3, 0o600, t0)}, "WRITE:a CHMOD:a"},
		{"a directory's time is not an event", snapshot{"d": dir(t0)}, snapshot{"d": dir(t0.Add(time.Second))}, ""},
		{"file became a directory", snapshot{"a": a}, snapshot{"a": dir(t0)}, "REMOVE:a CREATE:a"},
		{"renamed", snapshot{"a": a}, snapshot{"sub/b": a}, "RENAME:a CREATE:sub/b"},
		{"renamed directory", snapshot{"d": dir(t0)}, snapshot{"e": dir(t0)}, "RENAME:d CREATE:e"},
		{"two alike gone: not a rename", snapshot{"a": a, "b": a}, snapshot{"c": a}, "REMOVE:a REMOVE:b CREATE:c"},
		{"two alike came: not a rename", snapshot{"a": a}, snapshot{"b": a, "c": a}, "REMOVE:a CREATE:b CREATE:c"},
		{"different content: not a rename", snapshot{"a": a}, snapshot{"b": file(1, 0o644, t0.Add(time.Second))}, "REMOVE:a CREATE:b"},
		{"no time: not a rename", snapshot{"a": file(1, 0o644, time.Time{})}, snapshot{"b": file(1, 0o644, time.Time{})}, "REMOVE:a CREATE:b"},
		{"a type change is no half of a rename", snapshot{"a": a, "b": dir(t0)}, snapshot{"b": a}, "REMOVE:a REMOVE:b CREATE:b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, ev := range diffSnapshots(tt.old, tt.cur) {
				got = append(got, strings.TrimPrefix(ev.Type.String(), "EVENT_TYPE_")+":"+ev.Name)
				if ev.Type == filesystempb.EventType_EVENT_TYPE_UNSPECIFIED {
					t.Fatalf("unspecified event %v", ev)
				}
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Fatalf("events %q, want %q", s, tt.want)
			}
		})
	}
}
