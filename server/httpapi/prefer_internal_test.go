package httpapi

import "testing"

func TestPreferWait(t *testing.T) {
	tests := []struct {
		header string
		want   int
		bad    bool
	}{
		{header: "wait=10", want: 10},
		{header: "wait=0", want: 0},
		{header: "wait=60", want: 60},
		{header: " Wait = 5 ", want: 5},
		{header: `wait="7"`, want: 7},
		{header: "respond-async, wait=3", want: 3},
		{header: "return=minimal; foo=bar, wait=4; x=y", want: 4},
		{header: "wait=2, wait=9", want: 2}, // the first one counts
		{header: "return=representation", want: -1},
		{header: "waiting=5", want: -1},
		{header: "", want: -1},
		{header: ",,,", want: -1},
		{header: "wait=61", bad: true},
		{header: "wait=-1", bad: true},
		{header: "wait=+5", bad: true},
		{header: "wait=1.5", bad: true},
		{header: "wait=", bad: true},
		{header: "wait", bad: true},
		{header: "wait=99999999999999999999", bad: true},
	}
	for _, tt := range tests {
		h := Prefer(tt.header)
		got, err := preferWait(&h)
		if (err != nil) != tt.bad || !tt.bad && got != tt.want {
			t.Errorf("Prefer %q = %d, %v; want %d, bad %v", tt.header, got, err, tt.want, tt.bad)
		}
	}
	if got, err := preferWait(nil); got != -1 || err != nil {
		t.Errorf("no Prefer header = %d, %v", got, err)
	}
}
