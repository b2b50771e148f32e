package store

import (
	"errors"

	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

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
