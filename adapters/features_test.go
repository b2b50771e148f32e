package adapters_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// base implements only the required interface; the types below add one optional
// interface each, so EffectiveFeatures can be checked against every combination that
// matters.
type base struct{}

func (base) Info() adapters.Info { return adapters.Info{Kind: "test"} }
func (base) Capabilities(context.Context) (adapters.Capabilities, error) {
	return adapters.Capabilities{}, nil
}
func (base) Capacity(context.Context) (adapters.Capacity, error) { return adapters.Capacity{}, nil }
func (base) Health(context.Context) error                        { return nil }
func (base) Create(context.Context, adapters.CreateRequest) (adapters.Instance, error) {
	return adapters.Instance{}, nil
}
func (base) Get(context.Context, string) (adapters.Instance, error) {
	return adapters.Instance{}, nil
}
func (base) List(context.Context, string) ([]adapters.Instance, error) { return nil, nil }
func (base) Delete(context.Context, string) error                      { return nil }
func (base) Exec(context.Context, string, api.ExecRequest) (api.ExecResult, error) {
	return api.ExecResult{}, nil
}

type withFiles struct{ base }

func (withFiles) ReadFile(context.Context, string, string) ([]byte, error) { return nil, nil }
func (withFiles) WriteFile(context.Context, string, string, []byte) error  { return nil }
func (withFiles) ListFiles(context.Context, string, string) ([]adapters.FileInfo, error) {
	return nil, nil
}

type withLifecycle struct{ base }

func (withLifecycle) Stop(context.Context, string) error  { return nil }
func (withLifecycle) Start(context.Context, string) error { return nil }

type withSnapshots struct{ base }

func (withSnapshots) Snapshot(context.Context, string, adapters.SnapshotKind) (adapters.Snapshot, error) {
	return adapters.Snapshot{}, nil
}
func (withSnapshots) DeleteSnapshot(context.Context, string) error { return nil }

type withStdin struct{ base }

func (withStdin) ExecStdin(context.Context, string, api.ExecRequest, <-chan []byte, func(string, []byte) error) (adapters.ExitStatus, error) {
	return adapters.ExitStatus{}, nil
}

type withPauseAndPorts struct{ base }

func (withPauseAndPorts) Pause(context.Context, string) error  { return nil }
func (withPauseAndPorts) Resume(context.Context, string) error { return nil }
func (withPauseAndPorts) ExposePort(context.Context, string, int) (string, error) {
	return "", nil
}

var interfaceBacked = []string{
	adapters.FeatureExecStream, adapters.FeatureExecStdin, adapters.FeaturePTY, adapters.FeatureFiles, adapters.FeatureStopStart,
	adapters.FeaturePersistenceDisk, adapters.FeaturePauseResume, adapters.FeatureSnapshotsDisk,
	adapters.FeatureSnapshotsMemory, adapters.FeatureFork, adapters.FeaturePortsExpose,
}

var declarationOnly = []string{
	adapters.FeatureSSH, adapters.FeatureGPU, adapters.FeatureEgressControl,
	adapters.FeatureArchAMD64, adapters.FeatureArchARM64, adapters.FeatureMicroVM,
	adapters.FeatureContainer, adapters.FeatureIsolationNone,
}

func TestEffectiveFeatures(t *testing.T) {
	everything := append(append([]string{adapters.FeatureExec, "teleport"}, interfaceBacked...), declarationOnly...)
	tests := []struct {
		name     string
		a        adapters.ExecutionAdapter
		declared []string
		want     []string
	}{
		{"base keeps exec and declaration-only", base{}, everything,
			sorted(append([]string{adapters.FeatureExec}, declarationOnly...))},
		{"files", withFiles{}, []string{"files", "exec.stream", "exec"}, []string{"exec", "files"}},
		{"lifecycle backs two", withLifecycle{}, []string{"persistence.disk", "lifecycle.stop-start", "lifecycle.pause-resume"},
			[]string{"lifecycle.stop-start", "persistence.disk"}},
		{"snapshots back three", withSnapshots{}, []string{"fork", "snapshots.memory", "snapshots.disk", "files"},
			[]string{"fork", "snapshots.disk", "snapshots.memory"}},
		{"pause and ports", withPauseAndPorts{}, []string{"ports.expose", "lifecycle.pause-resume", "lifecycle.stop-start"},
			[]string{"lifecycle.pause-resume", "ports.expose"}},
		{"stdin without streaming", withStdin{}, []string{"exec.stdin", "exec.stream"}, []string{"exec.stdin"}},
		{"unknown dropped", withFiles{}, []string{"teleport", "files"}, []string{"files"}},
		{"sorted and deduplicated", withFiles{}, []string{"gpu", "files", "gpu", "arch.arm64", "files"},
			[]string{"arch.arm64", "files", "gpu"}},
		{"nothing declared", withFiles{}, nil, []string{}},
		{"undeclared interface not added", withFiles{}, []string{"exec"}, []string{"exec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := adapters.EffectiveFeatures(tt.a, tt.declared)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEffectiveFeaturesDoesNotMutateInput(t *testing.T) {
	declared := []string{"files", "exec", "gpu"}
	adapters.EffectiveFeatures(base{}, declared)
	if !reflect.DeepEqual(declared, []string{"files", "exec", "gpu"}) {
		t.Errorf("declared list changed to %v", declared)
	}
}

func TestSupports(t *testing.T) {
	declared := []string{"files", "exec.stream"}
	if !adapters.Supports(withFiles{}, declared, "files") {
		t.Error("declared and implemented feature not supported")
	}
	if adapters.Supports(withFiles{}, declared, "exec.stream") {
		t.Error("declared but unimplemented feature supported")
	}
	if adapters.Supports(withLifecycle{}, declared, "lifecycle.stop-start") {
		t.Error("implemented but undeclared feature supported")
	}
}

func TestAllFeaturesAndKnown(t *testing.T) {
	all := adapters.AllFeatures()
	want := sorted(append(append([]string{adapters.FeatureExec}, interfaceBacked...), declarationOnly...))
	if !reflect.DeepEqual(all, want) {
		t.Errorf("AllFeatures = %v, want %v", all, want)
	}
	for _, f := range all {
		if !adapters.KnownFeature(f) {
			t.Errorf("KnownFeature(%q) = false", f)
		}
	}
	for _, f := range []string{"", "EXEC", "teleport", "arch.riscv"} {
		if adapters.KnownFeature(f) {
			t.Errorf("KnownFeature(%q) = true", f)
		}
	}
}

func TestValidateRequestedFeatures(t *testing.T) {
	tests := []struct {
		name        string
		in          []string
		want        []string
		wantUnknown []string
		bad         bool
	}{
		{"nil", nil, nil, nil, false},
		{"sorted and deduplicated", []string{"files", "exec", "files", "gpu"}, []string{"exec", "files", "gpu"}, nil, false},
		{"isolation.none", []string{"exec", "isolation.none"}, nil, nil, true},
		{"unknown", []string{"teleport", "exec", "warp"}, nil, []string{"teleport", "warp"}, true},
		{"empty name", []string{""}, nil, []string{""}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got, err := adapters.ValidateRequestedFeatures(in)
			if !reflect.DeepEqual(in, tt.in) {
				t.Errorf("input changed to %v", in)
			}
			if tt.bad {
				e := api.AsError(err)
				if e == nil || e.Code != api.CodeInvalidRequest {
					t.Fatalf("err = %v, want invalid_request", err)
				}
				if tt.wantUnknown != nil && !reflect.DeepEqual(e.Details["unknown"], tt.wantUnknown) {
					t.Errorf("details.unknown = %v, want %v", e.Details["unknown"], tt.wantUnknown)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestValidateDeclaredFeatures(t *testing.T) {
	if err := adapters.ValidateDeclaredFeatures(adapters.AllFeatures()); err != nil {
		t.Errorf("every known feature, isolation.none included: %v", err)
	}
	if err := adapters.ValidateDeclaredFeatures(nil); err != nil {
		t.Error(err)
	}
	err := adapters.ValidateDeclaredFeatures([]string{"exec", "teleport", "warp"})
	e := api.AsError(err)
	if e == nil || e.Code != api.CodeInvalidRequest || !reflect.DeepEqual(e.Details["unknown"], []string{"teleport", "warp"}) {
		t.Errorf("got %#v", err)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
