// Command differently-server is the Differently control-plane daemon and its tools.
//
//	differently-server --dev [--data-dir DIR] [--listen ADDR] [--config FILE] [daemon flags]
//	differently-server --config FILE [--listen ADDR] [daemon flags]
//	differently-server preflight --config FILE [--dev]
//	differently-server token create --config FILE (--admin | --project P [--org O]) [--name N]
//	differently-server adapter serve --adapter devhost|local|fake [--listen ADDR] [--root DIR] [--config-json JSON]
//	differently-server --version
//	differently-server adapter conformance --endpoint URL [--simulated-exec] [--workdir DIR] [--template T]
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/different-ai/differently/adapters/local"
)

func main() {
	// Inside a local sandbox whose pool allows egress, this program is the bridge
	// to the daemon's proxy (see adapters/local): it must not start as a daemon.
	if code, ok := local.RunBridge(os.Args); ok {
		os.Exit(code)
	}
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts a graceful stop; from then on the signals are Go's
	// again, so a second Ctrl-C or SIGTERM ends the process at once. The daemon
	// hears of the stop only once the relay is off, so that no second signal can
	// arrive in between and be swallowed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	context.AfterFunc(signalled, func() {
		stop()
		cancel()
	})
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is main without the process: tests call it with their own streams and env.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "adapter":
		return runAdapter(ctx, args[1:], stdout, stderr, getenv)
	case "preflight":
		return runPreflight(ctx, args[1:], stdout, stderr, getenv)
	case "token":
		return runToken(ctx, args[1:], stdout, stderr, getenv)
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "--version", "version":
		fmt.Fprintln(stdout, "differently-server", version())
		return 0
	}
	if strings.HasPrefix(args[0], "-") {
		return runDaemon(ctx, args, stdout, stderr, getenv)
	}
	fmt.Fprintf(stderr, "differently-server: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// version says which build this is: the module version for a tagged install, and
// the commit it was built from when the build recorded one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" {
		v += " (commit " + rev + modified + ")"
	}
	return v
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  differently-server --dev [--data-dir DIR] [--listen ADDR] [--config FILE] [daemon flags]
      run the daemon on its embedded SQLite store with the devhost and fake pools (and local where bwrap runs)
  differently-server --config FILE [--listen ADDR] [daemon flags]
      run the daemon for production (database, TLS, scheduler and pools from FILE)
  differently-server preflight --config FILE [--dev]
      check the config, the database, every credential reference and every pool
  differently-server token create --config FILE (--admin | --project P [--org O]) [--name N]
      create an API token and print its secret once
  differently-server adapter serve --adapter devhost|local|fake [--listen ADDR] [--root DIR] [--config-json JSON]
      serve an in-process adapter over the adapter HTTP protocol
      (token from DIFFERENTLY_ADAPTER_TOKEN; without one, only loopback addresses)
  differently-server adapter conformance --endpoint URL [--simulated-exec] [--workdir DIR] [--template T]
      run the adapter conformance suite against a protocol endpoint
      (token from DIFFERENTLY_ADAPTER_TOKEN)
  differently-server --version
      print the build's version and commit

`)
	printDaemonFlags(w)
}
