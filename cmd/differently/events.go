package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/client"
)

func (a *app) eventsCmd() *cobra.Command {
	var follow bool
	var types []string
	var pool, project string
	var limit int
	cmd := &cobra.Command{
		Use:   "events [ID]",
		Short: "Show what happened to a sandbox, or to every sandbox, and follow it",
		Long: `Show the events of one sandbox, or of every sandbox the token may see, oldest first:
each change of state, who made it, the pool and attempt, and why a placement passed
pools over. With --follow, the events recorded from then on are printed as they come,
until Ctrl-C; with -o json each is one JSON object on a line.`,
		Example: `  differently events sb_01J...
  differently events --follow --type failed,requeued`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var ts *[]client.EventType
			if len(types) > 0 {
				l := make([]client.EventType, len(types))
				for i, t := range types {
					l[i] = client.EventType(t)
				}
				ts = &l
			}
			params := client.ListEventsParams{Type: ts}
			if len(args) == 1 {
				params.Sandbox = &args[0]
			}
			if pool != "" {
				params.Pool = &pool
			}
			if project != "" {
				params.Project = &project
			}
			// The history, page after page: one sandbox's through its own route,
			// which answers 404 for a sandbox that does not exist.
			var all []client.Event
			cursor := ""
			for {
				var page *client.EventList
				if len(args) == 1 {
					p := client.ListSandboxEventsParams{Type: ts, Limit: ptr(1000)}
					if cursor != "" {
						p.Cursor = &cursor
					}
					page, err = c.ListSandboxEvents(a.ctx, args[0], &p)
				} else {
					p := params
					p.Limit = ptr(1000)
					if cursor != "" {
						p.Cursor = &cursor
					}
					page, err = c.ListEvents(a.ctx, &p)
				}
				if err != nil {
					return err
				}
				all = append(all, page.Items...)
				cursor = page.NextCursor
				if len(page.Items) < 1000 || cursor == "" {
					break
				}
			}
			if limit > 0 && len(all) > limit {
				all = all[len(all)-limit:]
			}
			if !follow {
				return a.emit(map[string]any{"items": orEmpty(all), "nextCursor": cursor}, a.eventTable(all))
			}
			// Followed, JSON is one object a line (NDJSON), which a script reads as
			// the events come.
			structured := a.output == "json" || a.output == "yaml"
			var live *liveTable
			if structured {
				for _, e := range all {
					if err := a.emitCompact(e); err != nil {
						return err
					}
				}
			} else if live, err = a.startLive(a.eventTable(all), map[int]int{3: utf8.RuneCountInString("provisioning → terminating")}); err != nil {
				return err
			}
			if cursor != "" {
				params.Cursor = &cursor
			}
			for e, err := range c.FollowEvents(a.ctx, &params) {
				if err != nil {
					if a.ctx.Err() != nil {
						return nil
					}
					return err
				}
				if structured {
					err = a.emitCompact(e)
				} else {
					err = live.add(a.eventTable([]client.Event{e}))
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&follow, "follow", "f", false, "then print new events as they come, until Ctrl-C")
	fl.StringSliceVar(&types, "type", nil, "only these event `types` (repeat or comma-separate)")
	fl.StringVar(&pool, "pool", "", "only this pool's events")
	fl.StringVar(&project, "project", "", "admin tokens only: only this project's (org/project)")
	fl.IntVar(&limit, "limit", 0, "only the last this many of the history (0: all)")
	_ = cmd.RegisterFlagCompletionFunc("pool", a.completePools)
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions([]string{"created", "placed", "running", "requeued", "waiting",
		"failed", "stopped", "started", "paused", "resumed", "terminating", "delete_failed", "instance_bound", "terminated",
		"adopted", "observed"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) eventTable(l []client.Event) *table {
	t := a.table("TIME", "SANDBOX", "EVENT", "STATE", "POOL", "ACTOR", "DETAIL")
	for _, e := range l {
		state := string(e.To)
		if e.From != nil && *e.From != e.To {
			state = string(*e.From) + " → " + state
		}
		var detail []string
		if e.Code != nil {
			detail = append(detail, *e.Code)
		}
		if e.Message != nil {
			detail = append(detail, *e.Message)
		}
		if e.Attempt != nil {
			detail = append(detail, fmt.Sprintf("attempt %d", *e.Attempt))
		}
		t.rowc(cell{text: e.Time.Local().Format(time.TimeOnly)}, cell{text: e.SandboxId}, cell{text: string(e.Type)},
			cell{text: state, colour: stateColour(string(e.To))}, cell{text: deref(e.Pool)}, cell{text: e.Actor},
			cell{text: strings.Join(detail, "; ")})
		t.id(e.Cursor)
	}
	return t
}
