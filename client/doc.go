// Package client is the Go client of the Differently API.
//
// New returns a Client for a daemon's URL and a bearer token. Its methods are named
// after the operationIds of api/openapi.yaml (CreateSandbox, ExecSandbox,
// ReadSandboxFile, ...), return the generated models, and turn every answer other
// than 2xx into an *APIError whose Code is one of the api package's codes; IsCode and
// IsNotFound test an error without unwrapping it by hand. Idempotent calls are
// retried with backoff on 429, 503 and connection errors, within the caller's
// context.
//
// Beyond single calls: WaitForState waits for a sandbox to reach a state,
// CreateSandboxAndWait and DeleteSandboxAndWait ask the daemon to answer only once
// the sandbox has started or gone, and ExecSandboxStream yields a command's output as
// it comes. An operation without a wrapper is on Client.API, the client generated
// from the OpenAPI document (gen.go), which shares the token, user agent and
// retries.
//
//	c, err := client.New("http://127.0.0.1:8700", token)
//	sb, err := c.CreateSandboxAndWait(ctx, client.SandboxCreate{}, "build-42")
//	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, api.ExecRequest{Command: "make test"}) {
//		...
//	}
package client
