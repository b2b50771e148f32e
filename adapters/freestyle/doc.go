// Package freestyle runs sandboxes as Freestyle VMs through Freestyle's v5 HTTP API.
// It was written from the notes on Freestyle's SDK (../shared/specs/freestyle-v5-notes.md)
// and is tested against freestylefake, a fake server written from the same notes; it
// has not run against the real service. docs/providers/freestyle.md is the operator's
// page; this comment is the maintainer's summary.
//
// Pool config keys (ParseConfig): apiURL (default https://api.freestyle.sh), snapshot
// (the snapshotId VMs boot from; a request's template overrides it), egress ("none",
// the default, sends a firewall with no allow rule; "public" allows every address),
// domain (default style.dev, the parent of exposed-port hostnames). Unknown keys are
// invalid_request naming the key. Trust is always external.
//
// Ref is the Freestyle VM ID. Create is idempotent through the slug (Slug): a second
// POST for the same sandbox answers 409, and the VM is read back by slug and checked
// to carry the sandbox's dly-sandbox-id. After the VM runs, Create grows resources
// with /resize (Freestyle never shrinks) and writes the env to EnvFile (mode 0600),
// which every exec sources. Those steps repeat harmlessly, so a retry after a lost
// answer finishes what the first attempt left undone.
//
// List filters on the dly-installation metadata entry and pages by offset through
// totalCount, re-checking the filter locally and starting over if the set changed
// mid-way; a failing page fails the List.
//
// Exec uses exec-await; the command is wrapped in a small POSIX script (script) that
// sources the env file, exports the request's env, changes directory and execs the
// command or the quoted argument list. Timeouts are capped at MaxExecTimeout, which is
// also the default. Stop runs poweroff in the guest (there is no stop call) and polls;
// Start and Resume use /start, Pause /pause; snapshots are always reported as memory.
package freestyle
