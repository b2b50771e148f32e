package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/different-ai/differently/client"
)

// events --follow and ls --watch print, as one JSON object a line, what happens after
// they start, and end cleanly on Ctrl-C.
func TestFollow(t *testing.T) {
	dd := startDaemon(t)
	c := dd.cli(t)
	var before client.Sandbox
	c.json(&before, "create", "--pool", "fake", "-l", "follow=yes", "--wait")

	tests := []struct {
		name string
		args []string
		// seen reports whether a line shows the new sandbox running.
		seen func(t *testing.T, line, id string) bool
	}{
		{"events --follow", []string{"events", "--follow", "--pool", "fake"}, func(t *testing.T, line, id string) bool {
			var e client.Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("not an event: %q: %v", line, err)
			}
			return e.SandboxId == id && e.Type == "running"
		}},
		{"ls --watch", []string{"ls", "--watch", "--label", "follow=yes"}, func(t *testing.T, line, id string) bool {
			var sb client.Sandbox
			if err := json.Unmarshal([]byte(line), &sb); err != nil {
				t.Fatalf("not a sandbox: %q: %v", line, err)
			}
			if sb.Labels["follow"] != "yes" {
				t.Errorf("ls --watch --label follow=yes showed %+v", sb)
			}
			return sb.Id == id && sb.State == client.Running
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := c.command(append([]string{"-o", "json"}, tt.args...)...)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			out := lines(t, stdout)
			// The history first: the sandbox made before, running.
			var seen []string
			for {
				l, ok := <-out
				if !ok {
					t.Fatalf("output ended: %q", seen)
				}
				seen = append(seen, l)
				if tt.seen(t, l, before.Id) {
					break
				}
			}
			// Then what happens from now on, here a sandbox of another label too, which
			// ls --watch leaves out.
			c.ok("create", "--pool", "fake", "-l", "follow=no")
			var made client.Sandbox
			c.json(&made, "create", "--pool", "fake", "-l", "follow=yes")
			for {
				l, ok := <-out
				if !ok {
					t.Fatalf("output ended before %s ran: %q", made.Id, seen)
				}
				seen = append(seen, l)
				if tt.seen(t, l, made.Id) {
					break
				}
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			for range out {
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("%v ended with %v after Ctrl-C, want exit 0", tt.args, err)
			}
		})
	}
}
