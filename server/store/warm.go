package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// WarmShape is a kind of sandbox a pool keeps started ahead of demand, so that a
// create asking for exactly that kind is answered with one at once.
type WarmShape struct {
	Template string `json:"template,omitempty"`
	// Profile, when set, is the profile the warm sandboxes are created with; a create
	// naming the same profile (and nothing that changes what it gives) matches.
	Profile   string             `json:"profile,omitempty"`
	Resources adapters.Resources `json:"resources"`
	// Size is how many the pool keeps, started or starting.
	Size int `json:"size"`
	// MaxAgeSeconds, when not 0, replaces a warm sandbox that has waited that long.
	MaxAgeSeconds int64 `json:"maxAgeSeconds,omitempty"`
}

// ErrNoWarm is ClaimWarm's answer when the pool has no warm sandbox of the shape
// free: the create goes on cold.
var ErrNoWarm = errors.New("no warm sandbox is free")

// WarmOrg is the organisation of warm sandboxes: they belong to no tenant until a
// create claims one. Tenants' organisations are API names, which cannot begin with an
// underscore, so none can collide with it.
const WarmOrg = "_warm"

// Warm-shape bounds.
const (
	// MaxWarmShapes bounds a pool's shapes.
	MaxWarmShapes = 16
	// MaxWarmSize bounds one shape's size.
	MaxWarmSize = 1000
	// MinWarmMaxAgeSeconds is the shortest maxAgeSeconds: a shorter one would
	// replace instances about as fast as they start.
	MinWarmMaxAgeSeconds = 60
)

// WarmProject is the project of pool's warm sandboxes of shape w: its quota is the
// shape's size, so that replicas refilling at once never start more than that.
func WarmProject(pool string, w WarmShape) string {
	return pool + "." + w.Key()
}

// Key identifies the shape by what its sandboxes are (not by its size or age), so
// that resizing a shape keeps its sandboxes.
func (w WarmShape) Key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %s %d %d", w.Template, w.Profile,
		strconv.FormatFloat(w.Resources.CPU, 'g', -1, 64), w.Resources.MemoryMiB, w.Resources.DiskGiB)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ValidateWarm checks a pool's warm shapes: bounded, each valid, no two alike.
func ValidateWarm(pool string, shapes []WarmShape) error {
	if len(shapes) > MaxWarmShapes {
		return api.Errorf(api.CodeInvalidRequest, "pool %q: at most %d warm shapes", pool, MaxWarmShapes)
	}
	seen := map[string]bool{}
	for i, w := range shapes {
		at := fmt.Sprintf("pool %q: warm[%d]", pool, i)
		switch {
		case w.Size < 0 || w.Size > MaxWarmSize:
			return api.Errorf(api.CodeInvalidRequest, "%s.size must be between 0 and %d", at, MaxWarmSize)
		case w.MaxAgeSeconds != 0 && (w.MaxAgeSeconds < MinWarmMaxAgeSeconds || w.MaxAgeSeconds > api.MaxTTLSeconds):
			return api.Errorf(api.CodeInvalidRequest, "%s.maxAgeSeconds must be 0 (no limit) or between %d and %d",
				at, MinWarmMaxAgeSeconds, api.MaxTTLSeconds)
		case len(w.Template) > api.MaxTemplateBytes:
			return api.Errorf(api.CodeInvalidRequest, "%s.template is longer than %d bytes", at, api.MaxTemplateBytes)
		case w.Profile != "" && !api.ValidName(w.Profile):
			return api.Errorf(api.CodeInvalidRequest, "%s.profile %q is not a profile name", at, w.Profile)
		}
		if err := w.Resources.Validate(); err != nil {
			return api.Errorf(api.CodeInvalidRequest, "%s: %s", at, api.Message(err))
		}
		if seen[w.Key()] {
			return api.Errorf(api.CodeInvalidRequest, "%s repeats an earlier shape (same template, profile and resources)", at)
		}
		seen[w.Key()] = true
	}
	return nil
}

// WarmClaimBuckets are the upper bounds, in seconds, of the histogram of how long
// claims took (WarmStats.ClaimCounts), as the Prometheus histogram has them.
var WarmClaimBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// WarmStats counts the creates that one of a pool's warm shapes matched: those given
// a warm sandbox (hits, with how long taking it took) and those created cold because
// none was ready (misses). Each replica adds what it saw (AddWarmStats), so the sums
// are the installation's.
type WarmStats struct {
	Pool string
	// Shape is the shape's Key.
	Shape        string
	Hits, Misses int64
	// ClaimCounts has one count per bucket of WarmClaimBuckets and one more for the
	// claims slower than the last bound: ClaimCounts[i] counts the hits whose claim
	// took more than bound i-1 and at most bound i.
	ClaimCounts []int64
	// ClaimSeconds is the claims' total time.
	ClaimSeconds float64
}

// Observe counts one create: a hit whose claim took took, or a miss.
func (s *WarmStats) Observe(hit bool, took time.Duration) {
	if !hit {
		s.Misses++
		return
	}
	s.Hits++
	if n := len(WarmClaimBuckets) + 1 - len(s.ClaimCounts); n > 0 {
		s.ClaimCounts = append(s.ClaimCounts, make([]int64, n)...)
	}
	sec := took.Seconds()
	i, _ := slices.BinarySearch(WarmClaimBuckets, sec)
	s.ClaimCounts[i]++
	s.ClaimSeconds += sec
}

// Add adds o's counts to s's.
func (s *WarmStats) Add(o WarmStats) {
	s.Hits += o.Hits
	s.Misses += o.Misses
	s.ClaimSeconds += o.ClaimSeconds
	if n := len(o.ClaimCounts) - len(s.ClaimCounts); n > 0 {
		s.ClaimCounts = append(s.ClaimCounts, make([]int64, n)...)
	}
	for i, c := range o.ClaimCounts {
		s.ClaimCounts[i] += c
	}
}

// ClaimQuantile estimates the q-quantile (0 < q < 1) of the claims' times from the
// histogram, interpolating within the bucket it falls in, as Prometheus'
// histogram_quantile does; one beyond the last bound is given as that bound. ok is
// false when no claim was counted.
func (s WarmStats) ClaimQuantile(q float64) (d time.Duration, ok bool) {
	var total int64
	for _, c := range s.ClaimCounts {
		total += c
	}
	if total == 0 {
		return 0, false
	}
	rank := q * float64(total)
	var seen int64
	for i, c := range s.ClaimCounts {
		if c == 0 || float64(seen+c) < rank {
			seen += c
			continue
		}
		if i >= len(WarmClaimBuckets) {
			break
		}
		lower := 0.0
		if i > 0 {
			lower = WarmClaimBuckets[i-1]
		}
		sec := lower + (WarmClaimBuckets[i]-lower)*(rank-float64(seen))/float64(c)
		return time.Duration(sec * float64(time.Second)), true
	}
	return time.Duration(WarmClaimBuckets[len(WarmClaimBuckets)-1] * float64(time.Second)), true
}
