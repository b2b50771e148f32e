package local

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/different-ai/differently/adapters/devhost"
)

// Wrap implements devhost.Jail. The options go through a memfd (--args), so the
// sandbox's environment is not on bwrap's command line for the host to read, and
// bwrap itself runs with an empty environment: it runs as the daemon's user,
// and LD_PRELOAD from a sandbox's env would run the sandbox's code as that user.
func (j *jail) Wrap(sb devhost.JailSandbox, cmd *exec.Cmd) (func(error) error, func(), error) {
	var files []*os.File
	var proxy *egressServer
	fail := func(err error) (func(error) error, func(), error) {
		for _, f := range files {
			_ = f.Close()
		}
		if proxy != nil {
			proxy.close()
		}
		return nil, nil, err
	}
	var socket string
	if j.egress != nil {
		var err error
		if proxy, socket, err = j.listenEgress(); err != nil {
			return fail(err)
		}
	}
	onTerminal := cmd.SysProcAttr != nil && cmd.SysProcAttr.Setctty
	opts := j.options(sb, cmd.Dir, cmd.Env, socket, onTerminal)
	var (
		infoR, infoW, blockR, blockW *os.File
		err                          error
	)
	if j.privateDev {
		if err := makeDevNodes(filepath.Join(filepath.Dir(sb.Dir), "dev")); err != nil {
			return fail(err)
		}
	}
	name := j.cgroupName(sb.ID)
	if j.usesCgroups() {
		if err := j.cg.ensure(name, sb.Resources, j.pidsMax); err != nil {
			return fail(err)
		}
		if infoR, infoW, err = os.Pipe(); err != nil {
			return fail(err)
		}
		files = append(files, infoR, infoW)
		if blockR, blockW, err = os.Pipe(); err != nil {
			return fail(err)
		}
		files = append(files, blockR, blockW)
		// Child fds 4 and 5: ExtraFiles start at 3, which is the options' memfd.
		opts = append(opts, "--info-fd", "4", "--block-fd", "5")
	}
	argsFile, err := memfd("bwrap-args", []byte(strings.Join(opts, "\x00")+"\x00"))
	if err != nil {
		return fail(err)
	}
	files = append(files, argsFile)

	args := []string{j.bwrap, "--args", "3", "--"}
	if proxy != nil {
		args = append(args, bridgeExe, bridgeArg, bridgeSocket, "--")
	}
	cmd.Args = append(append(args, cmd.Path), cmd.Args[1:]...)
	cmd.Path = j.bwrap
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{argsFile}
	if infoW != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, infoW, blockR)
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Should the daemon die, bwrap dies, and with it the namespace.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL

	var exited func()
	if proxy != nil {
		exited = func() { proxy.close(); _ = os.Remove(socket) }
	}
	return func(startErr error) error {
		// bwrap has its own copies now, or never will.
		_ = argsFile.Close()
		if startErr != nil && exited != nil {
			exited()
		}
		if infoW == nil {
			return nil
		}
		_ = infoW.Close()
		_ = blockR.Close()
		defer infoR.Close()
		defer blockW.Close()
		if startErr != nil {
			return nil
		}
		return j.enter(name, cmd.Process.Pid, infoR, blockW)
	}, exited, nil
}

// listenEgress starts a command's egress proxy on a socket of its own, which the
// command's bwrap binds into the sandbox.
func (j *jail) listenEgress() (*egressServer, string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	socket := filepath.Join(j.sockets, hex.EncodeToString(b[:])+".sock")
	// The kernel's limit on a socket's path (sun_path), with its NUL.
	if len(socket) >= 108 {
		return nil, "", fmt.Errorf("egress: the socket path %s is too long for a Unix socket; use a shorter root", socket)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, "", fmt.Errorf("egress: %w", err)
	}
	return serveEgress(j.egress, ln), socket, nil
}

// infoWait bounds the wait for bwrap to set up the namespaces and report its child.
const infoWait = 30 * time.Second

// enter moves bwrap and the namespace's first process, which waits on the block
// fd, into the sandbox's cgroups, then lets it go on. Every process the command
// starts descends from it, so all of them are in the cgroups from the start.
func (j *jail) enter(name string, bwrapPid int, info, block *os.File) error {
	_ = info.SetReadDeadline(time.Now().Add(infoWait))
	data, err := io.ReadAll(info)
	if len(bytes.TrimSpace(data)) == 0 {
		// bwrap failed before making the namespaces; it says why on stderr
		// and in its exit status, which the exec reports.
		return nil
	}
	if err != nil {
		return fmt.Errorf("read bwrap's info: %w", err)
	}
	var v struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.ChildPid <= 0 {
		return fmt.Errorf("bwrap's info %q names no child", data)
	}
	if err := j.cg.enter(name, bwrapPid, v.ChildPid); err != nil {
		return err
	}
	if _, err := block.Write([]byte{1}); err != nil {
		return fmt.Errorf("release the command: %w", err)
	}
	return nil
}

// memfd is an in-memory file holding data, positioned at its start.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return f, nil
}

// makeDevNodes makes the device nodes of devNodes in dir, unless they are there.
func makeDevNodes(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("device nodes: %w", err)
	}
	for _, n := range devNodes {
		p := filepath.Join(dir, n.name)
		err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(n.major, n.minor)))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = os.Chmod(p, 0o666) // the umask must not decide
		}
		if err != nil {
			return fmt.Errorf("device node %s: %w", n.name, err)
		}
	}
	return nil
}
