package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

// remotePath splits ID:/path; ok is false for a local path. A local path with a colon
// in it is written ./like:this.
func remotePath(s string) (id, p string, ok bool) {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return "", "", false
	}
	id, p, ok = strings.Cut(s, ":")
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", "", false
	}
	return id, p, true
}

func (a *app) cpCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files into or out of a sandbox",
		Long: fmt.Sprintf(`Copy a file, or with -r a directory, between this machine and a sandbox. The
sandbox's side is ID:PATH; a local - is stdin or stdout.

A destination ending in / (or an existing local directory) is where the source goes
under its own name; any other destination is the copy's name. Each file is at most
%d MiB. Directories copied into a sandbox bring their regular files and the
directories that hold them: the API creates a file's parents, so an empty directory
is not created there, and a symbolic link is skipped with a warning. Directories
copied out of a sandbox come back whole, empty ones included, with their files'
permission bits.`, api.MaxFileBytes>>20),
		Example: `  differently cp ./build.sh sb_01J...:/work/build.sh
  differently cp sb_01J...:/work/report.txt .
  differently cp sb_01J...:/etc/os-release -
  differently cp -r ./src sb_01J...:/work/
  differently cp -r sb_01J...:/work/out ./out`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := remotePath(args[0])
			dstID, dstPath, dstRemote := remotePath(args[1])
			if srcRemote == dstRemote {
				return usagef("one side must be a sandbox's (ID:PATH) and the other a local path")
			}
			if recursive && (args[0] == "-" || args[1] == "-") {
				return usagef("-r copies directories; stdin and stdout carry one file")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			switch {
			case dstRemote && recursive:
				return a.uploadTree(c, args[0], dstID, dstPath)
			case dstRemote:
				return a.upload(c, args[0], dstID, dstPath)
			case recursive:
				return a.downloadTree(c, srcID, srcPath, args[1])
			}
			data, err := c.ReadSandboxFile(a.ctx, srcID, srcPath)
			if err != nil {
				return err
			}
			if args[1] == "-" {
				_, err = a.io.out.Write(data)
				return err
			}
			dst := args[1]
			if st, err := os.Stat(dst); err == nil && st.IsDir() || strings.HasSuffix(dst, string(os.PathSeparator)) {
				dst = filepath.Join(dst, path.Base(srcPath))
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return err
			}
			a.progress("copied %d bytes to %s", len(data), dst)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "copy a directory and everything under it")
	return cmd
}

func (a *app) upload(c *client.Client, src, id, dst string) error {
	var data []byte
	var err error
	if src == "-" {
		data, err = readAllLimited(a.io.in)
	} else {
		data, err = readFileLimited(src)
	}
	if err != nil {
		return err
	}
	if dst == "" || strings.HasSuffix(dst, "/") {
		if src == "-" {
			return usagef("copying stdin needs a destination file name")
		}
		dst += filepath.Base(src)
	}
	if err := c.WriteSandboxFile(a.ctx, id, dst, data); err != nil {
		return err
	}
	a.progress("copied %d bytes to %s:%s", len(data), id, dst)
	return nil
}

// uploadTree copies the local directory src to dst in sandbox id, one file a
// request, stopping at the first failure with the file's name in the error.
func (a *app) uploadTree(c *client.Client, src, id, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return a.upload(c, src, id, dst)
	}
	root := strings.TrimSuffix(dst, "/")
	if dst == "" || strings.HasSuffix(dst, "/") {
		root = path.Join(dst, filepath.Base(filepath.Clean(src)))
	}
	var files, bytes int
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			a.warn("skipped %s: not a regular file", p)
			return nil
		}
		data, err := readFileLimited(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		to := path.Join(root, filepath.ToSlash(rel))
		if err := c.WriteSandboxFile(a.ctx, id, to, data); err != nil {
			return fmt.Errorf("%s to %s:%s: %w", p, id, to, err)
		}
		files++
		bytes += len(data)
		return nil
	})
	if err != nil {
		return err
	}
	a.progress("copied %d files, %d bytes, to %s:%s", files, bytes, id, root)
	return nil
}

// downloadTree copies the directory src of sandbox id to the local path dst.
// Entry names come from the sandbox's backend, so each is checked to be one plain
// path element before it is joined to a local path: a backend must not be able to
// write outside dst.
func (a *app) downloadTree(c *client.Client, id, src, dst string) error {
	if st, err := os.Stat(dst); err == nil && st.IsDir() || strings.HasSuffix(dst, string(os.PathSeparator)) {
		base := path.Base(path.Clean("/" + src))
		if base == "/" {
			return usagef("copying a sandbox's root needs a destination that is not an existing directory")
		}
		dst = filepath.Join(dst, base)
	}
	var files, bytes int
	var walk func(remote, local string, depth int) error
	walk = func(remote, local string, depth int) error {
		if depth > maxCopyDepth {
			return fmt.Errorf("%s:%s: directories nested deeper than %d", id, remote, maxCopyDepth)
		}
		entries, err := c.ListSandboxFiles(a.ctx, id, remote)
		if err != nil {
			return fmt.Errorf("listing %s:%s: %w", id, remote, err)
		}
		if err := os.MkdirAll(local, 0o755); err != nil {
			return err
		}
		for _, e := range entries {
			if !plainName(e.Name) {
				return fmt.Errorf("%s:%s holds an entry named %q, which is not a file name", id, remote, e.Name)
			}
			from, to := path.Join(remote, e.Name), filepath.Join(local, e.Name)
			if e.IsDir {
				if err := walk(from, to, depth+1); err != nil {
					return err
				}
				continue
			}
			data, err := c.ReadSandboxFile(a.ctx, id, from)
			if err != nil {
				return fmt.Errorf("reading %s:%s: %w", id, from, err)
			}
			perm := fs.FileMode(e.Mode).Perm()
			if perm == 0 {
				perm = 0o644
			}
			if err := os.WriteFile(to, data, perm); err != nil {
				return err
			}
			// WriteFile leaves an existing file's mode alone; the copy's mode is the source's.
			if err := os.Chmod(to, perm); err != nil {
				return err
			}
			files++
			bytes += len(data)
		}
		return nil
	}
	if err := walk(src, dst, 0); err != nil {
		return err
	}
	a.progress("copied %d files, %d bytes, to %s", files, bytes, dst)
	return nil
}

// maxCopyDepth bounds a download's recursion: a backend that reports a directory
// inside itself forever must not run the CLI out of stack.
const maxCopyDepth = 256

// plainName reports whether name is one path element that stays where it is put.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func readFileLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, usagef("%s is a directory: cp -r copies directories", name)
	}
	return readAllLimited(f)
}
