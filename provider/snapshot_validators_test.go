package provider

import "testing"

// The snapshot's kind is one the daemon knows.
func TestSnapshotValidators(t *testing.T) {
	checkValidators(t, newSnapshotResource(), []validatorCase{
		{"kind", "disk", true},
		{"kind", "memory", true},
		{"kind", "both", false},
	})
}
