package sandboxes

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/apierr"
	"github.com/different-ai/differently/server/store"
)

// fileTarget loads a running sandbox whose pool serves files.
func (s *Service) fileTarget(ctx context.Context, c Caller, id, op, path string) (target, adapters.FileSystem, error) {
	if path == "" {
		return target{}, nil, apierr.Invalid("a file path is required")
	}
	t, err := s.operate(ctx, c, id, op, adapters.FeatureFiles, store.StateRunning)
	if err != nil {
		return target{}, nil, err
	}
	fs, err := optional[adapters.FileSystem](t, op)
	return t, fs, err
}

// ListFiles lists a directory of a running sandbox (not recursively).
func (s *Service) ListFiles(ctx context.Context, c Caller, id, path string) ([]adapters.FileInfo, error) {
	const op = "files.list"
	t, fs, err := s.fileTarget(ctx, c, id, op, path)
	if err != nil {
		return nil, err
	}
	items, err := fs.ListFiles(ctx, t.sb.BackendRef, path)
	if err != nil {
		return nil, adapterError(err, op, t.view)
	}
	return items, nil
}

// transferSlot takes a slot of the large-transfer bound for t's project when a
// transfer of size bytes (negative: unknown) counts; release is never nil.
func (s *Service) transferSlot(t target, size int64) (release func(), err error) {
	if !s.transfers.counts(size) {
		return func() {}, nil
	}
	return s.transfers.acquire(t.sb.Org + "/" + t.sb.Project)
}

// File is a file being read out of a sandbox. Its reader yields the whole file or
// fails: a file is never handed on cut short without an error. Close must be
// called once the file has been read (or abandoned): it frees the adapter's reader
// and the transfer slot.
type File struct {
	io.Reader
	// Size is the file's length in bytes, -1 when the adapter did not say.
	Size  int64
	close func()
}

// Close frees what the read holds.
func (f *File) Close() error {
	f.close()
	return nil
}

// firstPiece is how much of a streamed file is read before ReadFile returns, so that
// an adapter failing at the start still fails the call, which its caller can then
// answer as an error rather than as a broken transfer.
const firstPiece = 32 << 10

// ReadFile opens a file of a running sandbox. A file over api.MaxFileBytes is
// payload_too_large. Where the adapter streams files, the content flows through as
// the caller reads it; otherwise the adapter hands it over whole. Either way a large
// read (or one of unknown size) holds a transfer slot until Close.
func (s *Service) ReadFile(ctx context.Context, c Caller, id, path string) (*File, error) {
	const op = "files.read"
	t, fs, err := s.fileTarget(ctx, c, id, op, path)
	if err != nil {
		return nil, err
	}
	if st, ok := fs.(adapters.FileStreamer); ok {
		return s.streamFile(ctx, t, st, path)
	}
	// The adapter hands the file over whole, and its size is not known before.
	release, err := s.transferSlot(t, -1)
	if err != nil {
		return nil, err
	}
	data, err := fs.ReadFile(ctx, t.sb.BackendRef, path)
	if err != nil {
		release()
		return nil, adapterError(err, op, t.view)
	}
	// The contract forbids a larger answer; refusing beats passing a cut file on.
	if len(data) > api.MaxFileBytes {
		release()
		return nil, api.Errorf(api.CodePayloadTooLarge, "file %s is over %d bytes", path, api.MaxFileBytes)
	}
	return &File{Reader: bytes.NewReader(data), Size: int64(len(data)), close: release}, nil
}

func (s *Service) streamFile(ctx context.Context, t target, st adapters.FileStreamer, path string) (*File, error) {
	const op = "files.read"
	f, size, err := st.OpenFile(ctx, t.sb.BackendRef, path)
	if err != nil {
		return nil, adapterError(err, op, t.view)
	}
	if size > api.MaxFileBytes {
		f.Close()
		return nil, api.Errorf(api.CodePayloadTooLarge, "file %s is over %d bytes", path, api.MaxFileBytes)
	}
	release, err := s.transferSlot(t, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	done := func() {
		release()
		f.Close()
	}
	first := make([]byte, firstPiece)
	n, err := io.ReadFull(f, first)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		done()
		return nil, adapterError(err, op, t.view)
	}
	src := io.Reader(bytes.NewReader(first[:n]))
	if err == nil { // the file goes on past its first piece
		src = io.MultiReader(src, f)
	}
	return &File{Reader: src, Size: size, close: done}, nil
}

// Content is a file upload's bytes as the caller receives them. WriteFile takes them
// one of two ways, as the pool's adapter can: Stream, as they arrive, or ReadAll,
// whole. Errors of Done and ReadAll are the sender's (a body too long, too slow or
// broken off), as *api.Error, and are returned in place of the adapter's.
type Content interface {
	// Size is the length announced, -1 when unknown: it decides whether the upload
	// takes a transfer slot.
	Size() int64
	// Stream returns the content to read as it arrives.
	Stream() io.Reader
	// Done is called once the adapter has finished with Stream's reader, with
	// whether the write failed; it returns the failure of reading the content, if
	// any.
	Done(failed bool) error
	// ReadAll reads the whole content.
	ReadAll() ([]byte, error)
}

// WriteFile creates or replaces a file of a running sandbox with content. A large
// upload (or one of unknown size) holds a transfer slot while it runs; one refused a
// slot wraps ErrTransferLimit, and its content is not read.
func (s *Service) WriteFile(ctx context.Context, c Caller, id, path string, content Content) error {
	const op = "files.write"
	t, fs, err := s.fileTarget(ctx, c, id, op, path)
	if err != nil {
		return err
	}
	release, err := s.transferSlot(t, content.Size())
	if err != nil {
		return err
	}
	defer release()
	if st, ok := fs.(adapters.FileStreamer); ok {
		// The content goes to the adapter as it arrives: a 100 MiB upload takes a
		// buffer's worth of the daemon's memory, not 100 MiB.
		err := st.WriteFileFrom(ctx, t.sb.BackendRef, path, content.Stream())
		if rerr := content.Done(err != nil); rerr != nil {
			return rerr
		}
		if err != nil {
			return adapterError(err, op, t.view)
		}
		return nil
	}
	data, err := content.ReadAll()
	if err != nil {
		return err
	}
	if err := fs.WriteFile(ctx, t.sb.BackendRef, path, data); err != nil {
		return adapterError(err, op, t.view)
	}
	return nil
}
