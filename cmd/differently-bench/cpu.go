package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// daemonAppName is the application_name of the daemon's PostgreSQL connections, by
// which the CPU meter finds the server processes that serve them.
const daemonAppName = "differently-bench-daemon"

// withAppName returns the PostgreSQL URL u naming its connections daemonAppName.
func withAppName(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	q := p.Query()
	q.Set("application_name", daemonAppName)
	p.RawQuery = q.Encode()
	return p.String(), nil
}

// cpuMeter measures the CPU time a section costs: this process's, where the daemon
// and its HTTP clients run together, and on PostgreSQL that of the server processes
// serving the daemon's connections, read from /proc, so only when the server runs on
// this machine (where it does not, the figure is 0 and a note says why).
type cpuMeter struct {
	// base is the database to ask for the daemon's server processes, "" on SQLite.
	base string
}

// cpuSample is the CPU time used so far by this process and by each server process.
type cpuSample struct {
	self     time.Duration
	backends map[int]time.Duration
	// missing says why the server processes' time could not be read.
	missing string
}

func (m cpuMeter) sample(ctx context.Context) cpuSample {
	s := cpuSample{self: selfCPU()}
	if m.base == "" {
		return s
	}
	s.backends, s.missing = backendCPU(ctx, m.base)
	return s
}

// since is the CPU time spent between s0 and now: this process's, and the server
// processes' (ok false, with why, when it could not be read). A server process that
// ended in between is not counted; the daemon's connection pool keeps them open.
func (m cpuMeter) since(ctx context.Context, s0 cpuSample) (self, server time.Duration, why string) {
	s1 := m.sample(ctx)
	self = s1.self - s0.self
	switch {
	case m.base == "":
		return self, 0, "the store runs inside the process"
	case s0.missing != "":
		return self, 0, s0.missing
	case s1.missing != "":
		return self, 0, s1.missing
	}
	for pid, t := range s1.backends {
		server += t - s0.backends[pid]
	}
	return self, server, ""
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is the unit of /proc/PID/stat's times, USER_HZ, which Linux fixes at 100
// for user space on every architecture it runs on.
const clockTick = 10 * time.Millisecond

// backendCPU reads the CPU time of each server process serving the daemon.
func backendCPU(ctx context.Context, base string) (map[int]time.Duration, string) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Sprintf("the database was not reachable: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, daemonAppName)
	if err != nil {
		return nil, fmt.Sprintf("pg_stat_activity: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Sprintf("pg_stat_activity: %v", err)
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		t, err := procCPU(int(pid))
		if err != nil {
			return nil, fmt.Sprintf("PostgreSQL's processes are not readable here (%v): it runs on another machine or as a user this one cannot see", err)
		}
		out[int(pid)] = t
	}
	return out, ""
}

// procCPU is a process's user and system time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, second, is in parentheses and may hold spaces: count the
	// fields after its closing one, where the state is the first (field 3) and utime
	// and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(utime+stime) * clockTick, nil
}
