package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/different-ai/differently/client"
)

// streams are the process's standard streams; tests of the command tree swap them.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// app is one invocation: its streams, environment, global flags and, once resolved,
// its connection. Nothing of it is global, so every test builds its own.
type app struct {
	ctx    context.Context
	io     streams
	getenv func(string) string

	// Global flags.
	endpoint, token, tokenFile string
	contextName, configPath    string
	output                     string
	quiet                      bool

	conn *connection
	c    *client.Client
}

// usageError marks a mistake in the command line itself: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCode carries an exit code decided by the command (exec's pass-through of the
// remote command's code), with nothing more to print.
type exitCode struct{ code int }

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", e.code) }

// run is main without the process: it parses args, runs the command and returns the
// exit code (docs/cli.md#exit-codes).
func run(ctx context.Context, args []string, s streams, getenv func(string) string) int {
	a := &app{ctx: ctx, io: s, getenv: getenv}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	return a.fail(cmd, err)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "differently",
		Short: "Drive a Differently control plane: sandboxes, commands, files and the admin API",
		Long: `differently talks to a Differently daemon over its HTTP API.

The daemon and token come from --endpoint and --token, else DIFFERENTLY_ENDPOINT and
DIFFERENTLY_TOKEN, else the current context of the config file
(differently context --help), else a development daemon on this machine:
http://127.0.0.1:8700 with the admin token that differently-server --dev wrote to
its data folder.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.endpoint, "endpoint", "", "the daemon's URL (env DIFFERENTLY_ENDPOINT; default: the context's, else http://127.0.0.1:8700)")
	pf.StringVar(&a.token, "token", "", "API token (env DIFFERENTLY_TOKEN; prefer the env or --token-file: a flag shows in the process list)")
	pf.StringVar(&a.tokenFile, "token-file", "", "read the API token from this `file`")
	pf.StringVar(&a.contextName, "context", "", "use this context of the config file (env DIFFERENTLY_CONTEXT)")
	pf.StringVar(&a.configPath, "config", "", "config `file` (env DIFFERENTLY_CONFIG; default: differently/config.yaml in the user config folder)")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table, json, yaml or id")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "no progress messages on stderr")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml", "id"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("context", a.completeContexts)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		switch a.output {
		case "table", "json", "yaml", "id":
		default:
			return usagef("--output %q: use table, json, yaml or id", a.output)
		}
		return nil
	}

	root.AddGroup(&cobra.Group{ID: "sandbox", Title: "Sandboxes:"}, &cobra.Group{ID: "admin", Title: "Administration (admin token):"},
		&cobra.Group{ID: "setup", Title: "Setup:"})
	for _, c := range a.sandboxCmds() {
		c.GroupID = "sandbox"
		root.AddCommand(c)
	}
	for _, c := range a.adminCmds() {
		c.GroupID = "admin"
		root.AddCommand(c)
	}
	ctxCmd := a.contextCmd()
	ctxCmd.GroupID = "setup"
	root.AddCommand(ctxCmd, a.genDocsCmd())
	root.SetHelpCommandGroupID("setup")
	root.SetCompletionCommandGroupID("setup")
	usageArgs(root)
	return root
}

// usageArgs makes every wrong count of arguments a usage error (exit 2), as a wrong
// flag is.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// client connects on first use, so that help, completion scripts and the context
// commands work without a daemon.
func (a *app) client() (*client.Client, error) {
	if a.c != nil {
		return a.c, nil
	}
	conn, err := a.resolve()
	if err != nil {
		return nil, err
	}
	c, err := client.New(conn.endpoint, conn.token, client.WithUserAgent("differently-cli"),
		// A person waits at the prompt: a daemon that is down is said within a
		// second rather than after the library's longer backoff.
		client.WithRetry(3, 100*time.Millisecond, 2*time.Second))
	if err != nil {
		return nil, usageError{err}
	}
	a.conn, a.c = conn, c
	return c, nil
}

// isTerminal reports whether w is a terminal: colour goes to stdout only then, and the
// spinner to stderr only then.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colour reports whether w gets colour: a terminal, and NO_COLOR unset or empty
// (no-color.org), and TERM not dumb.
func (a *app) colour(w io.Writer) bool {
	return isTerminal(w) && a.getenv("NO_COLOR") == "" && a.getenv("TERM") != "dumb"
}

// progress writes a status line on stderr (sandbox created, waiting, deleted)
// unless --quiet or -o asks for machine output only on stdout; stderr stays free for
// the line either way.
func (a *app) progress(format string, args ...any) {
	if a.quiet {
		return
	}
	fmt.Fprintf(a.io.err, format+"\n", args...)
}

// warn writes a line on stderr that is not the command's error, such as a sandbox
// run could not delete after the command failed. --quiet does not silence it.
func (a *app) warn(format string, args ...any) {
	prefix := "warning:"
	if a.colour(a.io.err) {
		prefix = paint(yellow, prefix)
	}
	fmt.Fprintln(a.io.err, prefix, oneLine(trimPrefix(fmt.Sprintf(format, args...))))
}

// trimPrefix drops the client's "differently: " prefix, which the CLI's own error
// line says already.
func trimPrefix(s string) string {
	return strings.TrimPrefix(s, "differently: ")
}

var errInterrupted = errors.New("interrupted")

// version says which build this is: the module version for a tagged install, and the
// commit it was built from when the build recorded one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " (commit " + s.Value + ")"
		}
	}
	return v
}
