package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/client"
)

func (a *app) sandboxCmds() []*cobra.Command {
	return []*cobra.Command{
		a.createCmd(), a.lsCmd(), a.getCmd(), a.execCmd(), a.runCmd(), a.cpCmd(),
		a.lifecycleCmd("stop", "Stop sandboxes, keeping their disk", client.Stopped, (*client.Client).StopSandbox),
		a.lifecycleCmd("start", "Start stopped sandboxes", client.Running, (*client.Client).StartSandbox),
		a.lifecycleCmd("pause", "Freeze sandboxes, keeping their memory", client.Paused, (*client.Client).PauseSandbox),
		a.lifecycleCmd("resume", "Resume paused sandboxes", client.Running, (*client.Client).ResumeSandbox),
		a.snapshotCmd(), a.forkCmd(), a.rmCmd(), a.eventsCmd(), a.ttlCmd(),
	}
}

// createFlags are the flags of a new sandbox, shared by create and run.
type createFlags struct {
	pools, labels, env, caps []string
	template, profile        string
	project, org             string
	cpu                      float64
	memoryMiB, diskGiB       int64
	ttl                      time.Duration
	idempotencyKey           string
}

func (a *app) addCreateFlags(cmd *cobra.Command, f *createFlags) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.pools, "pool", nil, "place it only on these `pools` (repeat or comma-separate)")
	fl.StringVar(&f.template, "template", "", "the template (image) to start from")
	fl.StringVar(&f.profile, "profile", "", "a profile whose capabilities, resources, template and TTL fill what is not given")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "a `key=value` label (repeat)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "a `NAME=value` environment variable of the sandbox (repeat)")
	fl.StringSliceVar(&f.caps, "capability", nil, "required `capabilities` (repeat or comma-separate)")
	fl.Float64Var(&f.cpu, "cpu", 0, "vCPUs (0: the pool's default)")
	fl.Int64Var(&f.memoryMiB, "memory", 0, "memory in `MiB` (0: the pool's default)")
	fl.Int64Var(&f.diskGiB, "disk", 0, "disk in `GiB` (0: the pool's default)")
	fl.DurationVar(&f.ttl, "ttl", -1, "lifetime once running, such as 30m or 2h; 0: no expiry")
	fl.StringVar(&f.project, "project", "", "admin tokens only: the project to create it in")
	fl.StringVar(&f.org, "org", "", "admin tokens only: the project's organisation")
	fl.StringVar(&f.idempotencyKey, "idempotency-key", "", "a `key` that makes a repeated create return the same sandbox")
	_ = cmd.RegisterFlagCompletionFunc("pool", a.completePools)
	cmd.Flags().Lookup("ttl").DefValue = "the profile's or the policy's"
}

func (f *createFlags) body() (client.SandboxCreate, error) {
	var b client.SandboxCreate
	if len(f.pools) > 0 {
		b.Placement = &client.Placement{AllowedPools: &f.pools}
	}
	set := func(dst **string, v string) {
		if v != "" {
			*dst = &v
		}
	}
	set(&b.Template, f.template)
	set(&b.Profile, f.profile)
	set(&b.Project, f.project)
	set(&b.Org, f.org)
	labels, err := pairs("--label", f.labels)
	if err != nil {
		return b, err
	}
	if labels != nil {
		b.Labels = &labels
	}
	env, err := pairs("--env", f.env)
	if err != nil {
		return b, err
	}
	if env != nil {
		b.Env = &env
	}
	if len(f.caps) > 0 {
		b.Capabilities = &f.caps
	}
	if f.cpu != 0 || f.memoryMiB != 0 || f.diskGiB != 0 {
		b.Resources = &adapters.Resources{CPU: f.cpu, MemoryMiB: f.memoryMiB, DiskGiB: f.diskGiB}
	}
	if f.ttl >= 0 {
		secs := int64(f.ttl / time.Second)
		if f.ttl%time.Second != 0 {
			return b, usagef("--ttl %s: whole seconds only", f.ttl)
		}
		b.TtlSeconds = &secs
	}
	return b, nil
}

// pairs reads key=value flags.
func pairs(flag string, vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vals))
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flag, v)
		}
		m[k] = val
	}
	return m, nil
}

// newKey is an idempotency key for one create: a retry after a lost answer, and the
// cleanup after a Ctrl-C during the create, find the sandbox it made.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

func (a *app) createCmd() *cobra.Command {
	var f createFlags
	var wait bool
	var waitTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox",
		Example: `  differently create --pool devhost --template devhost --ttl 1h --wait
  ID=$(differently create -l ci=build-42 --wait -o id)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body, err := f.body()
			if err != nil {
				return err
			}
			key := f.idempotencyKey
			if key == "" {
				key = newKey()
			}
			sb, err := c.CreateSandbox(a.ctx, body, key)
			if err != nil {
				return err
			}
			if wait {
				id := sb.Id
				if sb, err = a.waitFor(c, sb, waitTimeout, client.Running); err != nil {
					if errors.Is(err, errInterrupted) {
						a.progress("sandbox %s was created and stays; `differently rm %s` deletes it", id, id)
					}
					return err
				}
			}
			return a.emitSandboxes([]client.Sandbox{*sb}, sb)
		},
	}
	a.addCreateFlags(cmd, &f)
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "wait until it runs")
	cmd.Flags().DurationVar(&waitTimeout, "wait-timeout", 0, "give up waiting after this long (0: no limit)")
	return cmd
}

// waitFor waits for sb to reach one of states, with a spinner, up to timeout (0: no
// limit). A Ctrl-C ends the wait with errInterrupted.
func (a *app) waitFor(c *client.Client, sb *client.Sandbox, timeout time.Duration, states ...client.SandboxState) (*client.Sandbox, error) {
	if slices.Contains(states, sb.State) {
		return sb, nil
	}
	ctx := a.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	sp := a.spin(fmt.Sprintf("waiting for sandbox %s to be %s (it is %s)", sb.Id, strings.Join(names, " or "), sb.State))
	got, err := c.WaitForState(ctx, sb.Id, states...)
	sp.end()
	if err != nil {
		if a.ctx.Err() != nil {
			return got, errInterrupted
		}
		if errors.Is(err, context.DeadlineExceeded) {
			state := sb.State
			if got != nil {
				state = got.State
			}
			return got, fmt.Errorf("waiting for sandbox %s to be %s: gave up after %s, it is %s: %w",
				sb.Id, strings.Join(names, " or "), timeout, state, context.DeadlineExceeded)
		}
		return got, err
	}
	return got, nil
}

// emitSandboxes shows sandboxes as a table, or v (a sandbox or a page) as JSON or YAML.
func (a *app) emitSandboxes(list []client.Sandbox, v any) error {
	return a.emit(v, a.sandboxTable(list))
}

func (a *app) sandboxTable(list []client.Sandbox) *table {
	now := time.Now()
	t := a.table("ID", "STATE", "POOL", "TEMPLATE", "PROJECT", "AGE", "EXPIRES", "LABELS")
	for _, sb := range list {
		expires := ""
		if sb.ExpiresAt != nil {
			expires = "in " + short(sb.ExpiresAt.Sub(now))
		}
		state := string(sb.State)
		if sb.State == client.Failed && sb.Reason != nil {
			state += ": " + *sb.Reason
		}
		t.rowc(cell{text: sb.Id}, cell{text: state, colour: stateColour(string(sb.State))},
			cell{text: deref(sb.Pool)}, cell{text: deref(sb.Template)}, cell{text: sb.Org + "/" + sb.Project},
			cell{text: ago(sb.CreatedAt, now)}, cell{text: expires}, cell{text: labelText(sb.Labels)})
		t.id(sb.Id)
	}
	return t
}

func labelText(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func (a *app) lsCmd() *cobra.Command {
	var states, labels []string
	var pool, project string
	var limit int
	var watch bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Long: `List sandboxes, oldest first: all of them, page after page, or those the filters
select. Terminated sandboxes are left out unless --state names them. With --watch, the
list is followed: a line (or with -o json a JSON object) for each sandbox as it changes,
until Ctrl-C.`,
		Example: `  differently ls --state running --label ci=build-42
  differently ls -o id --pool devhost | xargs -r differently rm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			params := client.ListSandboxesParams{}
			// A watch with no --state shows every change, the end included.
			var watchStates []client.SandboxState
			if len(states) > 0 {
				for _, s := range states {
					watchStates = append(watchStates, client.SandboxState(s))
				}
			}
			if len(states) == 0 {
				states = []string{"queued", "provisioning", "running", "stopped", "paused", "terminating", "failed"}
			}
			st := make([]client.SandboxState, len(states))
			for i, s := range states {
				st[i] = client.SandboxState(s)
			}
			params.State = &st
			if len(labels) > 0 {
				params.Label = &labels
			}
			if pool != "" {
				params.Pool = &pool
			}
			if project != "" {
				params.Project = &project
			}
			var follow client.ListEventsParams
			if watch {
				if pool != "" {
					follow.Pool = &pool
				}
				if project != "" {
					follow.Project = &project
				}
				cursor, err := a.eventsNow(c, follow)
				if err != nil {
					return err
				}
				follow.Cursor = &cursor
			}
			all, err := collectPages(limit, func(cursor *string) ([]client.Sandbox, *string, error) {
				params.Cursor = cursor
				page, err := c.ListSandboxes(a.ctx, &params)
				if err != nil {
					return nil, nil, err
				}
				return page.Items, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			if !watch {
				return a.emitSandboxes(all, map[string]any{"items": orEmpty(all)})
			}
			return a.watchSandboxes(c, all, follow, watchStates, labels)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&states, "state", nil, "only these `states` (repeat or comma-separate; default: all but terminated)")
	fl.StringArrayVarP(&labels, "label", "l", nil, "only sandboxes with this `key=value` label (repeat)")
	fl.StringVar(&pool, "pool", "", "only this pool's")
	fl.StringVar(&project, "project", "", "admin tokens only: only this project's")
	fl.IntVar(&limit, "limit", 0, "at most this many (0: all)")
	fl.BoolVarP(&watch, "watch", "w", false, "then follow the changes until Ctrl-C")
	_ = cmd.RegisterFlagCompletionFunc("pool", a.completePools)
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(
		[]string{"queued", "provisioning", "running", "stopped", "paused", "terminating", "terminated", "failed"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// eventsNow is the cursor of the newest event recorded, from which a watch follows:
// taken before the list it follows, so that no change falls between the two.
func (a *app) eventsNow(c *client.Client, params client.ListEventsParams) (string, error) {
	params.Limit = ptr(1000)
	for {
		page, err := c.ListEvents(a.ctx, &params)
		if err != nil {
			return "", err
		}
		if len(page.Items) < 1000 || page.NextCursor == "" {
			return page.NextCursor, nil
		}
		params.Cursor = &page.NextCursor
	}
}

// watchSandboxes prints the list, then each sandbox again as the daemon's events
// say it changed, until Ctrl-C (which ends it with success: it is how a watch ends).
// A table's later rows keep the columns of the first ones.
func (a *app) watchSandboxes(c *client.Client, all []client.Sandbox, params client.ListEventsParams, states []client.SandboxState, labels []string) error {
	structured := a.output == "json" || a.output == "yaml"
	var live *liveTable
	if structured {
		for _, sb := range all {
			if err := a.emitCompact(sb); err != nil {
				return err
			}
		}
	} else {
		// Room for the longest state from the start.
		var err error
		if live, err = a.startLive(a.sandboxTable(all), map[int]int{1: len("provisioning")}); err != nil {
			return err
		}
	}
	want, err := pairs("--label", labels)
	if err != nil {
		return err
	}
	for ev, err := range c.FollowEvents(a.ctx, &params) {
		if err != nil {
			if a.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if states != nil && !slices.Contains(states, ev.To) {
			continue
		}
		sb, err := c.GetSandbox(a.ctx, ev.SandboxId)
		if err != nil {
			if client.IsNotFound(err) {
				continue
			}
			if a.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !hasLabels(sb.Labels, want) {
			continue
		}
		// The event's state, not the sandbox's now: a later event shows that one.
		sb.State = ev.To
		if structured {
			err = a.emitCompact(sb)
		} else {
			err = live.add(a.sandboxTable([]client.Sandbox{*sb}))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }

func (a *app) getCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "get ID",
		Short:             "Show a sandbox",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sb, err := c.GetSandbox(a.ctx, args[0])
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.emitSandboxes([]client.Sandbox{*sb}, sb)
			}
			return a.describe(sb)
		},
	}
}

// describe shows one sandbox as labelled lines, the table's columns and more.
func (a *app) describe(sb *client.Sandbox) error {
	now := time.Now()
	t := a.table("FIELD", "VALUE")
	add := func(k, v string, colour int) {
		if v != "" {
			t.rowc(cell{text: k, colour: bold}, cell{text: v, colour: colour})
		}
	}
	add("id", sb.Id, 0)
	add("state", string(sb.State), stateColour(string(sb.State)))
	add("reason", deref(sb.Reason), 0)
	add("project", sb.Org+"/"+sb.Project, 0)
	add("pool", deref(sb.Pool), 0)
	add("region", deref(sb.Region), 0)
	add("template", deref(sb.Template), 0)
	add("profile", deref(sb.Profile), 0)
	add("capabilities", strings.Join(sb.Capabilities, ","), 0)
	r := sb.Resources
	if r.CPU != 0 || r.MemoryMiB != 0 || r.DiskGiB != 0 {
		add("resources", fmt.Sprintf("cpu %g, memory %d MiB, disk %d GiB", r.CPU, r.MemoryMiB, r.DiskGiB), 0)
	}
	add("labels", labelText(sb.Labels), 0)
	add("created", sb.CreatedAt.Local().Format(time.RFC3339)+" ("+ago(sb.CreatedAt, now)+" ago)", 0)
	if sb.ExpiresAt != nil {
		add("expires", sb.ExpiresAt.Local().Format(time.RFC3339)+" (in "+short(sb.ExpiresAt.Sub(now))+")", 0)
	}
	add("from snapshot", deref(sb.FromSnapshot), 0)
	add("attempts", fmt.Sprint(sb.Attempts), 0)
	if sb.Cost != nil {
		add("cost", fmt.Sprintf("%.4f", *sb.Cost), 0)
	}
	return a.emitTo(a.io.out, sb, t, false)
}

// lifecycleCmd is stop, start, pause or resume: one call per sandbox, then with
// --wait until each reaches the state the call leads to.
func (a *app) lifecycleCmd(name, short string, to client.SandboxState, call func(*client.Client, context.Context, string) (*client.Sandbox, error)) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:               name + " ID...",
		Short:             short,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var done []client.Sandbox
			var errs []error
			for _, id := range args {
				sb, err := call(c, a.ctx, id)
				if err == nil && wait {
					sb, err = a.waitFor(c, sb, 0, to)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %w", name, id, err))
					continue
				}
				done = append(done, *sb)
			}
			if len(done) > 0 {
				if err := a.emitSandboxes(done, listOrOne(done)); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "wait until each is "+string(to))
	return cmd
}

// listOrOne is what -o json shows of sandboxes named on the command line: the
// sandbox for one, a list for several.
func listOrOne(l []client.Sandbox) any {
	if len(l) == 1 {
		return l[0]
	}
	return map[string]any{"items": l}
}

func (a *app) rmCmd() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:               "rm ID...",
		Aliases:           []string{"delete"},
		Short:             "Delete sandboxes",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var done []client.Sandbox
			var errs []error
			for _, id := range args {
				var sb *client.Sandbox
				if wait {
					sp := a.spin("deleting sandbox " + id)
					sb, err = c.DeleteSandboxAndWait(a.ctx, id)
					sp.end()
				} else {
					sb, err = c.DeleteSandbox(a.ctx, id)
				}
				if err != nil {
					if a.ctx.Err() != nil {
						return errInterrupted
					}
					errs = append(errs, fmt.Errorf("rm %s: %w", id, err))
					continue
				}
				done = append(done, *sb)
			}
			if len(done) > 0 {
				if err := a.emitSandboxes(done, listOrOne(done)); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "wait until each is terminated")
	return cmd
}

func (a *app) ttlCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ttl ID DURATION",
		Short: "Set a sandbox's time to live, counted from now (0: no expiry)",
		Example: `  differently ttl sb_01J... 2h
  differently ttl sb_01J... 0`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := time.ParseDuration(args[1])
			if args[1] == "0" {
				d, err = 0, nil
			}
			if err != nil || d < 0 || d%time.Second != 0 {
				return usagef("DURATION %q: want whole seconds such as 90s, 30m or 2h, or 0", args[1])
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			secs := int64(d / time.Second)
			sb, err := c.PatchSandbox(a.ctx, args[0], client.SandboxPatch{TtlSeconds: &secs})
			if err != nil {
				return err
			}
			return a.emitSandboxes([]client.Sandbox{*sb}, sb)
		},
	}
}

func (a *app) forkCmd() *cobra.Command {
	var kind string
	var labels []string
	var ttl time.Duration
	var wait bool
	cmd := &cobra.Command{
		Use:               "fork ID",
		Short:             "Snapshot a sandbox and start a new one from the snapshot, on the same pool",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var body client.ForkRequest
			if kind != "" {
				k := client.ForkRequestKind(kind)
				body.Kind = &k
			}
			l, err := pairs("--label", labels)
			if err != nil {
				return err
			}
			if l != nil {
				body.Labels = &l
			}
			if ttl >= 0 {
				secs := int64(ttl / time.Second)
				body.TtlSeconds = &secs
			}
			sb, err := c.ForkSandbox(a.ctx, args[0], body)
			if err != nil {
				return err
			}
			if wait {
				if sb, err = a.waitFor(c, sb, 0, client.Running); err != nil {
					return err
				}
			}
			return a.emitSandboxes([]client.Sandbox{*sb}, sb)
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "snapshot kind: disk or memory (default: disk when the pool has it)")
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "a `key=value` label of the new sandbox (repeat)")
	cmd.Flags().DurationVar(&ttl, "ttl", -1, "the new sandbox's lifetime")
	cmd.Flags().Lookup("ttl").DefValue = "the original's rules"
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "wait until the new sandbox runs")
	return cmd
}

func (a *app) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Create, list, show and delete snapshots",
	}
	var kind string
	create := &cobra.Command{
		Use:               "create ID",
		Short:             "Snapshot a sandbox",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			snap, err := c.CreateSnapshot(a.ctx, args[0], kind)
			if err != nil {
				return err
			}
			return a.emit(snap, snapshotTable(a, []client.Snapshot{*snap}))
		},
	}
	create.Flags().StringVar(&kind, "kind", "", "disk or memory (default: disk)")
	var lsProject string
	var lsLimit int
	ls := &cobra.Command{
		Use:   "ls [ID]",
		Short: "List snapshots: a sandbox's, or all you may see",
		Long: `List snapshots, oldest first: those of the sandbox ID, or, without one, every
snapshot the token may see (a deleted sandbox's included, until deleted
themselves), page after page.`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			params := client.ListAllSnapshotsParams{}
			if len(args) == 1 {
				params.Sandbox = &args[0]
			}
			if lsProject != "" {
				params.Project = &lsProject
			}
			all, err := collectPages(lsLimit, func(cursor *string) ([]client.Snapshot, *string, error) {
				params.Cursor = cursor
				page, err := c.ListAllSnapshots(a.ctx, &params)
				if err != nil {
					return nil, nil, err
				}
				return page.Items, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"items": orEmpty(all)}, snapshotTable(a, all))
		},
	}
	ls.Flags().StringVar(&lsProject, "project", "", "admin tokens only: only this project's (org/project, or a name in any organisation)")
	ls.Flags().IntVar(&lsLimit, "limit", 0, "at most this many (0: all)")
	get := &cobra.Command{
		Use:   "get SNAPSHOT",
		Short: "Show a snapshot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			snap, err := c.GetSnapshot(a.ctx, args[0])
			if err != nil {
				return err
			}
			return a.emit(snap, snapshotTable(a, []client.Snapshot{*snap}))
		},
	}
	rm := &cobra.Command{
		Use:   "rm SNAPSHOT...",
		Short: "Delete snapshots",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				if err := c.DeleteSnapshot(a.ctx, id); err != nil {
					errs = append(errs, fmt.Errorf("rm %s: %w", id, err))
				} else {
					a.progress("deleted snapshot %s", id)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.AddCommand(create, ls, get, rm)
	return cmd
}

func snapshotTable(a *app, l []client.Snapshot) *table {
	now := time.Now()
	t := a.table("ID", "SANDBOX", "KIND", "SIZE", "POOL", "AGE")
	for _, s := range l {
		t.row(s.Id, s.SandboxId, string(s.Kind), fmt.Sprint(s.SizeBytes), deref(s.Pool), ago(s.CreatedAt, now))
		t.id(s.Id)
	}
	return t
}
