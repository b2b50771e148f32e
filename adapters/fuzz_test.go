package adapters_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if e := api.AsError(err); e == nil || e.Code != api.CodeInvalidRequest {
		t.Fatalf("%s = %v, want an invalid_request *api.Error", what, err)
	}
}

// labelsOK is the label rules written out independently of ValidateLabels, byte by
// byte, as the oracle ValidateLabels is checked against.
func labelsOK(labels map[string]string) bool {
	if len(labels) > adapters.MaxLabels {
		return false
	}
	for k, v := range labels {
		if strings.HasPrefix(k, adapters.ReservedLabelPrefix) || k == "" || len(k) > adapters.MaxLabelKeyBytes {
			return false
		}
		for i := 0; i < len(k); i++ {
			c := k[i]
			alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
			if !alnum && (i == 0 || !strings.ContainsRune("._-/", rune(c))) {
				return false
			}
		}
		if len(v) > adapters.MaxLabelValueBytes || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return false
		}
	}
	return true
}

// FuzzValidateLabels checks one fuzzed label among filler labels against the
// oracle: the verdicts agree, refusals are invalid_request, and nothing panics.
func FuzzValidateLabels(f *testing.F) {
	f.Add("app", "web", uint8(0))
	f.Add("team.example.com/owner", "Zoë Ω", uint8(3))
	f.Add("differently.dev/project", "p", uint8(0))
	f.Add("differently.dev", "x", uint8(0))
	f.Add("-leading", "x", uint8(0))
	f.Add("", "x", uint8(0))
	f.Add("a b", "x", uint8(0))
	f.Add("k", "tab\there", uint8(0))
	f.Add("k", "nul\x00", uint8(0))
	f.Add("k", "\xff\xfe", uint8(0))
	f.Add("\xffk", "v", uint8(0))
	f.Add("ké", "v", uint8(0))
	f.Add(strings.Repeat("k", adapters.MaxLabelKeyBytes), strings.Repeat("v", adapters.MaxLabelValueBytes), uint8(0))
	f.Add(strings.Repeat("k", adapters.MaxLabelKeyBytes+1), "v", uint8(0))
	f.Add("k", strings.Repeat("é", adapters.MaxLabelValueBytes/2+1), uint8(0))
	f.Add("k", "v", uint8(adapters.MaxLabels-1))
	f.Add("k", "v", uint8(adapters.MaxLabels))
	f.Add("k", "\u200b\u00a0", uint8(0))
	f.Fuzz(func(t *testing.T, key, value string, filler uint8) {
		labels := map[string]string{key: value}
		for i := range int(filler) {
			labels[fmt.Sprintf("filler-%d", i)] = "ok"
		}
		err := adapters.ValidateLabels(labels)
		if want := labelsOK(labels); want != (err == nil) {
			t.Fatalf("ValidateLabels(%q=%q, %d labels) = %v, oracle says ok=%v", key, value, len(labels), err, want)
		}
		if err != nil {
			wantInvalid(t, "ValidateLabels", err)
		}
	})
}

// FuzzValidateRequestedFeatures splits the input into names. Accepted lists come back
// sorted, without duplicates, all known and never isolation.none; refusals are
// invalid_request and name every unknown capability.
func FuzzValidateRequestedFeatures(f *testing.F) {
	f.Add("exec,files")
	f.Add("files,exec,files")
	f.Add("")
	f.Add("isolation.none")
	f.Add("exec,isolation.none,bogus")
	f.Add("bogus,also-bogus")
	f.Add("exec,,files")
	f.Add("EXEC")
	f.Add("exec\x00")
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, joined string) {
		var names []string
		if joined != "" {
			names = strings.Split(joined, ",")
		}
		in := slices.Clone(names)
		out, err := adapters.ValidateRequestedFeatures(names)
		if !slices.Equal(in, names) {
			t.Fatalf("the caller's slice was changed: %q -> %q", in, names)
		}
		if err != nil {
			wantInvalid(t, "ValidateRequestedFeatures", err)
			if slices.Contains(names, adapters.FeatureIsolationNone) {
				return
			}
			e := api.AsError(err)
			unknown, _ := e.Details["unknown"].([]string)
			for _, n := range names {
				if !adapters.KnownFeature(n) && !slices.Contains(unknown, n) {
					t.Fatalf("unknown %q missing from the details %v", n, e.Details)
				}
			}
			if len(unknown) == 0 {
				t.Fatalf("refused %q without naming an unknown capability: %v", names, err)
			}
			return
		}
		for i, n := range out {
			if !adapters.KnownFeature(n) || n == adapters.FeatureIsolationNone {
				t.Fatalf("accepted %q", n)
			}
			if i > 0 && out[i-1] >= n {
				t.Fatalf("result not sorted and unique: %q", out)
			}
		}
		for _, n := range names {
			if !slices.Contains(out, n) {
				t.Fatalf("%q dropped from %q -> %q", n, names, out)
			}
		}
	})
}

// FuzzCreateRequest decodes arbitrary bytes as a create request and validates it:
// never a panic, refusals are invalid_request, and an accepted request has an id,
// an installation, no negative number and an environment a process can be given.
func FuzzCreateRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"sbx_1","installation":"inst"}`,
		`{"id":"sbx_1","installation":"inst","template":"t","resources":{"cpu":0.5,"memoryMiB":512,"diskGiB":1},"env":{"A":"b"},"ttlSeconds":60,"labels":{"a":"b"}}`,
		`{"id":"","installation":"inst"}`,
		`{"id":"x"}`,
		`{"id":"x","installation":"i","ttlSeconds":-1}`,
		`{"id":"x","installation":"i","resources":{"cpu":-0.0001}}`,
		`{"id":"x","installation":"i","resources":{"memoryMiB":-1}}`,
		`{"id":"x","installation":"i","resources":{"cpu":1e309}}`,
		`{"id":"x","installation":"i","resources":{"diskGiB":9223372036854775808}}`,
		`{"id":"x","installation":"i","env":{"A=B":"c"}}`,
		`{"id":"x","installation":"i","env":{"A":"\u0000"}}`,
		`{"id":"x","installation":"i","env":{"":""}}`,
		`{"id":"\u0000","installation":"\ud800"}`,
		`{"id":{"id":{"id":{}}}}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req adapters.CreateRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		err := req.Validate()
		if err != nil {
			wantInvalid(t, "Validate", err)
			return
		}
		r := req.Resources
		if req.ID == "" || req.Installation == "" || req.TTLSeconds < 0 || r.CPU < 0 || r.MemoryMiB < 0 || r.DiskGiB < 0 {
			t.Fatalf("accepted %+v", req)
		}
		for k, v := range req.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
				t.Fatalf("accepted env %q=%q", k, v)
			}
		}
	})
}
