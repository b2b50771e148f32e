package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/different-ai/differently/adapters/local"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// writeAttempts bounds how often one pool's write is read and tried again after
// another replica wrote the pool in between. Replicas starting together from the same
// file agree after one retry; the bound only keeps replicas whose files disagree
// from trying for ever.
const writeAttempts = 5

// registerPools makes the store agree with the config file, and in development mode
// creates the development pools.
//
// The file is the operator's declaration, so it wins at every start: each of its pools
// is written as the file has it and marked as the file's, including a pool of that name
// which was created through the API before (logged, since the API's changes are lost).
// The API refuses to change or delete a pool marked as the file's.
//
// A pool marked as the file's that the file no longer names is released to the API,
// not deleted: deleting it would strand its sandboxes (nothing but the pool's adapter
// can terminate their instances, and a pool with live sandboxes cannot be deleted
// anyway), and a file edited by mistake or a replica started with another file would
// destroy what the operator may still want. Released, the pool keeps working exactly
// as before, and an admin deletes it through the API once its sandboxes are gone.
//
// Development pools are created once and then left to the operator: they are the API's.
// A development pool the file also defines is the file's.
//
// Every write is idempotent and compares versions, so replicas starting together from
// the same file and the same database end where one alone would.
func (d *Daemon) registerPools(ctx context.Context) error {
	inFile := map[string]bool{}
	for _, pc := range d.cfg.Pools {
		p := pc.StorePool()
		inFile[p.Name] = true
		if err := d.declarePool(ctx, p); err != nil {
			return fmt.Errorf("pool %s: %w", p.Name, err)
		}
	}
	if d.opts.Dev {
		for _, p := range devPools(ctx, d.opts.DataDir, d.opts.Logger) {
			if inFile[p.Name] {
				continue
			}
			_, err := d.st.CreatePool(ctx, d.opts.Clock.Now(), p)
			// Existing: created by an earlier start or another replica, and the
			// operator's since.
			if err != nil && !api.IsCode(err, api.CodeInvalidState) {
				return fmt.Errorf("pool %s: %w", p.Name, err)
			}
		}
	}
	stored, err := d.st.ListPools(ctx)
	if err != nil {
		return fmt.Errorf("pools: %w", err)
	}
	for _, p := range stored {
		if p.Source == store.PoolFromConfig && !inFile[p.Name] {
			if err := d.releasePool(ctx, p); err != nil {
				return fmt.Errorf("pool %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// declarePool writes one pool of the config file unless the store already holds it
// exactly so.
func (d *Daemon) declarePool(ctx context.Context, want store.Pool) error {
	log := d.opts.Logger
	for attempt := 1; ; attempt++ {
		cur, err := d.st.GetPool(ctx, want.Name)
		switch {
		case api.IsCode(err, api.CodeNotFound):
			if _, err = d.st.CreatePool(ctx, d.opts.Clock.Now(), want); err == nil {
				log.Info("pool created from the config file", "pool", want.Name, "adapter", want.Adapter)
				return nil
			}
		case err != nil:
			return err
		case samePool(cur, want):
			return nil
		default:
			if cur.Adapter != want.Adapter {
				if err := d.checkAdapterChange(ctx, cur, want); err != nil {
					return err
				}
			}
			next := want
			next.Version, next.CreatedAt = cur.Version, cur.CreatedAt
			if _, err = d.st.UpdatePool(ctx, d.opts.Clock.Now(), next); err == nil {
				if cur.Source != store.PoolFromConfig {
					log.Warn("the config file defines a pool that was managed through the API; the file's definition replaces it, and the API can no longer change or delete it",
						"pool", want.Name, "adapter", want.Adapter, "previousAdapter", cur.Adapter)
				} else {
					log.Info("pool updated from the config file", "pool", want.Name, "version", cur.Version+1)
				}
				return nil
			}
		}
		// invalid_state: another replica created or changed the pool between the read
		// and the write; not_found: an admin deleted it. Read it again; if it now
		// matches, there is nothing to do, and if it is gone, it is created.
		if !api.IsCode(err, api.CodeInvalidState) && !api.IsCode(err, api.CodeNotFound) || attempt == writeAttempts {
			return err
		}
	}
}

// checkAdapterChange refuses to give a pool another adapter while sandboxes live on
// it: their instances are on the old backend, which only the old adapter reaches,
// so the reconciler would find them gone and fail them, and nothing would ever
// delete the instances. The API refuses any adapter change; the file may make one
// to an empty pool, since the file is how such a pool is defined.
func (d *Daemon) checkAdapterChange(ctx context.Context, cur, want store.Pool) error {
	counts, err := d.st.CountSandboxesByPool(ctx, store.NonTerminalStates)
	if err != nil {
		return err
	}
	if n := counts[cur.Name]; n > 0 {
		return fmt.Errorf("the config file gives it the adapter %q, but %d sandboxes still live on it with the adapter %q; "+
			"delete them first, or define the new pool under another name", want.Adapter, n, cur.Adapter)
	}
	return nil
}

// releasePool hands a pool the config file no longer names to the API.
func (d *Daemon) releasePool(ctx context.Context, p store.Pool) error {
	p.Source = store.PoolFromAPI
	_, err := d.st.UpdatePool(ctx, d.opts.Clock.Now(), p)
	if err == nil {
		d.opts.Logger.Warn("pool is no longer in the config file; it is kept, with its sandboxes, and managed through the API from now on (delete it there if it should go)",
			"pool", p.Name)
		return nil
	}
	if !api.IsCode(err, api.CodeInvalidState) {
		return err
	}
	// Written since it was listed, and only a start writes a config file's pool:
	// another replica released it too, or one whose file still names it wrote it,
	// which leaves it that file's until a start from a file without it.
	cur, err := d.st.GetPool(ctx, p.Name)
	switch {
	case api.IsCode(err, api.CodeNotFound):
		return nil
	case err != nil:
		return err
	case cur.Source == store.PoolFromConfig:
		d.opts.Logger.Warn("pool is no longer in this replica's config file, but another replica's file still defines it; it stays the config file's",
			"pool", p.Name)
	}
	return nil
}

// devPools are the pools dev mode creates: local when this host can run bwrap
// (tried once, here, by really running a command through it), devhost and fake.
func devPools(ctx context.Context, dataDir string, log *slog.Logger) []store.Pool {
	var out []store.Pool
	localRoot := filepath.Join(dataDir, "local")
	if a, err := local.New(ctx, local.Config{Root: localRoot}); err != nil {
		log.Warn("dev mode: no local pool, this host cannot run sandboxes in bwrap; only devhost, which does not isolate them", "err", err)
	} else {
		log.Info("dev mode: pool local is isolated (Linux namespaces via bwrap)", "limits", a.Limits())
		out = append(out, store.Pool{Name: "local", Adapter: local.Kind, Trust: api.TrustPrivate, Region: "local",
			// As on devhost: resources the host cannot enforce count for quota
			// and cost; those it can (cgroups) are enforced.
			Config: map[string]any{"root": localRoot, "ignoreResources": true},
			Source: store.PoolFromAPI})
	}
	log.Warn("dev mode: pool devhost is not isolated: its sandboxes run as the daemon's user on the host")
	return append(out, []store.Pool{
		// ignoreResources is written into the dev pool's config, where GET
		// /v1/admin/pools shows it: the Terraform examples and first tries ask for
		// resources, and on a development host they are meant for quota and cost, not
		// limits. A devhost pool an operator declares refuses them unless told.
		{Name: "devhost", Adapter: "devhost", Trust: api.TrustPrivate, Region: "local",
			Config: map[string]any{"root": filepath.Join(dataDir, "devhost"), "ignoreResources": true},
			Source: store.PoolFromAPI},
		{Name: "fake", Adapter: "fake", Trust: api.TrustPrivate, Region: "local", Config: map[string]any{},
			Source: store.PoolFromAPI},
	}...)
}

// samePool compares pools as they are stored: as JSON. A config file's pool decodes
// its numbers from YAML as integers where the stored copy holds float64, so a Go
// comparison would see a change on every start and rewrite the pool.
func samePool(a, b store.Pool) bool {
	a.CreatedAt, a.UpdatedAt, a.Version = b.CreatedAt, b.UpdatedAt, b.Version
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
