package main

import (
	"crypto/sha256"
	"slices"
	"time"
)

// hostSample is how long the host took over a fixed amount of CPU work at one point
// of a run.
type hostSample struct {
	Phase string  `json:"phase"`
	Ms    float64 `json:"ms"`
}

// hostWorkBytes is the fixed work: SHA-256 over this many bytes, a few milliseconds
// on a host running the process at full speed.
const hostWorkBytes = 8 << 20

// hostWorkMs times the fixed work five times and returns the median, in
// milliseconds. The process is idle between sections, so the time is the host's:
// on a virtual machine whose CPUs are shared it rises, without any steal time to
// show for it, by as much as the daemon's own figures slow down, and a figure taken
// while it was high is the host's as much as the daemon's.
func hostWorkMs() float64 {
	buf := make([]byte, 64<<10)
	runs := make([]time.Duration, 5)
	for i := range runs {
		start := time.Now()
		h := sha256.New()
		for range hostWorkBytes / len(buf) {
			h.Write(buf)
		}
		buf[0] = h.Sum(nil)[0] // the next run hashes other bytes
		runs[i] = time.Since(start)
	}
	slices.Sort(runs)
	return round(float64(runs[len(runs)/2]) / float64(time.Millisecond))
}

// sampleHost records the fixed work's time at phase.
func (f *figures) sampleHost(phase string) float64 {
	ms := hostWorkMs()
	f.HostWork = append(f.HostWork, hostSample{Phase: phase, Ms: ms})
	return ms
}
