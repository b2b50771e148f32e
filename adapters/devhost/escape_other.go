//go:build !linux

package devhost

import "syscall"

// Elsewhere than Linux there is neither cgroup nor /proc: only the process group is
// killed, and a process that left it survives.

const markerVar = "DIFFERENTLY_DEVHOST_EXEC"

type tracker struct{ key string }

func newTracker(string) *tracker { return &tracker{} }

type execGroup struct{ dir string }

func (t *tracker) marker(id, execID string) string             { return id + ":" + execID }
func (t *tracker) newExecGroup(string, string) *execGroup      { return nil }
func (g *execGroup) started()                                  {}
func (g *execGroup) remove()                                   {}
func (t *tracker) killExec(string, string, string, *execGroup) {}
func (t *tracker) killSandbox(string, string)                  {}
func (t *tracker) cgroupIDs() []string                         { return nil }
func (t *tracker) dropCgroup(string)                           {}

func setCgroup(*syscall.SysProcAttr, *execGroup) {}
