// Command go-client is a tour of the Go client: it creates a sandbox, waits until it
// runs, streams a command's output, writes and reads back a file, and deletes the
// sandbox. The tests build and run it against a real daemon, so it stays correct.
//
//	DIFFERENTLY_ENDPOINT=http://127.0.0.1:8700 DIFFERENTLY_TOKEN=... go run ./examples/go-client -pool devhost
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/client"
)

func main() {
	pool := flag.String("pool", "devhost", "pool to create the sandbox on")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *pool); err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, pool string) error {
	endpoint, token := os.Getenv("DIFFERENTLY_ENDPOINT"), os.Getenv("DIFFERENTLY_TOKEN")
	if endpoint == "" || token == "" {
		return errors.New("set DIFFERENTLY_ENDPOINT (the daemon's URL) and DIFFERENTLY_TOKEN (an API token)")
	}
	c, err := client.New(endpoint, token)
	if err != nil {
		return err
	}

	// The idempotency key makes the create safe to retry: a repeat returns the same
	// sandbox instead of a second one.
	sb, err := c.CreateSandbox(ctx, client.SandboxCreate{
		Placement: &client.Placement{AllowedPools: &[]string{pool}},
		Labels:    &map[string]string{"example": "go-client"},
	}, fmt.Sprintf("go-client-%d", time.Now().UnixNano()))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	fmt.Println("created", sb.Id)

	// Delete whatever happens next, with a fresh context so an interrupt still cleans up.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.DeleteSandbox(ctx, sb.Id); err != nil {
			fmt.Fprintln(os.Stderr, "go-client: delete:", err)
		}
	}()

	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if sb, err = c.WaitForState(waitCtx, sb.Id, client.Running); err != nil {
		return err
	}
	fmt.Println("running on", *sb.Pool)

	// Events arrive as the command produces them, in chunks that need not be whole
	// lines; the last one carries the exit code.
	cmd := api.ExecRequest{Command: "for i in 1 2 3; do echo tick $i; done; echo done >&2"}
	for ev, err := range c.ExecSandboxStream(ctx, sb.Id, cmd) {
		if err != nil {
			return fmt.Errorf("exec: %w", err)
		}
		if ev.IsFinal() {
			fmt.Println("exit code", *ev.ExitCode)
			break
		}
		out := os.Stdout
		if ev.Stream == api.StreamStderr {
			out = os.Stderr
		}
		fmt.Fprint(out, ev.Data)
	}

	if err := c.WriteSandboxFile(ctx, sb.Id, "hello.txt", []byte("hello from go-client\n")); err != nil {
		return fmt.Errorf("write file: %w", err)
	}
	data, err := c.ReadSandboxFile(ctx, sb.Id, "hello.txt")
	if err != nil {
		return fmt.Errorf("read file: %w", err)
	}
	fmt.Printf("hello.txt: %s", data)

	if _, err := c.DeleteSandbox(ctx, sb.Id); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if _, err := c.WaitForState(waitCtx, sb.Id, client.Terminated); err != nil {
		return err
	}
	fmt.Println("terminated", sb.Id)
	return nil
}
