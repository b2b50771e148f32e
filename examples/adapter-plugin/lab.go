package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// lab is the adapter. An instance is the directory root/<sandbox ID>, and its
// record (lab.json inside it) keeps what List must report and Exec must apply.
type lab struct {
	root string
	// mu makes Create's look-up-then-make one step, so that concurrent Creates of
	// one sandbox return one instance.
	mu sync.Mutex
}

// record is what an instance remembers of its Create.
type record struct {
	SandboxID    string            `json:"sandboxId"`
	Installation string            `json:"installation"`
	Env          map[string]string `json:"env,omitempty"`
}

const recordFile = "lab.json"

// defaultTimeout bounds a command that asks for no timeout.
const defaultTimeout = 10 * time.Minute

// safeID admits the sandbox IDs the control plane makes, and nothing that could
// leave root as a path.
var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func newLab(root string) (*lab, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	return &lab{root: abs}, nil
}

func (l *lab) Info() adapters.Info {
	return adapters.Info{Kind: "lab", Version: "0.1", Trust: api.TrustPrivate,
		Isolation: "none: directories and processes on the plugin's host (an example)",
		Protocol:  adapters.ProtocolVersion}
}

func (l *lab) Capabilities(context.Context) (adapters.Capabilities, error) {
	// Only what this adapter implements: declaring more would be dropped anyway.
	return adapters.Capabilities{Features: []string{adapters.FeatureExec}}, nil
}

func (l *lab) Capacity(context.Context) (adapters.Capacity, error) {
	// No meaningful limit: the pool's maxConcurrency governs.
	return adapters.Capacity{Bounded: false}, nil
}

func (l *lab) Health(context.Context) error {
	if _, err := os.Stat(l.root); err != nil {
		return adapters.Unavailable("lab root: %v", err)
	}
	return nil
}

func (l *lab) dir(ref string) (string, error) {
	if !safeID.MatchString(ref) {
		return "", adapters.NotFound("instance %q not found", ref)
	}
	return filepath.Join(l.root, ref), nil
}

func (l *lab) Create(ctx context.Context, req adapters.CreateRequest) (adapters.Instance, error) {
	if err := req.Validate(); err != nil {
		return adapters.Instance{}, err
	}
	if req.FromSnapshot != "" {
		// This adapter takes no snapshots, so no ref can be one of its snapshots.
		return adapters.Instance{}, adapters.InvalidRequest("snapshot %q not found", req.FromSnapshot)
	}
	if !safeID.MatchString(req.ID) {
		return adapters.Instance{}, adapters.InvalidRequest("sandbox id %q is not a plain name", req.ID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Idempotent on the sandbox ID: the instance is found by it, whatever happened to
	// an earlier call's answer.
	if inst, err := l.Get(ctx, req.ID); err == nil {
		return inst, nil
	}
	dir := filepath.Join(l.root, req.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return adapters.Instance{}, adapters.Unavailable("create %s: %v", req.ID, err)
	}
	data, err := json.Marshal(record{SandboxID: req.ID, Installation: req.Installation, Env: req.Env})
	if err != nil {
		return adapters.Instance{}, err
	}
	// The record appears whole or not at all, so a crash mid-Create leaves a
	// directory that Get does not take for an instance and the retry completes.
	tmp := filepath.Join(dir, recordFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return adapters.Instance{}, adapters.Unavailable("create %s: %v", req.ID, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, recordFile)); err != nil {
		return adapters.Instance{}, adapters.Unavailable("create %s: %v", req.ID, err)
	}
	return adapters.Instance{Ref: req.ID, SandboxID: req.ID, State: adapters.StateRunning}, nil
}

func (l *lab) read(ref string) (record, error) {
	dir, err := l.dir(ref)
	if err != nil {
		return record{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, adapters.NotFound("instance %q not found", ref)
	}
	if err != nil {
		return record{}, adapters.Unavailable("read %s: %v", ref, err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, adapters.Unavailable("read %s: %v", ref, err)
	}
	return r, nil
}

func (l *lab) Get(_ context.Context, ref string) (adapters.Instance, error) {
	r, err := l.read(ref)
	if err != nil {
		return adapters.Instance{}, err
	}
	return adapters.Instance{Ref: ref, SandboxID: r.SandboxID, State: adapters.StateRunning}, nil
}

func (l *lab) List(_ context.Context, installation string) ([]adapters.Instance, error) {
	entries, err := os.ReadDir(l.root)
	if err != nil {
		// Never part of a list: the reconciler would take the rest for gone.
		return nil, adapters.Unavailable("list: %v", err)
	}
	out := []adapters.Instance{}
	for _, e := range entries {
		if !e.IsDir() || !safeID.MatchString(e.Name()) {
			continue
		}
		r, err := l.read(e.Name())
		if api.IsCode(err, api.CodeNotFound) {
			continue // a Create that never finished, or a Delete under way
		}
		if err != nil {
			return nil, err
		}
		if r.Installation == installation {
			out = append(out, adapters.Instance{Ref: e.Name(), SandboxID: r.SandboxID, State: adapters.StateRunning})
		}
	}
	return out, nil
}

func (l *lab) Delete(_ context.Context, ref string) error {
	dir, err := l.dir(ref)
	if err != nil {
		return nil // no such instance can exist: deleting it succeeds
	}
	// The record goes first, so that a Delete cut short leaves no half instance
	// that Get or List would report.
	if err := os.Remove(filepath.Join(dir, recordFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return adapters.Unavailable("delete %s: %v", ref, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return adapters.Unavailable("delete %s: %v", ref, err)
	}
	return nil
}

func (l *lab) Exec(ctx context.Context, ref string, req api.ExecRequest) (api.ExecResult, error) {
	if err := req.Validate(); err != nil {
		return api.ExecResult{}, err
	}
	r, err := l.read(ref)
	if err != nil {
		return api.ExecResult{}, err
	}
	dir := filepath.Join(l.root, ref)
	cwd := dir
	if req.Cwd != "" {
		// Relative to the instance, and never out of it.
		if filepath.IsAbs(req.Cwd) || !filepath.IsLocal(req.Cwd) {
			return api.ExecResult{}, adapters.InvalidRequest("cwd %q must be a relative path inside the sandbox", req.Cwd)
		}
		cwd = filepath.Join(dir, req.Cwd)
	}
	timeout := defaultTimeout
	if req.TimeoutSeconds > 0 {
		timeout = time.Duration(req.TimeoutSeconds) * time.Second
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cmd *exec.Cmd
	if req.Command != "" {
		cmd = exec.CommandContext(runCtx, "/bin/sh", "-c", req.Command)
	} else {
		cmd = exec.CommandContext(runCtx, req.Args[0], req.Args[1:]...)
	}
	// A killed shell may leave children holding the output pipes: stop waiting for
	// them a moment after the kill.
	cmd.WaitDelay = time.Second
	cmd.Dir = cwd
	// The command sees the host's PATH and the sandbox's env, never the plugin's own
	// environment (its token, say).
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range r.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(req.Stdin)
	var stdout, stderr adapters.OutputBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	res := api.ExecResult{Stdout: stdout.String(), Stderr: stderr.String(),
		Truncated: stdout.Truncated() || stderr.Truncated(), DurationMs: time.Since(start).Milliseconds()}
	var exitErr *exec.ExitError
	switch {
	case errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		res.ExitCode, res.TimedOut = api.TimeoutExitCode, true
	case ctx.Err() != nil:
		return api.ExecResult{}, ctx.Err()
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		// The program is not there: the answer a shell gives, as a result.
		res.ExitCode, res.Stderr = 127, err.Error()+"\n"
	case err != nil:
		return api.ExecResult{}, adapters.Unavailable("exec: %v", err)
	}
	return res, nil
}
