package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/different-ai/differently/api"
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
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into or out of a sandbox",
		Long: fmt.Sprintf(`Copy one file between this machine and a sandbox. The sandbox's side is ID:PATH; a
local - is stdin or stdout. A destination ending in / is a directory: the file keeps
its name. Files are at most %d MiB.`, api.MaxFileBytes>>20),
		Example: `  differently cp ./build.sh sb_01J...:/work/build.sh
  differently cp sb_01J...:/work/report.txt .
  differently cp sb_01J...:/etc/os-release -`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: a.completeSandboxes,
		RunE: func(cmd *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := remotePath(args[0])
			dstID, dstPath, dstRemote := remotePath(args[1])
			if srcRemote == dstRemote {
				return usagef("one side must be a sandbox's (ID:PATH) and the other a local path")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if dstRemote {
				var data []byte
				if args[0] == "-" {
					data, err = readAllLimited(a.io.in)
				} else {
					data, err = readFileLimited(args[0])
				}
				if err != nil {
					return err
				}
				if dstPath == "" || strings.HasSuffix(dstPath, "/") {
					if args[0] == "-" {
						return usagef("copying stdin needs a destination file name")
					}
					dstPath += filepath.Base(args[0])
				}
				if err := c.WriteSandboxFile(a.ctx, dstID, dstPath, data); err != nil {
					return err
				}
				a.progress("copied %d bytes to %s:%s", len(data), dstID, dstPath)
				return nil
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
}

func readFileLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, usagef("%s is a directory: cp copies one file", name)
	}
	return readAllLimited(f)
}
