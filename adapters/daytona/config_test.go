package daytona

import (
	"slices"
	"strings"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(nil)
	if err != nil || c.APIURL != DefaultAPIURL || c.Class != ClassContainer {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = ParseConfig(map[string]any{"apiURL": "https://d.example/api", "target": "us", "snapshot": "s", "class": "linux-vm"})
	if err != nil || c != (Config{APIURL: "https://d.example/api", Target: "us", Snapshot: "s", Class: ClassLinuxVM}) {
		t.Fatalf("all keys: %+v, %v", c, err)
	}
	for name, cfg := range map[string]map[string]any{
		"unknown":  {"target": "us", "cpu": 2},
		"type":     {"target": 3},
		"badclass": {"class": "windows"},
	} {
		_, err := ParseConfig(cfg)
		e := api.AsError(err)
		if e == nil || e.Code != api.CodeInvalidRequest || e.Details["key"] == nil {
			t.Errorf("%s: got %v, want invalid_request naming the key", name, err)
			continue
		}
		if !strings.Contains(e.Message, e.Details["key"].(string)) {
			t.Errorf("%s: message %q does not name key %v", name, e.Message, e.Details["key"])
		}
	}
	if _, err := ParseConfig(map[string]any{"cpu": 2}); !strings.Contains(err.Error(), `"cpu"`) {
		t.Errorf("unknown key error %v does not name cpu", err)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}, ""); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("no key: %v", err)
	}
	if _, err := New(Config{APIURL: "ftp://x"}, "k"); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("bad URL: %v", err)
	}
	if _, err := New(Config{Class: "android"}, "k"); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("bad class: %v", err)
	}
}

func TestInfoAndCapabilities(t *testing.T) {
	for _, tc := range []struct {
		class     string
		has, lack []string
	}{
		{ClassContainer, []string{adapters.FeatureContainer, adapters.FeatureSnapshotsDisk},
			[]string{adapters.FeaturePauseResume, adapters.FeatureSnapshotsMemory, adapters.FeatureMicroVM}},
		{ClassLinuxVM, []string{adapters.FeatureMicroVM, adapters.FeaturePauseResume, adapters.FeatureSnapshotsMemory},
			[]string{adapters.FeatureContainer}},
	} {
		a, err := New(Config{Class: tc.class, Target: "eu"}, "k")
		if err != nil {
			t.Fatal(err)
		}
		info := a.Info()
		if info.Trust != api.TrustExternal || info.Description == "" || info.Isolation == "" {
			t.Errorf("%s: info %+v", tc.class, info)
		}
		caps, _ := a.Capabilities(t.Context())
		if caps.MaxCPU != 4 || caps.MaxMemoryMiB != 8192 || caps.MaxDiskGiB != 10 || !slices.Equal(caps.Regions, []string{"eu"}) {
			t.Errorf("%s: limits %+v", tc.class, caps)
		}
		for _, f := range append(tc.has, adapters.FeatureExec, adapters.FeatureFiles, adapters.FeatureStopStart, adapters.FeaturePortsExpose) {
			if !slices.Contains(caps.Features, f) {
				t.Errorf("%s: missing %s", tc.class, f)
			}
		}
		for _, f := range append(tc.lack, adapters.FeatureFork, adapters.FeatureExecStream) {
			if slices.Contains(caps.Features, f) {
				t.Errorf("%s: declares %s", tc.class, f)
			}
		}
		if c, _ := a.Capacity(t.Context()); c.Bounded {
			t.Errorf("capacity is bounded")
		}
	}
	a, _ := New(Config{}, "k")
	if caps, _ := a.Capabilities(t.Context()); caps.Regions != nil {
		t.Errorf("regions without a target: %v", caps.Regions)
	}
}

// TestEmptyAPIURLMeansTheDefault: configs written with apiURL: "" (or blank) to ask
// for the default URL still load, and get it.
func TestEmptyAPIURLMeansTheDefault(t *testing.T) {
	for _, v := range []string{"", "  "} {
		c, err := ParseConfig(map[string]any{"apiURL": v})
		if err != nil || c.APIURL != DefaultAPIURL {
			t.Errorf("apiURL %q: %+v, %v; want the default URL", v, c, err)
		}
	}
	if _, err := ParseConfig(map[string]any{"apiURL": "ftp://x"}); !api.IsCode(err, api.CodeInvalidRequest) {
		t.Errorf("a bad apiURL: %v", err)
	}
}
