package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/client"
)

func (a *app) profilesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "Profiles: named defaults a create can ask for with --profile",
	}
	profileTable := func(l []client.Profile) *table {
		t := a.table("NAME", "TEMPLATE", "POOLS", "CAPABILITIES", "RESOURCES", "TTL")
		for _, p := range l {
			var pools []string
			if p.Placement != nil {
				pools = deref(p.Placement.AllowedPools)
			}
			res := ""
			if r := p.Resources; r.CPU != 0 || r.MemoryMiB != 0 || r.DiskGiB != 0 {
				res = fmt.Sprintf("cpu %g, %d MiB, %d GiB", r.CPU, r.MemoryMiB, r.DiskGiB)
			}
			ttl := ""
			if p.TtlSeconds > 0 {
				ttl = (time.Duration(p.TtlSeconds) * time.Second).String()
			}
			t.row(p.Name, deref(p.Template), strings.Join(pools, ","), strings.Join(p.Capabilities, ","), res, ttl)
			t.id(p.Name)
		}
		return t
	}
	ls := listCmd(a, "List the profiles", (*client.Client).ListProfiles, profileTable)
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a profile", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetProfile(a.ctx, args[0])
			if err != nil {
				return err
			}
			return a.emit(p, profileTable([]client.Profile{*p}))
		},
	}
	var caps, pools []string
	var template string
	var cpu float64
	var mem, disk int64
	var ttl time.Duration
	set := &cobra.Command{
		Use:     "set NAME",
		Short:   "Create or replace a profile",
		Example: `  differently profiles set ci --template devhost --pool devhost --cpu 2 --memory 2048 --ttl 1h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var spec client.ProfileSpec
			if len(caps) > 0 {
				spec.Capabilities = &caps
			}
			if len(pools) > 0 {
				spec.Placement = &client.Placement{AllowedPools: &pools}
			}
			if template != "" {
				spec.Template = &template
			}
			if cpu != 0 || mem != 0 || disk != 0 {
				spec.Resources = &adapters.Resources{CPU: cpu, MemoryMiB: mem, DiskGiB: disk}
			}
			if ttl < 0 || ttl%time.Second != 0 {
				return usagef("--ttl %s: whole seconds only", ttl)
			}
			if ttl > 0 {
				secs := int64(ttl / time.Second)
				spec.TtlSeconds = &secs
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.PutProfile(a.ctx, args[0], spec)
			if err != nil {
				return err
			}
			return a.emit(p, profileTable([]client.Profile{*p}))
		},
	}
	fl := set.Flags()
	fl.StringSliceVar(&caps, "capability", nil, "`capabilities` added to a create's own (repeat or comma-separate)")
	fl.StringSliceVar(&pools, "pool", nil, "place its sandboxes only on these `pools`")
	fl.StringVar(&template, "template", "", "the template of a create that names none")
	fl.Float64Var(&cpu, "cpu", 0, "vCPUs of a create that asks none")
	fl.Int64Var(&mem, "memory", 0, "memory in `MiB` of a create that asks none")
	fl.Int64Var(&disk, "disk", 0, "disk in `GiB` of a create that asks none")
	fl.DurationVar(&ttl, "ttl", 0, "the lifetime of a create that sets none (0: no expiry)")
	_ = set.RegisterFlagCompletionFunc("pool", a.completePools)
	rm := &cobra.Command{
		Use: "rm NAME...", Short: "Delete profiles (sandboxes made from them keep what they got)", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.DeleteProfile(a.ctx, name); err != nil {
					return fmt.Errorf("rm %s: %w", name, err)
				}
				a.progress("deleted profile %s", name)
			}
			return nil
		},
	}
	cmd.AddCommand(ls, get, set, rm)
	return cmd
}
