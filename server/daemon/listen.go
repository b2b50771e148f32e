package daemon

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"github.com/different-ai/differently/server/defaults"
)

// ListenAddress checks a listen address before anything else of the daemon starts,
// so that a typo is reported before a data folder, a database or a token exists. A
// bare port ("18702") means that port on the loopback address, as the default
// address is loopback: someone changing only the port does not expect the API to
// become reachable from the network.
func ListenAddress(addr string) (string, error) {
	if addr == "" {
		return defaults.Listen, nil
	}
	if n, err := strconv.Atoi(addr); err == nil {
		if n < 0 || n > 65535 {
			return "", fmt.Errorf("listen address %q: a port is 0 to 65535", addr)
		}
		return net.JoinHostPort("127.0.0.1", addr), nil
	}
	// The port itself is left to net.Listen, which comes next and knows service
	// names too.
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("listen address %q needs host:port, e.g. %s (or :%s for every interface)", addr, defaults.Listen, defaults.Port)
	}
	return addr, nil
}

// listen binds the API's address. A port in use gets a hint, since the usual cause
// is a daemon started earlier and still running.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen: %w (a daemon started earlier may still be running: stop it, or pass --listen with another port)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}
