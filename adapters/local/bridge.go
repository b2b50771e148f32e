package local

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// bridgeArg, as a program's first argument, asks it to be the egress bridge: the
// adapter starts the daemon's own executable that way inside the sandbox (see
// RunBridge).
const bridgeArg = "__differently-local-egress-bridge"

// Paths inside an allow-list pool's sandbox: the bridge's executable and the
// proxy's socket, bound there for each command.
const (
	bridgeDir    = "/run/differently"
	bridgeExe    = bridgeDir + "/bridge"
	bridgeSocket = bridgeDir + "/egress.sock"
)

// RunBridge is the egress bridge when args (os.Args) ask for it, and reports
// ok = false otherwise. A program that serves local pools whose config sets
// egress: allowlist calls it first thing in main (as differently-server does), and
// exits with code when ok:
//
//	if code, ok := local.RunBridge(os.Args); ok {
//		os.Exit(code)
//	}
//
// The bridge runs inside the sandbox, in its network namespace, which has only
// loopback: it listens on 127.0.0.1:3128, where HTTP_PROXY points, passes each
// connection to the proxy's Unix socket bound into the sandbox, runs the command,
// and exits with the command's status. It adds no way out: the socket is the
// adapter's proxy, which holds every connection to the pool's allow-list.
func RunBridge(args []string) (code int, ok bool) {
	if len(args) < 5 || args[1] != bridgeArg || args[3] != "--" {
		return 0, false
	}
	return bridge(args[2], args[4:], os.Stdin, os.Stdout, os.Stderr), true
}

func bridge(socket string, command []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", egressPort))
	if err != nil {
		fmt.Fprintf(stderr, "differently: egress bridge: %v\n", err)
		return 125
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed: the command has ended
			}
			go func() { // ends when either side does; the namespace ends with the command
				up, err := net.Dial("unix", socket)
				if err != nil {
					_ = c.Close()
					return
				}
				splice(c, up)
			}()
		}
	})

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", command[0], unwrapPathError(err))
		if errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	wg.Go(func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	})
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(stderr, "differently: egress bridge: %v\n", err)
		return 125
	}
	return 0
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
