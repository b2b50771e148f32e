package adapterhttp

import (
	"github.com/different-ai/differently/internal/tracing"
	"go.opentelemetry.io/otel/trace"

	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/internal/body"
)

// infoResponse is the body of GET /info.
type infoResponse struct {
	Info         adapters.Info         `json:"info"`
	Capabilities adapters.Capabilities `json:"capabilities"`
	// TTLRenewal declares POST /instances/{ref}/ttl: the adapter implements
	// adapters.TTLRenewer. It backs no feature name, as TTLRenewer backs none, so it is
	// declared beside the features rather than among them. Absent (false) means the
	// backend keeps no expiry of its own that the control plane must move.
	TTLRenewal bool `json:"ttlRenewal,omitempty"`
}

// ttlRequest is the body of POST /instances/{ref}/ttl. TTLSeconds is required, so
// that an empty body cannot remove an expiry by accident.
type ttlRequest struct {
	TTLSeconds *int64 `json:"ttlSeconds"`
}

type healthResponse struct {
	Status string `json:"status"`
}

type snapshotRequest struct {
	Kind adapters.SnapshotKind `json:"kind"`
}

type portRequest struct {
	Port int `json:"port"`
}

type portResponse struct {
	URL string `json:"url"`
}

func (h *handler) info(w http.ResponseWriter, r *http.Request) error {
	caps, err := h.a.Capabilities(r.Context())
	if err != nil {
		return err
	}
	// Clients trust this list as the pool's features, so it must already say what
	// this adapter can serve, not what it claims.
	caps.Features = adapters.EffectiveFeatures(h.a, caps.Features)
	info := h.a.Info()
	info.Protocol = adapters.ProtocolVersion
	_, renews := h.a.(adapters.TTLRenewer)
	writeJSON(w, http.StatusOK, infoResponse{Info: info, Capabilities: caps, TTLRenewal: renews})
	return nil
}

func (h *handler) capacity(w http.ResponseWriter, r *http.Request) error {
	c, err := h.a.Capacity(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) error {
	if err := h.a.Health(r.Context()); err != nil {
		// Any failed probe means the pool cannot take work; an uncoded error would
		// otherwise read as a 500 bug rather than an outage.
		if api.AsError(err) == nil {
			err = adapters.Unavailable("%v", err)
		}
		return err
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
	return nil
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) error {
	var req adapters.CreateRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	trace.SpanFromContext(r.Context()).SetAttributes(tracing.SandboxID.String(req.ID))
	inst, err := h.a.Create(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, inst)
	return nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) error {
	installation := r.URL.Query().Get("installation")
	if installation == "" {
		return adapters.InvalidRequest("the installation query parameter is required")
	}
	list, err := h.a.List(r.Context(), installation)
	if err != nil {
		return err
	}
	if list == nil {
		list = []adapters.Instance{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) error {
	inst, err := h.a.Get(r.Context(), r.PathValue("ref"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, inst)
	return nil
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) error {
	if err := h.a.Delete(r.Context(), r.PathValue("ref")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) exec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if stream, _ := strconv.ParseBool(r.URL.Query().Get("stream")); stream {
		_, ok := h.a.(adapters.Streamer)
		if err := h.require(r, ok, "exec.stream", adapters.FeatureExecStream); err != nil {
			return err
		}
		h.serveStream(w, r, req)
		return nil
	}
	res, err := h.a.Exec(r.Context(), r.PathValue("ref"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (h *handler) fileSystem(r *http.Request, op string) (adapters.FileSystem, error) {
	fs, ok := h.a.(adapters.FileSystem)
	return fs, h.require(r, ok, op, adapters.FeatureFiles)
}

func (h *handler) listFiles(w http.ResponseWriter, r *http.Request) error {
	path, err := queryPath(r)
	if err != nil {
		return err
	}
	fs, err := h.fileSystem(r, "files.list")
	if err != nil {
		return err
	}
	list, err := fs.ListFiles(r.Context(), r.PathValue("ref"), path)
	if err != nil {
		return err
	}
	if list == nil {
		list = []adapters.FileInfo{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (h *handler) readFile(w http.ResponseWriter, r *http.Request) error {
	path, err := queryPath(r)
	if err != nil {
		return err
	}
	fs, err := h.fileSystem(r, "files.read")
	if err != nil {
		return err
	}
	if st, ok := fs.(adapters.FileStreamer); ok {
		return streamFile(w, r, st, path)
	}
	data, err := fs.ReadFile(r.Context(), r.PathValue("ref"), path)
	if err != nil {
		return err
	}
	// The contract forbids adapters to cut files silently; passing an oversized one on
	// would only move the failure to the client.
	if len(data) > api.MaxFileBytes {
		return adapters.TooLarge("file %s is over %d bytes", path, api.MaxFileBytes)
	}
	w.Header().Set("Content-Type", contentTypeBytes)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	return nil
}

// streamFile answers with a file as the adapter reads it. Once the status is out,
// a failure can only break the connection: the client then sees a transfer that
// failed, never a file that ends early.
func streamFile(w http.ResponseWriter, r *http.Request, st adapters.FileStreamer, path string) error {
	f, size, err := st.OpenFile(r.Context(), r.PathValue("ref"), path)
	if err != nil {
		return err
	}
	defer f.Close()
	if size > api.MaxFileBytes {
		return adapters.TooLarge("file %s is over %d bytes", path, api.MaxFileBytes)
	}
	// The first piece is read before the status is sent, so that an error there
	// still gets its own answer.
	first := make([]byte, 32<<10)
	n, err := io.ReadFull(f, first)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	w.Header().Set("Content-Type", contentTypeBytes)
	if size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, werr := w.Write(first[:n]); werr != nil {
		return nil // the client went away
	}
	if err != nil {
		return nil // all of it was in the first piece
	}
	if _, err := io.Copy(w, f); err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (h *handler) writeFile(w http.ResponseWriter, r *http.Request) error {
	path, err := queryPath(r)
	if err != nil {
		return err
	}
	fs, err := h.fileSystem(r, "files.write")
	if err != nil {
		return err
	}
	if r.ContentLength > api.MaxFileBytes {
		return fileTooLarge()
	}
	limited := http.MaxBytesReader(w, r.Body, api.MaxFileBytes)
	if st, ok := fs.(adapters.FileStreamer); ok {
		src := body.NewStream(w, limited, uploadReadTimeout)
		err := st.WriteFileFrom(r.Context(), r.PathValue("ref"), path, src)
		src.Done(err != nil)
		if rerr := src.Err(); rerr != nil {
			return uploadError(rerr)
		}
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	data, err := body.ReadAllWithin(w, limited, r.ContentLength, uploadReadTimeout)
	if err != nil {
		return uploadError(err)
	}
	if err := fs.WriteFile(r.Context(), r.PathValue("ref"), path, data); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// uploadError is the answer to a file body that could not be read.
func uploadError(err error) error {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return fileTooLarge()
	}
	return adapters.InvalidRequest("reading the file body failed: %v", err)
}

// uploadReadTimeout is how long a file upload's body may take to arrive: 100 MiB at
// about 170 KiB/s, as on the daemon's API.
const uploadReadTimeout = 10 * time.Minute

func fileTooLarge() error {
	return adapters.TooLarge("file content is over %d bytes", api.MaxFileBytes)
}

func (h *handler) action(w http.ResponseWriter, r *http.Request) error {
	ctx, ref, action := r.Context(), r.PathValue("ref"), r.PathValue("action")
	var err error
	switch action {
	case "stop", "start":
		l, ok := h.a.(adapters.Lifecycle)
		if err := h.require(r, ok, action, adapters.FeatureStopStart); err != nil {
			return err
		}
		if action == "stop" {
			err = l.Stop(ctx, ref)
		} else {
			err = l.Start(ctx, ref)
		}
	case "pause", "resume":
		p, ok := h.a.(adapters.Pauser)
		if err := h.require(r, ok, action, adapters.FeaturePauseResume); err != nil {
			return err
		}
		if action == "pause" {
			err = p.Pause(ctx, ref)
		} else {
			err = p.Resume(ctx, ref)
		}
	default:
		return adapters.NotFound("no instance action %q (want stop, start, pause or resume)", action)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) snapshot(w http.ResponseWriter, r *http.Request) error {
	var req snapshotRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.Kind.Validate(); err != nil {
		return err
	}
	feature := adapters.FeatureSnapshotsDisk
	if req.Kind == adapters.SnapshotMemory {
		feature = adapters.FeatureSnapshotsMemory
	}
	s, ok := h.a.(adapters.Snapshotter)
	if err := h.require(r, ok, "snapshots."+string(req.Kind), feature); err != nil {
		return err
	}
	snap, err := s.Snapshot(r.Context(), r.PathValue("ref"), req.Kind)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

func (h *handler) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	s, ok := h.a.(adapters.Snapshotter)
	if err := h.require(r, ok, "snapshots.delete", adapters.FeatureSnapshotsDisk, adapters.FeatureSnapshotsMemory); err != nil {
		return err
	}
	if err := s.DeleteSnapshot(r.Context(), r.PathValue("ref")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *handler) exposePort(w http.ResponseWriter, r *http.Request) error {
	var req portRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Port < 1 || req.Port > 65535 {
		return adapters.InvalidRequest("port must be between 1 and 65535, not %d", req.Port)
	}
	p, ok := h.a.(adapters.PortExposer)
	if err := h.require(r, ok, "ports.expose", adapters.FeaturePortsExpose); err != nil {
		return err
	}
	url, err := p.ExposePort(r.Context(), r.PathValue("ref"), req.Port)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, portResponse{URL: url})
	return nil
}

// renewTTL serves POST /instances/{ref}/ttl. TTLRenewer backs no feature, so only the
// interface is checked: an adapter without it answers 501, and /info does not declare
// ttlRenewal.
func (h *handler) renewTTL(w http.ResponseWriter, r *http.Request) error {
	var req ttlRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.TTLSeconds == nil:
		return adapters.InvalidRequest("ttlSeconds is required (0 removes the expiry)")
	case *req.TTLSeconds < 0:
		return adapters.InvalidRequest("ttlSeconds must not be negative, not %d", *req.TTLSeconds)
	}
	renewer, ok := h.a.(adapters.TTLRenewer)
	if !ok {
		return adapters.Unsupported("ttl.renew")
	}
	if err := renewer.RenewTTL(r.Context(), r.PathValue("ref"), *req.TTLSeconds); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
