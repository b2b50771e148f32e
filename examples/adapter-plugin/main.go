// Command adapter-plugin is a community adapter served out of process: a "lab"
// backend whose instances are directories on the plugin's machine and whose commands
// run there, behind the adapter HTTP protocol. A remote pool of the daemon points at
// it. It shows the shape of a plugin, not a backend to trust: nothing isolates one
// instance from another or from the host.
//
//	LAB_ADAPTER_TOKEN=... go run ./examples/adapter-plugin --root /tmp/lab --listen 127.0.0.1:8720
//
// and in the daemon's config file:
//
//	pools:
//	  - name: lab
//	    adapter: remote
//	    trust: private
//	    config: {endpoint: "http://127.0.0.1:8720"}
//	    credentials: {env: LAB_ADAPTER_TOKEN}
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/different-ai/differently/adapters/adapterhttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8720", "address to serve the adapter protocol on")
	root := flag.String("root", "", "directory that holds the instances (required)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *root, os.Getenv("LAB_ADAPTER_TOKEN")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, listen, root, token string) error {
	if root == "" {
		return errors.New("--root is required")
	}
	if token == "" && !adapterhttp.IsLoopbackHost(listen) {
		// Anyone who reaches the port could run commands on this machine.
		return errors.New("without LAB_ADAPTER_TOKEN the plugin serves loopback addresses only")
	}
	lab, err := newLab(root)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// Handler does the protocol: routes, the bearer token, the protocol header, JSON
	// and NDJSON, deadlines, and 501 for what the adapter does not declare.
	srv := &http.Server{Handler: adapterhttp.Handler(lab, token)}
	fmt.Printf("lab adapter listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
