package opensandbox

import (
	"fmt"
	"slices"
	"strings"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/adapters/poolconfig"
	"github.com/different-ai/differently/api"
)

// Config is a pool's configuration of an OpenSandbox adapter. The package
// documentation and docs/providers/opensandbox.md describe every key.
type Config struct {
	// APIURL is the lifecycle API root, with its version prefix
	// ("https://opensandbox.internal:8080/v1"). Required.
	APIURL string
	// Image is the container image used when a request names no template, and the
	// image behind TemplateID.
	Image string
	// TemplateID, when set, is the only template this pool serves.
	TemplateID string
	// Isolation is "container" (Docker or Kubernetes runtime) or "microvm".
	Isolation string
	// Runtime is "docker", "kubernetes" or empty (unknown: no lifecycle features).
	Runtime string
	// Features lists extra declared features (arch.*, snapshots.memory) or repeats
	// ones the other keys already imply.
	Features []string
	// UseServerProxy reaches execd through the server's proxy route instead of the
	// endpoint the server reports.
	UseServerProxy bool
	// LineEndings is how execd's line-based output is put back together: "lf"
	// (default), "crlf" or "raw" (text used as sent).
	LineEndings string
	// Egress is "public" (default), "none" or "allowlist" (EgressAllow).
	Egress      string
	EgressAllow []string
	// Ports is "none" (default) or "signed".
	Ports string
	// PortScheme is put in front of endpoints the server reports without a scheme.
	PortScheme string
	// PortURLSeconds is the lifetime of a signed port URL.
	PortURLSeconds int64
}

// Defaults for optional keys.
const (
	DefaultPortURLSeconds = 3600
	defaultPortScheme     = "http"
)

// ParseConfig reads a pool's config map. Unknown keys are errors, so that a typo
// does not silently change what the pool does.
func ParseConfig(cfg map[string]any) (Config, error) {
	r := poolconfig.Read(Kind, cfg)
	c := Config{
		APIURL:         r.URL("apiURL", ""),
		Image:          r.String("image", ""),
		TemplateID:     r.String("templateId", ""),
		Isolation:      r.OneOf("isolation", "container", "container", "microvm"),
		Runtime:        r.OneOf("runtime", "", "docker", "kubernetes"),
		Features:       r.Strings("features"),
		UseServerProxy: r.Bool("useServerProxy", false),
		LineEndings:    r.OneOf("lineEndings", "lf", "lf", "crlf", "raw"),
		Egress:         r.OneOf("egress", "public", "public", "none", "allowlist"),
		EgressAllow:    r.Strings("egressAllow"),
		Ports:          r.OneOf("ports", "none", "none", "signed"),
		PortScheme:     r.OneOf("portScheme", defaultPortScheme, "http", "https"),
		PortURLSeconds: r.Int("portURLSeconds", DefaultPortURLSeconds),
	}
	if c.Features != nil {
		r.Check("features", adapters.ValidateDeclaredFeatures(c.Features))
	}
	if c.PortURLSeconds < 60 || c.PortURLSeconds > 7*24*3600 {
		r.Check("portURLSeconds", fmt.Errorf("%d is outside 60 to 604800 seconds", c.PortURLSeconds))
	}
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return c, c.validate()
}

// validate checks what spans several keys.
func (c Config) validate() error {
	if strings.TrimSpace(c.APIURL) == "" {
		return keyError("apiURL", fmt.Errorf("is required"))
	}
	if c.Egress == "allowlist" && len(c.EgressAllow) == 0 {
		return keyError("egressAllow", fmt.Errorf("egress: allowlist needs at least one domain"))
	}
	if c.Egress != "allowlist" && len(c.EgressAllow) > 0 {
		return keyError("egressAllow", fmt.Errorf("only applies with egress: allowlist"))
	}
	for _, d := range c.EgressAllow {
		if d == "" || strings.ContainsAny(d, " /:") {
			return keyError("egressAllow", fmt.Errorf("%q is not a domain or *.domain", d))
		}
	}
	base := c.baseFeatures()
	for _, f := range c.Features {
		if slices.Contains(base, f) || slices.Contains(extraFeatures, f) {
			continue
		}
		return keyError("features", fmt.Errorf("%q cannot be declared for this pool (runtime %q, ports %q, egress %q); "+
			"only %s may be added", f, c.Runtime, c.Ports, c.Egress, strings.Join(extraFeatures, ", ")))
	}
	return nil
}

// extraFeatures may be added through the features key: what the adapter cannot
// tell from the other keys.
var extraFeatures = []string{adapters.FeatureArchAMD64, adapters.FeatureArchARM64, adapters.FeatureSnapshotsMemory}

// baseFeatures is what the keys other than features imply.
func (c Config) baseFeatures() []string {
	out := []string{adapters.FeatureExec, adapters.FeatureExecStream, adapters.FeatureFiles,
		adapters.FeatureSnapshotsDisk, adapters.FeatureFork}
	switch c.Runtime {
	case "kubernetes":
		// OpenSandbox's pause on Kubernetes commits the root filesystem and frees the
		// pod: that is a stop keeping the disk, not a pause keeping memory.
		out = append(out, adapters.FeatureStopStart, adapters.FeaturePersistenceDisk)
	case "docker":
		out = append(out, adapters.FeaturePauseResume)
	}
	if c.Ports == "signed" {
		out = append(out, adapters.FeaturePortsExpose)
	}
	if c.Egress == "none" || c.Egress == "allowlist" {
		out = append(out, adapters.FeatureEgressControl)
	}
	if c.Isolation == "microvm" {
		out = append(out, adapters.FeatureMicroVM)
	} else {
		out = append(out, adapters.FeatureContainer)
	}
	return out
}

// declaredFeatures is the sorted union of the implied and the added features.
func (c Config) declaredFeatures() []string {
	out := append(c.baseFeatures(), c.Features...)
	slices.Sort(out)
	return slices.Compact(out)
}

func keyError(key string, err error) *api.Error { return poolconfig.KeyError(Kind, key, err) }
