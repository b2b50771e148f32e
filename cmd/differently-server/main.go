// Command differently-server is the Differently control-plane daemon and its tools.
//
//	differently-server adapter serve --adapter devhost|fake [--listen ADDR] [--root DIR] [--config-json JSON]
//	differently-server adapter conformance --endpoint URL [--simulated-exec] [--workdir DIR] [--template T]
//
// The daemon itself (--dev, --config, preflight) is not built yet.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "differently-server: %q is not available yet: this build has the adapter tools only; the daemon (--dev, --config, preflight) is still to be written\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  differently-server adapter serve --adapter devhost|fake [--listen ADDR] [--root DIR] [--config-json JSON]
      serve an in-process adapter over the adapter HTTP protocol
      (token from DIFFERENTLY_ADAPTER_TOKEN; without one, only loopback addresses)
  differently-server adapter conformance --endpoint URL [--simulated-exec] [--workdir DIR] [--template T]
      run the adapter conformance suite against a protocol endpoint
      (token from DIFFERENTLY_ADAPTER_TOKEN)
`)
}
