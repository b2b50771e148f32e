package opensandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// endpoint is the lifecycle API's answer for a sandbox port.
type endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// running returns the sandbox if it runs: exec and files on a paused or stopped
// sandbox are invalid_state, on a deleted one not_found.
func (a *Adapter) running(ctx context.Context, ref string) error {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return err
	}
	if sb.Status.State != "Running" {
		return adapters.InvalidState("opensandbox: sandbox %s is %s, not Running", ref, sb.Status.State)
	}
	return nil
}

// execdFor returns a client for the sandbox's execd, checking first that the
// sandbox runs. Clients are cached per sandbox; lifecycle changes drop them.
func (a *Adapter) execdFor(ctx context.Context, ref string) (*httpx.Client, error) {
	if err := a.running(ctx, ref); err != nil {
		return nil, err
	}
	a.mu.Lock()
	c := a.execd[ref]
	a.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := a.resolveExecd(ctx, ref)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.execd[ref] = c
	a.mu.Unlock()
	return c, nil
}

func (a *Adapter) dropExecd(ref string) {
	a.mu.Lock()
	delete(a.execd, ref)
	a.mu.Unlock()
}

// resolveExecd finds execd: through the server's proxy route (which takes the API
// key) or at the endpoint the server reports, with the headers it names (the execd
// access token among them).
func (a *Adapter) resolveExecd(ctx context.Context, ref string) (*httpx.Client, error) {
	const provider = Kind + " execd"
	opts := []httpx.Option{httpx.WithHTTPClient(a.http)}
	if a.cfg.UseServerProxy {
		base := strings.TrimRight(a.cfg.APIURL, "/") + fmt.Sprintf("/sandboxes/%s/proxy/%d", url.PathEscape(ref), execdPort)
		opts = append(opts, httpx.WithHeader("OPEN-SANDBOX-API-KEY", a.apiKey))
		return httpx.New(provider, base, opts...)
	}
	var ep endpoint
	if err := a.api.JSON(ctx, http.MethodGet, fmt.Sprintf("/sandboxes/%s/endpoints/%d", url.PathEscape(ref), execdPort), nil, nil, &ep); err != nil {
		return nil, err
	}
	if ep.Endpoint == "" {
		return nil, adapters.Unavailable("opensandbox: no execd endpoint reported for sandbox %s", ref)
	}
	keys := make([]string, 0, len(ep.Headers))
	for k := range ep.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		opts = append(opts, httpx.WithHeader(k, ep.Headers[k]))
	}
	c, err := httpx.New(provider, a.withScheme(ep.Endpoint), opts...)
	if err != nil {
		return nil, adapters.Unavailable("opensandbox: execd endpoint for sandbox %s is not usable: %v", ref, err)
	}
	return c, nil
}

// withScheme puts portScheme in front of an endpoint reported as host[:port]/path.
func (a *Adapter) withScheme(ep string) string {
	if strings.HasPrefix(ep, "http://") || strings.HasPrefix(ep, "https://") {
		return ep
	}
	return a.cfg.PortScheme + "://" + ep
}

// execdJSON calls execd with JSON in and out, forgetting the cached endpoint when
// execd cannot be reached (a restarted sandbox may have moved).
func (a *Adapter) execdJSON(ctx context.Context, ref, method, path string, q url.Values, in, out any) error {
	c, err := a.execdFor(ctx, ref)
	if err != nil {
		return err
	}
	err = c.JSON(ctx, method, path, q, in, out)
	a.forgetOnOutage(ref, err)
	return err
}

func (a *Adapter) forgetOnOutage(ref string, err error) {
	if api.IsCode(err, api.CodeProviderUnavailable) {
		a.dropExecd(ref)
	}
}
