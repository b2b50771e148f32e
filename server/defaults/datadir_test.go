package defaults

import (
	"path/filepath"
	"testing"
)

func TestDataDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG_DATA_HOME first", map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"}, filepath.Join("/x", "differently")},
		{"else HOME", map[string]string{"HOME": "/h"}, filepath.Join("/h", ".local", "share", "differently")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DataDir(func(k string) string { return tt.env[k] })
			if err != nil || got != tt.want {
				t.Errorf("DataDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
