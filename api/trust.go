package api

import "fmt"

// Trust says whose infrastructure a pool runs on. The policy engine places work on an
// external pool only when the global policy allows it by name.
type Trust string

const (
	// TrustPrivate: infrastructure the operator controls.
	TrustPrivate Trust = "private"
	// TrustExternal: a third party's infrastructure (a hosted provider).
	TrustExternal Trust = "external"
)

// Validate accepts exactly the known trust classes.
func (t Trust) Validate() error {
	switch t {
	case TrustPrivate, TrustExternal:
		return nil
	}
	return Errorf(CodeInvalidRequest, "trust must be %q or %q, not %q", TrustPrivate, TrustExternal, string(t))
}

func (t Trust) String() string { return string(t) }

var _ fmt.Stringer = Trust("")
