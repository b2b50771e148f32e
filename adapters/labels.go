package adapters

import (
	"maps"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ReservedLabelPrefix marks labels the control plane owns. Tenants cannot set them.
const ReservedLabelPrefix = "differently.dev/"

// Ownership label keys.
const (
	LabelSandboxID    = ReservedLabelPrefix + "sandbox-id"
	LabelInstallation = ReservedLabelPrefix + "installation"
	LabelOrg          = ReservedLabelPrefix + "org"
	LabelProject      = ReservedLabelPrefix + "project"
)

// Label limits, chosen to fit every backend's metadata rules. MaxLabels leaves room
// for the four ownership labels within the 64 most backends accept.
const (
	MaxLabels          = 60
	MaxLabelKeyBytes   = 128
	MaxLabelValueBytes = 256
)

// OwnershipLabels returns a copy of labels with the sandbox ID and installation
// stamped on, for adapters to store with the instance.
func OwnershipLabels(labels map[string]string, sandboxID, installation string) map[string]string {
	out := make(map[string]string, len(labels)+2)
	maps.Copy(out, labels)
	out[LabelSandboxID] = sandboxID
	out[LabelInstallation] = installation
	return out
}

// IsReservedLabel reports whether key uses the reserved prefix.
func IsReservedLabel(key string) bool { return strings.HasPrefix(key, ReservedLabelPrefix) }

// ValidateLabels checks labels a tenant sets: bounded in number and size, keys made of
// letters, digits and . _ - / (starting with a letter or digit), values printable UTF-8,
// and nothing under the reserved prefix.
func ValidateLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return InvalidRequest("at most %d labels are allowed, got %d", MaxLabels, len(labels))
	}
	for k, v := range labels {
		if IsReservedLabel(k) {
			return InvalidRequest("label %q uses the reserved prefix %q", k, ReservedLabelPrefix)
		}
		if err := validateLabelKey(k); err != nil {
			return err
		}
		if len(v) > MaxLabelValueBytes {
			return InvalidRequest("label %q: value is longer than %d bytes", k, MaxLabelValueBytes)
		}
		if !utf8.ValidString(v) {
			return InvalidRequest("label %q: value is not valid UTF-8", k)
		}
		for _, r := range v {
			if !unicode.IsPrint(r) {
				return InvalidRequest("label %q: value contains an unprintable character", k)
			}
		}
	}
	return nil
}

func validateLabelKey(k string) error {
	if k == "" || len(k) > MaxLabelKeyBytes {
		return InvalidRequest("label key %q must be 1 to %d bytes", k, MaxLabelKeyBytes)
	}
	for i, r := range k {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if i == 0 && !alnum || !alnum && !strings.ContainsRune("._-/", r) {
			return InvalidRequest("label key %q: use letters, digits and . _ - / and start with a letter or digit", k)
		}
	}
	return nil
}
