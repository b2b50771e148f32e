package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/different-ai/differently/client"
)

func (a *app) adminCmds() []*cobra.Command {
	return []*cobra.Command{a.poolsCmd(), a.projectsCmd(), a.profilesCmd(), a.tokensCmd(), a.policyCmd(), a.reconcileCmd(), a.trustCmd()}
}

func (a *app) poolsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "pools", Short: "Pools: their health, capacity and features"}
	ls := listCmd(a, "List the pools", (*client.Client).ListPools, a.poolTable)
	get := &cobra.Command{
		Use:               "get NAME",
		Short:             "Show a pool",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completePools,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetPool(a.ctx, args[0])
			if err != nil {
				return err
			}
			if a.output != "table" {
				return a.emit(p, a.poolTable([]client.Pool{*p}))
			}
			return a.describePool(p)
		},
	}
	cmd.AddCommand(ls, get)
	return cmd
}

func health(p *client.Pool) cell {
	switch {
	case p.Breaker != nil && p.Breaker.State != client.BreakerClosed:
		return cell{text: "breaker " + string(p.Breaker.State), colour: red}
	case p.Healthy != nil && *p.Healthy:
		return cell{text: "healthy", colour: green}
	case p.Healthy != nil:
		return cell{text: "unhealthy", colour: red}
	}
	return cell{text: "unknown", colour: yellow}
}

func capacity(p *client.Pool) string {
	cp := p.Capacity
	if cp == nil || cp.Bounded == nil || !*cp.Bounded {
		return "unbounded"
	}
	return fmt.Sprintf("%g cpu, %d MiB free", deref(cp.FreeCPU), deref(cp.FreeMemoryMiB))
}

func (a *app) poolTable(pools []client.Pool) *table {
	t := a.table("NAME", "ADAPTER", "TRUST", "REGION", "HEALTH", "SANDBOXES", "CAPACITY", "FEATURES")
	for i := range pools {
		p := &pools[i]
		sandboxes := fmt.Sprint(deref(p.Sandboxes))
		if p.MaxConcurrency > 0 {
			sandboxes += fmt.Sprintf("/%d", p.MaxConcurrency)
		}
		t.rowc(cell{text: p.Name}, cell{text: p.Adapter}, cell{text: string(p.Trust)}, cell{text: deref(p.Region)},
			health(p), cell{text: sandboxes}, cell{text: capacity(p)}, cell{text: strings.Join(deref(p.EffectiveFeatures), ",")})
		t.id(p.Name)
	}
	return t
}

func (a *app) describePool(p *client.Pool) error {
	t := a.table("FIELD", "VALUE")
	add := func(k string, v cell) {
		if v.text != "" {
			t.rowc(cell{text: k, colour: bold}, v)
		}
	}
	add("name", cell{text: p.Name})
	add("adapter", cell{text: p.Adapter})
	if p.Info != nil {
		info := strings.TrimSpace(deref(p.Info.Kind) + " " + deref(p.Info.Version))
		if iso := deref(p.Info.Isolation); iso != "" {
			info += ", isolation " + iso
		}
		add("adapter info", cell{text: info})
	}
	add("trust", cell{text: string(p.Trust)})
	add("region", cell{text: deref(p.Region)})
	add("source", cell{text: string(deref(p.Source))})
	add("health", health(p))
	add("last error", cell{text: deref(p.LastError), colour: red})
	if p.LastProbeAt != nil {
		add("last probe", cell{text: ago(*p.LastProbeAt, time.Now()) + " ago"})
	}
	if p.Breaker != nil && p.Breaker.State != client.BreakerClosed {
		add("breaker", cell{text: fmt.Sprintf("%s after %d failures: %s", p.Breaker.State, p.Breaker.ConsecutiveFailures, deref(p.Breaker.Reason))})
	}
	add("sandboxes", cell{text: fmt.Sprint(deref(p.Sandboxes))})
	add("max concurrency", cell{text: fmt.Sprint(p.MaxConcurrency)})
	add("max starting", cell{text: fmt.Sprint(p.MaxStarting)})
	add("capacity", cell{text: capacity(p)})
	add("features", cell{text: strings.Join(deref(p.EffectiveFeatures), ", ")})
	for _, w := range deref(p.WarmStatus) {
		add("warm "+warmShape(w), cell{text: warmCounts(w)})
	}
	return a.emitTo(a.io.out, p, t, false)
}

// warmShape names a warm shape by what a create must ask for to be served from it.
func warmShape(w client.WarmStatus) string {
	if w.Profile != "" {
		return "profile " + w.Profile
	}
	parts := []string{w.Template}
	if r := w.Resources; r.CPU != 0 || r.MemoryMiB != 0 || r.DiskGiB != 0 {
		parts = append(parts, fmt.Sprintf("%g cpu, %d MiB, %d GiB", r.CPU, r.MemoryMiB, r.DiskGiB))
	}
	return strings.Join(parts, " ")
}

// warmCounts says how full a warm shape is and how it served creates.
func warmCounts(w client.WarmStatus) string {
	s := fmt.Sprintf("%d/%d ready, %d starting; %d hits, %d misses", w.Ready, w.Target, w.Starting, w.Hits, w.Misses)
	if w.ClaimP50Ms != nil && w.ClaimP99Ms != nil {
		s += fmt.Sprintf("; claim p50 %.1f ms, p99 %.1f ms", *w.ClaimP50Ms, *w.ClaimP99Ms)
	}
	return s
}

func (a *app) projectsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "projects", Short: "Projects: usage, quotas and cost"}
	projectTable := func(l []client.Project) *table {
		t := a.table("PROJECT", "DECLARED", "SANDBOXES", "CPU", "MEMORY MIB", "DISK GIB", "COST")
		quota := func(used string, limit string) string {
			if limit == "0" || limit == "" {
				return used
			}
			return used + "/" + limit
		}
		for _, p := range l {
			q := p.Quota
			t.row(p.Org+"/"+p.Name, fmt.Sprint(p.Declared),
				quota(fmt.Sprint(p.Usage.Sandboxes), fmt.Sprint(deref(q.Sandboxes))),
				quota(fmt.Sprint(p.Usage.Cpu), fmt.Sprint(deref(q.Cpu))),
				quota(fmt.Sprint(p.Usage.MemoryMiB), fmt.Sprint(deref(q.MemoryMiB))),
				quota(fmt.Sprint(p.Usage.DiskGiB), fmt.Sprint(deref(q.DiskGiB))),
				fmt.Sprintf("%.4f", p.Cost))
			t.id(p.Org + "/" + p.Name)
		}
		return t
	}
	split := func(s string) (string, string, error) {
		org, name, ok := strings.Cut(s, "/")
		if !ok {
			org, name = "default", s
		}
		if org == "" || name == "" {
			return "", "", usagef("project %q: want ORG/PROJECT or PROJECT (of the org default)", s)
		}
		return org, name, nil
	}
	ls := listCmd(a, "List the projects", (*client.Client).ListProjects, projectTable)
	get := &cobra.Command{
		Use: "get [ORG/]PROJECT", Short: "Show a project", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			org, name, err := split(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetProject(a.ctx, org, name)
			if err != nil {
				return err
			}
			return a.emit(p, projectTable([]client.Project{*p}))
		},
	}
	var q client.ProjectQuota
	var sandboxes int
	var cpu float64
	var mem, disk int64
	set := &cobra.Command{
		Use:     "set [ORG/]PROJECT",
		Short:   "Declare a project or change its quota (0: unlimited)",
		Example: `  differently projects set acme/ci --sandboxes 20 --cpu 40`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			org, name, err := split(args[0])
			if err != nil {
				return err
			}
			q = client.ProjectQuota{Sandboxes: &sandboxes, Cpu: &cpu, MemoryMiB: &mem, DiskGiB: &disk}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.PutProject(a.ctx, org, name, client.ProjectSpec{Quota: &q})
			if err != nil {
				return err
			}
			return a.emit(p, projectTable([]client.Project{*p}))
		},
	}
	set.Flags().IntVar(&sandboxes, "sandboxes", 0, "most sandboxes at once")
	set.Flags().Float64Var(&cpu, "cpu", 0, "most vCPUs at once")
	set.Flags().Int64Var(&mem, "memory", 0, "most memory at once, in `MiB`")
	set.Flags().Int64Var(&disk, "disk", 0, "most disk at once, in `GiB`")
	rm := &cobra.Command{
		Use: "rm [ORG/]PROJECT", Short: "Remove a project's declaration and quota", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			org, name, err := split(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteProject(a.ctx, org, name); err != nil {
				return err
			}
			a.progress("removed project %s/%s", org, name)
			return nil
		},
	}
	cmd.AddCommand(ls, get, set, rm)
	return cmd
}

func (a *app) tokensCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Short: "API tokens (their secrets are shown once, at creation)"}
	tokenTable := func(l []client.Token) *table {
		now := time.Now()
		t := a.table("ID", "SCOPE", "PROJECT", "NAME", "CREATED", "LAST USED")
		for _, tok := range l {
			project := ""
			if tok.Project != nil {
				project = deref(tok.Org) + "/" + *tok.Project
			}
			used := ""
			if tok.LastUsedAt != nil {
				used = ago(*tok.LastUsedAt, now) + " ago"
			}
			t.row(tok.Id, string(tok.Scope), project, deref(tok.Name), ago(tok.CreatedAt, now)+" ago", used)
			t.id(tok.Id)
		}
		return t
	}
	ls := listCmd(a, "List the tokens (never a secret)", (*client.Client).ListTokens, tokenTable)
	var admin bool
	var project, org, name string
	create := &cobra.Command{
		Use:   "create (--admin | --project P [--org O]) [--name N]",
		Short: "Create a token and print its secret, once",
		Long: `Create a token. Its secret is printed once, on stdout, alone on its line with the
default output (so that $(differently tokens create ...) is the secret), or as the
secret field with -o json; the daemon keeps only its hash.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var body client.TokenCreate
			switch {
			case admin && project != "":
				return usagef("--admin and --project exclude each other")
			case admin:
				body.Scope = "admin"
			case project != "":
				body.Scope = "project"
				body.Project = &project
				if org != "" {
					body.Org = &org
				}
			default:
				return usagef("say --admin or --project P")
			}
			if name != "" {
				body.Name = &name
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			created, err := c.CreateToken(a.ctx, body)
			if err != nil {
				return err
			}
			a.progress("created token %s; its secret is shown this once", created.Token.Id)
			t := a.table("SECRET")
			t.row(created.Secret)
			t.id(created.Token.Id)
			return a.emitTo(a.io.out, created, t, false)
		},
	}
	create.Flags().BoolVar(&admin, "admin", false, "an admin token")
	create.Flags().StringVar(&project, "project", "", "a token of this project")
	create.Flags().StringVar(&org, "org", "", "the project's organisation (default: default)")
	create.Flags().StringVar(&name, "name", "", "what the token is for")
	rm := &cobra.Command{
		Use: "rm ID...", Aliases: []string{"revoke"}, Short: "Revoke tokens", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.DeleteToken(a.ctx, id); err != nil {
					return fmt.Errorf("rm %s: %w", id, err)
				}
				a.progress("revoked token %s", id)
			}
			return nil
		},
	}
	cmd.AddCommand(ls, create, rm)
	return cmd
}

func (a *app) policyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "The placement policy: which external pools may get work"}
	show := func(p *client.Policy) error {
		t := a.table("ALLOW EXTERNAL", "EXTERNAL POOLS", "DEFAULT TTL")
		ttl := ""
		if p.Defaults != nil {
			if v, ok := (*p.Defaults)["ttlSeconds"]; ok {
				ttl = fmt.Sprint(v) + "s"
			}
		}
		t.row(fmt.Sprint(deref(p.AllowExternal)), strings.Join(deref(p.ExternalPools), ","), ttl)
		return a.emit(p, t)
	}
	get := &cobra.Command{
		Use: "get", Short: "Show the policy", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetPolicy(a.ctx)
			if err != nil {
				return err
			}
			return show(p)
		},
	}
	var file string
	set := &cobra.Command{
		Use:   "set -f FILE",
		Short: "Replace the policy with a YAML or JSON file's (- for stdin)",
		Example: `  differently policy get -o yaml > policy.yaml
  differently policy set -f policy.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usagef("-f FILE is required")
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = readAllLimited(a.io.in)
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			var p client.Policy
			js, err := yaml.YAMLToJSON(data)
			if err == nil {
				err = strictJSON(js, &p)
			}
			if err != nil {
				return usagef("%s: %v", file, err)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			got, err := c.PutPolicy(a.ctx, p)
			if err != nil {
				return err
			}
			return show(got)
		},
	}
	set.Flags().StringVarP(&file, "file", "f", "", "the policy `file` (YAML or JSON; - for stdin)")
	cmd.AddCommand(get, set)
	return cmd
}

func (a *app) reconcileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Compare every pool's backend with the database now, and repair",
		Long: `Run one reconcile pass now, on the replica this command reaches, and show what it
found and did. "differently reconcile ls" shows the passes that ran, the leader's
periodic ones included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sp := a.spinIf("reconciling", false)
			r, err := c.ReconcileNow(a.ctx)
			sp.end()
			if err != nil {
				return err
			}
			t := a.table("POOL", "SKIPPED", "ORPHANS DELETED", "ADOPTED", "REQUEUED", "LOST", "STATE CHANGED", "ERRORS")
			n := func(l *[]string) string { return fmt.Sprint(len(deref(l))) }
			for _, p := range r.Pools {
				t.row(p.Pool, deref(p.Skipped), n(p.OrphansDeleted), n(p.Adopted), n(p.Requeued), n(p.Lost), n(p.StateChanged), n(p.Errors))
				t.id(p.Pool)
			}
			return a.emit(r, t)
		},
	}
	cmd.AddCommand(a.reconcileLsCmd())
	return cmd
}

func (a *app) reconcileLsCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the reconcile passes that ran, newest first",
		Long: `List the reconcile passes the database keeps (scheduler.reconcilePassesKept), newest
first: the leader's periodic passes and those asked for, whichever replica ran them,
with what each found and did summed over the pools. -o json has each pass's report
pool by pool.`,
		Example: `  differently reconcile ls --limit 5
  differently reconcile ls -o json | jq '.items[] | select(.pools[].errors)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("--limit must be 0 (all) or more, got %d", limit)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			all, err := collectPages(limit, func(cursor *string) ([]client.ReconcilePass, *string, error) {
				page, err := c.ListReconcilePasses(a.ctx, &client.ListReconcilePassesParams{Cursor: cursor})
				if err != nil {
					return nil, nil, err
				}
				return page.Items, page.NextCursor, nil
			})
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"items": orEmpty(all)}, a.passTable(all))
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many, the newest (0: all kept)")
	return cmd
}

// passTable shows each pass on a line, its findings summed over the pools.
func (a *app) passTable(passes []client.ReconcilePass) *table {
	now := time.Now()
	t := a.table("ID", "STARTED", "TOOK", "TRIGGER", "REPLICA", "POOLS", "SKIPPED", "ORPHANS DELETED", "ADOPTED",
		"REQUEUED", "LOST", "STATE CHANGED", "DUPLICATES", "ERRORS")
	for _, p := range passes {
		var skipped, orphans, adopted, requeued, lost, changed, dups, errs int
		for _, pr := range p.Pools {
			if deref(pr.Skipped) != "" {
				skipped++
			}
			orphans += len(deref(pr.OrphansDeleted))
			adopted += len(deref(pr.Adopted))
			requeued += len(deref(pr.Requeued))
			lost += len(deref(pr.Lost))
			changed += len(deref(pr.StateChanged))
			dups += len(deref(pr.Duplicates))
			errs += len(deref(pr.Errors))
		}
		trigger := string(p.Trigger)
		if p.TokenId != nil {
			trigger += " (" + *p.TokenId + ")"
		}
		if p.Error != nil {
			trigger += " stopped: " + *p.Error
		}
		id := strconv.FormatInt(p.Id, 10)
		t.row(id, ago(p.StartedAt, now)+" ago", p.EndedAt.Sub(p.StartedAt).Round(time.Millisecond).String(), trigger, p.Replica,
			strconv.Itoa(len(p.Pools)), strconv.Itoa(skipped), strconv.Itoa(orphans), strconv.Itoa(adopted),
			strconv.Itoa(requeued), strconv.Itoa(lost), strconv.Itoa(changed), strconv.Itoa(dups), strconv.Itoa(errs))
		t.id(id)
	}
	return t
}

func (a *app) trustCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "trust",
		Short: "Say, pool by pool, whether work may go there under the policy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.GetTrustReport(a.ctx)
			if err != nil {
				return err
			}
			t := a.table("POOL", "ADAPTER", "TRUST", "ADAPTER CLAIM", "ISOLATION", "RECEIVES WORK", "NOTE")
			for _, p := range r.Pools {
				work := cell{text: "yes", colour: green}
				if !p.ReceivesWork {
					work = cell{text: "no", colour: yellow}
				}
				t.rowc(cell{text: p.Name}, cell{text: p.Adapter}, cell{text: p.Trust}, cell{text: deref(p.AdapterClaim)},
					cell{text: deref(p.Isolation)}, work, cell{text: deref(p.Note)})
				t.id(p.Name)
			}
			return a.emit(r, t)
		},
	}
}
