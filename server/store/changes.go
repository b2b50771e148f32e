package store

import (
	"context"
	"fmt"
)

// ChangeKind says what a Change is about.
type ChangeKind string

const (
	// ChangeSandbox: a sandbox was created or changed state. ID and State are set.
	ChangeSandbox ChangeKind = "sandbox"
	// ChangeToken: a token was deleted. ID is the token's.
	ChangeToken ChangeKind = "token"
	// ChangePolicy: the placement policy was replaced.
	ChangePolicy ChangeKind = "policy"
	// ChangeResync: changes may have been missed (the feed reconnected, say), so a
	// listener must treat everything it remembers as stale.
	ChangeResync ChangeKind = "resync"
)

// Change is one committed write, as the change feed reports it. It is a hint to look
// again, never data to act on: a listener re-reads what it cares about.
type Change struct {
	Kind  ChangeKind
	ID    string
	State State
	// Claimed, on a ChangeSandbox, says that the write left the sandbox claimed by a
	// replica, which is then working on it (a Create or a Delete in flight).
	Claimed bool
	// Err, on a ChangeResync, is why the feed broke; nil when it (re)connected.
	Err error
}

// Watcher is a store's change feed.
type Watcher interface {
	// Watch calls fn with every change committed to the store, through any replica
	// sharing its database, until ctx ends; then it returns ctx's error. Changes
	// arrive in commit order as far as the database reports them; fn is called from
	// one goroutine and must not block. When the feed breaks and resumes, fn gets a
	// ChangeResync. Watch may be called more than once; each call has its own feed.
	Watch(ctx context.Context, fn func(Change)) error
}

// SandboxChange is the change announcing sb as written.
func SandboxChange(sb Sandbox) Change {
	return Change{Kind: ChangeSandbox, ID: sb.ID, State: sb.State, Claimed: sb.ClaimedBy != ""}
}

// BatchIndex maps each ID of an UpdateSandboxes call to its index, refusing a
// repeated ID: applying fn twice to one row in one transaction has no clear meaning.
func BatchIndex(ids []string) (map[string]int, error) {
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		if _, dup := index[id]; dup {
			return nil, fmt.Errorf("store: sandbox %s is listed twice in one batch update", id)
		}
		index[id] = i
	}
	return index, nil
}

// SandboxIDs returns the IDs of sbs, in order.
func SandboxIDs(sbs []Sandbox) []string {
	ids := make([]string, len(sbs))
	for i, sb := range sbs {
		ids[i] = sb.ID
	}
	return ids
}
