package httpapi

import (
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/sandboxes"
	"github.com/different-ai/differently/server/store"
	"math"
	"slices"
)

func ptr[T any](v T) *T { return &v }

// strPtr omits empty strings, which the API leaves out rather than sending "".
func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nilIfEmpty leaves an empty list out of an answer, as strPtr does a string.
func nilIfEmpty[T any](s []T) *[]T {
	if len(s) == 0 {
		return nil
	}
	return ptr(slices.Clone(s))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// toSandbox is the API's view of a sandbox. Env is write-only and never leaves.
func (s *Server) toSandbox(sb store.Sandbox) Sandbox {
	out := Sandbox{
		Id:           sb.ID,
		Org:          sb.Org,
		Project:      sb.Project,
		State:        SandboxState(sb.State),
		Pool:         strPtr(sb.Pool),
		Region:       strPtr(sb.Region),
		BackendRef:   strPtr(sb.BackendRef),
		Template:     strPtr(sb.Template),
		Profile:      strPtr(sb.Profile),
		Capabilities: nonNil(slices.Clone(sb.Capabilities)),
		Resources:    sb.Resources,
		Labels:       map[string]string{},
		ExpiresAt:    sb.ExpiresAt,
		FromSnapshot: strPtr(sb.FromSnapshot),
		InitCommands: nilIfEmpty(sb.InitCommands),
		Attempts:     sb.Attempts,
		Reason:       strPtr(sb.Reason),
		CreatedAt:    sb.CreatedAt,
		UpdatedAt:    sb.UpdatedAt,
	}
	for k, v := range sb.Labels {
		out.Labels[k] = v
	}
	// Always said, 0 included: a create's TTL is settled when it is stored (its own,
	// the profile's, the policy's or 24 hours), so 0 here means no expiry, which an
	// absent field could not tell from "not known".
	out.TtlSeconds = ptr(sb.TTLSeconds)
	if pl := sb.Placement; len(pl.AllowedPools) > 0 || len(pl.Regions) > 0 {
		out.Placement = &Placement{}
		if len(pl.AllowedPools) > 0 {
			out.Placement.AllowedPools = ptr(slices.Clone(pl.AllowedPools))
		}
		if len(pl.Regions) > 0 {
			out.Placement.Regions = ptr(slices.Clone(pl.Regions))
		}
	}
	if c, ok := s.svc.Cost(sb); ok {
		out.Cost = ptr(c)
	}
	return out
}

// estimateCost and saturate are the sandbox service's, which the console shares.
var (
	estimateCost = sandboxes.EstimateCost
	saturate     = func(f float64) float64 { return min(f, math.MaxFloat64) }
)

func toSnapshot(sn store.Snapshot) Snapshot {
	return Snapshot{
		Id:        sn.ID,
		SandboxId: sn.SandboxID,
		Pool:      strPtr(sn.Pool),
		Kind:      SnapshotKind(sn.Kind),
		SizeBytes: sn.SizeBytes,
		State:     SnapshotState(sn.State),
		CreatedAt: sn.CreatedAt,
	}
}

// toPool merges a pool's stored definition with what this replica knows of it now.
// A pool without a view has not been built or probed yet.
func toPool(p store.Pool, v *pools.View, sandboxes int) Pool {
	out := Pool{
		Name:           p.Name,
		Adapter:        p.Adapter,
		Trust:          PoolTrust(p.Trust),
		Region:         strPtr(p.Region),
		MaxConcurrency: p.MaxConcurrency,
		MaxStarting:    p.MaxStarting,
		CostModel:      CostModel{CpuHour: ptr(p.CostModel.CPUHour), MemoryGiBHour: ptr(p.CostModel.MemoryGiBHour)},
		Config:         map[string]any{},
		Features:       nonNil(slices.Clone(p.Features)),
		Source:         ptr(PoolOrigin(p.Source)),
		Sandboxes:      ptr(sandboxes),
	}
	for k, val := range p.Config {
		out.Config[k] = val
	}
	if p.CredentialsEnv != "" {
		out.Credentials = &Credentials{Env: ptr(p.CredentialsEnv)}
	}
	if !p.CreatedAt.IsZero() {
		out.CreatedAt = ptr(p.CreatedAt)
		out.UpdatedAt = ptr(p.UpdatedAt)
	}
	if v == nil {
		out.Healthy = ptr(false)
		out.EffectiveFeatures = ptr([]string{})
		out.LastError = ptr("not probed yet")
		return out
	}
	out.Healthy = ptr(v.Healthy)
	out.Breaker = toBreaker(v.Breaker)
	out.EffectiveFeatures = ptr(nonNil(slices.Clone(v.Capabilities.Features)))
	out.LastError = strPtr(v.LastError)
	if !v.LastProbeAt.IsZero() {
		out.LastProbeAt = ptr(v.LastProbeAt)
	}
	if v.Adapter != nil {
		c := v.Capacity
		out.Capacity = &Capacity{Bounded: ptr(c.Bounded), FreeCPU: ptr(c.FreeCPU), FreeMemoryMiB: ptr(c.FreeMemoryMiB),
			LargestFreeCPU: ptr(c.LargestFreeCPU), LargestFreeMemoryMiB: ptr(c.LargestFreeMemoryMiB)}
		i := v.Info
		out.Info = &AdapterInfo{Kind: strPtr(i.Kind), Version: strPtr(i.Version), Trust: strPtr(string(i.Trust)),
			Isolation: strPtr(i.Isolation), Protocol: strPtr(i.Protocol), Description: strPtr(i.Description)}
	}
	return out
}

// toBreaker shows a pool's breaker; a view made without one (a pool source that
// keeps no breaker) reads as closed.
func toBreaker(b pools.BreakerStatus) *PoolBreaker {
	out := &PoolBreaker{State: BreakerClosed, ConsecutiveFailures: b.ConsecutiveFailures, Reason: strPtr(b.Reason)}
	if b.State != "" {
		out.State = BreakerState(b.State)
	}
	if !b.OpenUntil.IsZero() {
		out.OpenUntil = ptr(b.OpenUntil)
	}
	return out
}

func toToken(t store.Token) Token {
	return Token{
		Id:         t.ID,
		Scope:      TokenScope(t.Scope),
		Org:        strPtr(t.Org),
		Project:    strPtr(t.Project),
		Name:       strPtr(t.Name),
		CreatedAt:  t.CreatedAt,
		LastUsedAt: t.LastUsedAt,
		ExpiresAt:  t.ExpiresAt,
	}
}
