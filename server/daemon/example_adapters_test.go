package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/fake"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/config"
	"github.com/different-ai/differently/server/daemon"
	"github.com/different-ai/differently/server/pools"
	"github.com/different-ai/differently/server/store"
)

// labAdapter stands for the in-process adapter of a custom build. To keep the
// example short it is the fake under another kind; yours reaches your backend.
type labAdapter struct{ *fake.Adapter }

func (labAdapter) Info() adapters.Info {
	return adapters.Info{Kind: "lab", Version: "0.1", Trust: api.TrustPrivate,
		Isolation: "none (an example)", Protocol: adapters.ProtocolVersion}
}

// A custom build adds an in-process adapter kind with Options.Adapters, and a pool of
// the config file names it.
func ExampleOptions_adapters() {
	dir, err := os.MkdirTemp("", "differently-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	register := func(r *pools.Registry) {
		r.Register("lab", func(_ context.Context, p store.Pool, creds pools.Credentials) (adapters.ExecutionAdapter, error) {
			// p.Config is the pool's config; creds.Secret() its credential, if any.
			return labAdapter{fake.New(fake.Config{})}, nil
		}, false)
	}

	cfg, err := config.Parse([]byte(`
database:
  url: sqlite://` + filepath.Join(dir, "differently.db") + `
pools:
  - name: lab-1
    adapter: lab
    trust: private
`))
	if err != nil {
		panic(err)
	}
	// The file may name the new kind only if validation knows it.
	kinds := pools.DefaultRegistry(false)
	register(kinds)
	if err := cfg.Validate(config.ValidateOptions{KnownAdapters: kinds.Kinds()}); err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := daemon.New(ctx, daemon.Options{Config: cfg, Listen: "127.0.0.1:0", Adapters: register})
	if err != nil {
		panic(err)
	}
	token, err := daemon.CreateToken(ctx, d.Store(), time.Now(), store.Token{Scope: store.ScopeAdmin, Name: "example"})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	req, _ := http.NewRequest("GET", d.URL()+"/v1/admin/pools/lab-1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var pool struct {
		Adapter string `json:"adapter"`
		Healthy bool   `json:"healthy"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&pool); err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, pool.Adapter, pool.Healthy)
	// Output: 200 lab true
}
