package main

//go:generate go run . gen-docs ../../docs/cli

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// genDocsCmd writes docs/cli/, a Markdown page per command, from the command tree
// itself: `go generate` runs it, and `make generate` in CI fails when the committed
// pages differ.
func (a *app) genDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write the Markdown reference pages of every command into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			// Pages of commands that no longer exist go.
			old, _ := filepath.Glob(filepath.Join(dir, "differently*.md"))
			for _, f := range old {
				if err := os.Remove(f); err != nil {
					return err
				}
			}
			root := cmd.Root()
			// No date line: the pages must come out the same on every run.
			root.DisableAutoGenTag = true
			return doc.GenMarkdownTree(root, dir)
		},
	}
}
