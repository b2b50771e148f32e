package daytona

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/httpx"
	"github.com/different-ai/differently/api"
)

// defaultExecTimeout is sent when a request sets none: the toolbox's own default is
// 10 seconds, far shorter than the contract's.
const defaultExecTimeout = 600

// toolbox returns a client for a running sandbox's toolbox and the sandbox itself.
// Every toolbox call reads the sandbox first: that answers not_found for a missing
// sandbox and invalid_state for one that is not running, which the toolbox proxy
// would otherwise report as an opaque failure, and yields the proxy URL.
func (a *Adapter) toolbox(ctx context.Context, ref string) (*httpx.Client, error) {
	sb, err := a.getSandbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	if sb.State != "started" {
		return nil, adapters.InvalidState("daytona: sandbox %s is %s, not started", ref, sb.State)
	}
	if sb.ToolboxProxyURL == "" {
		return nil, adapters.Unavailable("daytona: sandbox %s has no toolbox proxy URL", ref)
	}
	// The toolbox of one sandbox lives under the proxy URL followed by its ID.
	base := strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + url.PathEscape(sb.ID)
	return a.client(base)
}

type executeRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	Timeout int               `json:"timeout"`
}

// Exec runs a command through the toolbox's process/execute. Its output is stdout and
// stderr combined, reported as stdout.
func (a *Adapter) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	if err := req.Validate(); err != nil {
		return api.ExecResult{}, err
	}
	if req.Stdin != "" {
		return api.ExecResult{}, adapters.Unsupported("exec.stdin")
	}
	tb, err := a.toolbox(ctx, ref)
	if err != nil {
		return api.ExecResult{}, err
	}
	timeout := req.TimeoutSeconds
	if timeout == 0 {
		timeout = defaultExecTimeout
	}
	body := executeRequest{Command: wrapCommand(req), Cwd: req.Cwd, Envs: req.Env, Timeout: timeout}
	start := time.Now()
	// The answer is {exitCode, result}, result holding all the output: it is read as
	// it arrives, keeping what the cap allows, so output of any size is a result.
	var out adapters.OutputBuffer
	var exitCode int
	err = tb.JSONObject(ctx, http.MethodPost, "/process/execute", nil, body, httpx.MaxExecAnswer, httpx.Fields{
		Strings: map[string]io.Writer{"result": &out},
		Values:  map[string]any{"exitCode": &exitCode},
	})
	res := api.ExecResult{DurationMs: time.Since(start).Milliseconds()}
	if err != nil {
		if e := api.AsError(err); e != nil && e.Details["status"] == http.StatusRequestTimeout {
			// The toolbox killed the command at its timeout; its output is lost.
			res.ExitCode, res.TimedOut = api.TimeoutExitCode, true
			return res, nil
		}
		return api.ExecResult{}, err
	}
	res.ExitCode, res.Stdout, res.Truncated = exitCode, out.String(), out.Truncated()
	return res, nil
}

// wrapCommand turns a request into the toolbox's command string. The toolbox splits
// that string into words itself (honouring quotes but not backslashes), so the real
// command travels base64-encoded, an alphabet with no quotes or spaces, and a shell
// decodes and evaluates it. Args are quoted for that shell, so they reach the program
// verbatim, shell syntax and all.
func wrapCommand(req api.ExecRequest) string {
	script := req.Command
	if len(req.Args) > 0 {
		quoted := make([]string, len(req.Args))
		for i, arg := range req.Args {
			quoted[i] = shellQuote(arg)
		}
		script = "exec " + strings.Join(quoted, " ")
	}
	enc := base64.StdEncoding.EncodeToString([]byte(script))
	return `sh -c 'eval "$(echo ` + enc + ` | base64 -d)"'`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func checkPath(p string) error {
	if p == "" || strings.ContainsRune(p, 0) {
		return adapters.InvalidRequest("daytona: path %q is not valid", p)
	}
	return nil
}

// ReadFile downloads a file through the toolbox. A file over api.MaxFileBytes is
// payload_too_large rather than silently cut.
func (a *Adapter) ReadFile(ctx context.Context, ref, p string) ([]byte, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	tb, err := a.toolbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	req, err := tb.NewRequest(ctx, http.MethodGet, "/files/download", url.Values{"path": {p}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := tb.Send(req)
	if err != nil {
		return nil, err
	}
	return tb.ReadFileBody(resp, p)
}

func tooLarge(p string) error {
	return adapters.TooLarge("daytona: %s is larger than %d MiB", p, api.MaxFileBytes>>20)
}

// WriteFile uploads a file with upload-v2, which creates missing parents and
// replaces an existing file.
func (a *Adapter) WriteFile(ctx context.Context, ref, p string, data []byte) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if len(data) > api.MaxFileBytes {
		return tooLarge(p)
	}
	tb, err := a.toolbox(ctx, ref)
	if err != nil {
		return err
	}
	req, err := tb.NewRequest(ctx, http.MethodPost, "/files/upload-v2", url.Values{"path": {p}}, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := tb.Send(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, httpx.MaxErrorBody))
	return resp.Body.Close()
}

type fileInfo struct {
	Name       string `json:"name"`
	Path       string `json:"path"`
	IsDir      bool   `json:"isDir"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modifiedAt"`
}

// ListFiles lists one directory (depth 1).
func (a *Adapter) ListFiles(ctx context.Context, ref, p string) ([]adapters.FileInfo, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	tb, err := a.toolbox(ctx, ref)
	if err != nil {
		return nil, err
	}
	var entries []fileInfo
	if err := tb.JSON(ctx, http.MethodGet, "/files", url.Values{"path": {p}}, nil, &entries); err != nil {
		return nil, err
	}
	out := make([]adapters.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi := adapters.FileInfo{Name: e.Name, Path: e.Path, Size: e.Size, IsDir: e.IsDir}
		if fi.Path == "" {
			fi.Path = path.Join(p, e.Name)
		}
		if t, err := time.Parse(time.RFC3339Nano, e.ModifiedAt); err == nil {
			fi.ModTime = t
		}
		out = append(out, fi)
	}
	return out, nil
}
