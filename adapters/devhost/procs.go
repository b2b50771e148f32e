package devhost

import (
	"os"
	"sync"
	"syscall"
)

// proc is one running command's process group.
type proc struct {
	pgid   int
	leader *os.Process
	// What it has started is also found through these, wherever it has moved;
	// track is nil under a Jail.
	track      *tracker
	id, execID string
	fsDir      string // the sandbox's tree
	group      *execGroup

	mu     sync.Mutex
	why    error // set when Stop or Delete killed it
	reaped bool  // the group leader is gone; its pgid may be reused, so no more kills
}

// kill sends SIGKILL to the whole group; why, if set, is what the exec will return.
func (p *proc) kill(why error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if why != nil && p.why == nil {
		p.why = why
	}
	if !p.reaped {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	}
	// The leader too, by handle: it may have moved itself to another group, and
	// os.Process knows when it is gone, so this never hits a reused pid.
	_ = p.leader.Kill()
}

// exited kills what the leader left running, once, right after the leader was
// reaped. Nothing can join the group afterwards: only its members could add to it.
// Should every member already be gone, the pgid is free again; hitting a new group
// with it would take a full wrap of the pid space within microseconds.
//
// What left the group is killed after p.mu is released: that can take seconds (a
// cgroup drain, sweep rounds), and Stop and Delete take p.mu in kill while holding
// the procTable, so every command of every sandbox would wait for it. Once reaped
// is set, kill no longer touches the group, and only the first call gets here.
func (p *proc) exited() {
	p.mu.Lock()
	first := !p.reaped
	if first {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		p.reaped = true
	}
	p.mu.Unlock()
	if first && p.track != nil { // a Jail kills its own leftovers
		// Those that left the group (setsid) go too, as Info.Description says.
		p.track.killExec(p.id, p.execID, p.fsDir, p.group)
	}
}

func (p *proc) reason() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.why
}

// procTable tracks running commands per sandbox, for Stop and Delete.
type procTable struct {
	mu sync.Mutex
	m  map[string]map[*proc]struct{}
}

func (t *procTable) add(id string, p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]map[*proc]struct{})
	}
	if t.m[id] == nil {
		t.m[id] = make(map[*proc]struct{})
	}
	t.m[id][p] = struct{}{}
}

func (t *procTable) remove(id string, p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m[id], p)
	if len(t.m[id]) == 0 {
		delete(t.m, id)
	}
}

func (t *procTable) killAll(id string, why error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.m[id] {
		p.kill(why)
	}
}

// running reports how many commands of sandbox id are being tracked.
func (t *procTable) running(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m[id])
}
