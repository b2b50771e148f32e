package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/client"
)

// completionTimeout bounds the daemon calls behind a Tab: a slow or absent daemon
// gives no suggestions rather than a hung shell.
const completionTimeout = 3 * time.Second

// completeSandboxes suggests the IDs of the sandboxes that are not terminated, with
// their state as the description, for a command's first argument.
func (a *app) completeSandboxes(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		// exec's and ttl's later arguments, cp's destination: nothing to suggest.
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(a.ctx, completionTimeout)
	defer cancel()
	states := []client.SandboxState{"queued", "provisioning", "running", "stopped", "paused", "failed"}
	params := client.ListSandboxesParams{State: &states, Limit: ptr(1000)}
	var out []string
	for {
		page, err := c.ListSandboxes(ctx, &params)
		if err != nil {
			break
		}
		for _, sb := range page.Items {
			if strings.HasPrefix(sb.Id, prefix) {
				out = append(out, sb.Id+"\t"+string(sb.State)+" "+deref(sb.Pool))
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		params.Cursor = page.NextCursor
	}
	if cmd.Name() == "cp" {
		// cp takes ID:PATH: the ID and its colon, without a space after.
		for i, s := range out {
			id, desc, _ := strings.Cut(s, "\t")
			out[i] = id + ":\t" + desc
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveDefault
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completePools suggests pool names (an admin call: a project token gets none).
func (a *app) completePools(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(a.ctx, completionTimeout)
	defer cancel()
	pools, err := c.ListPools(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, p := range pools {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name+"\t"+p.Adapter)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
