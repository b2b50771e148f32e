package api

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// NamePattern is a DNS label: 1 to 63 lowercase letters, digits and dashes, starting
// and ending with a letter or digit.
// The Terraform provider's plan-time validators match it too.
var NamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName reports whether s may name a pool or a profile. The daemon (API and
// config file) and the Terraform provider check with it alike.
func ValidName(s string) bool { return NamePattern.MatchString(s) }

// envName is what a pool's credentials variable may be called.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckCredentialsEnv checks the name of a pool's credentials variable: a variable
// name, and none of the daemon's own (DIFFERENTLY_*, its database URL among them)
// nor of its PostgreSQL driver's (PG*, PGPASSWORD among them). The daemon sends a
// pool's credential to the pool's endpoint, which whoever configures the pool
// chooses: naming one of those would send the daemon's own secret there. The error
// is invalid_request and quotes nothing but the name.
func CheckCredentialsEnv(name string) error {
	upper := strings.ToUpper(name)
	switch {
	case name == "":
		return nil
	case !envName.MatchString(name):
		return Errorf(CodeInvalidRequest, "credentials.env %q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
	case strings.HasPrefix(upper, "DIFFERENTLY_"):
		return Errorf(CodeInvalidRequest, "credentials.env %q is one of the daemon's own variables (DIFFERENTLY_*), which are never sent to a pool; give the pool's credential a variable of its own", name)
	case strings.HasPrefix(upper, "PG"):
		return Errorf(CodeInvalidRequest, "credentials.env %q is one of the database driver's variables (PG*, such as PGPASSWORD), which are never sent to a pool; give the pool's credential a variable of its own", name)
	}
	return nil
}

// envPattern is what an entry of an EnvAllowlist may be: a variable name in which *
// stands for any run of characters.
var envPattern = regexp.MustCompile(`^[A-Za-z_*][A-Za-z0-9_*]*$`)

// EnvAllowlist is the operator's list of the variables pools may name as their
// credential (poolCredentials.allowedEnv in the daemon's config file): exact names,
// or patterns in which * stands for any run of characters, such as DAYTONA_*. Names
// are compared case-sensitively, as the environment does. The list only narrows
// CheckCredentialsEnv: the daemon's own variables stay refused whatever it says.
//
// Without it, an admin token can name any other variable of the daemon's environment
// (a cloud key, say) and have its value sent to an endpoint of its choosing; with it,
// only the variables the operator set aside for pools. The zero value is no list:
// CheckCredentialsEnv alone.
type EnvAllowlist struct {
	set      bool
	patterns []string
}

// NewEnvAllowlist checks the entries and returns the list. nil is no list; an empty,
// non-nil slice is a list that allows no credentials variable at all.
func NewEnvAllowlist(patterns []string) (EnvAllowlist, error) {
	if patterns == nil {
		return EnvAllowlist{}, nil
	}
	for _, p := range patterns {
		if err := CheckEnvPattern(p); err != nil {
			return EnvAllowlist{}, err
		}
	}
	return EnvAllowlist{set: true, patterns: slices.Clone(patterns)}, nil
}

// CheckEnvPattern checks one entry of an EnvAllowlist. An entry of stars only is
// refused, since it allows what no list allows; so is one that could only match the
// daemon's own variables, which are refused anyway: either is a mistake to report.
func CheckEnvPattern(p string) error {
	upper := strings.ToUpper(p)
	switch {
	case !envPattern.MatchString(p):
		return Errorf(CodeInvalidRequest, "%q is neither a variable name nor a pattern of one (letters, digits, _ and *, not starting with a digit)", p)
	case strings.Trim(p, "*") == "":
		return Errorf(CodeInvalidRequest, "%q allows every variable, as leaving the list out does; name the variables pools may use, or a prefix such as DAYTONA_*", p)
	case strings.HasPrefix(upper, "DIFFERENTLY_") || strings.HasPrefix(upper, "PG"):
		return Errorf(CodeInvalidRequest, "%q names only the daemon's own variables (DIFFERENTLY_*, PG*), which are never sent to a pool", p)
	}
	return nil
}

// Set reports whether the operator gave a list.
func (l EnvAllowlist) Set() bool { return l.set }

// Patterns returns the list's entries.
func (l EnvAllowlist) Patterns() []string { return slices.Clone(l.patterns) }

// Check is CheckCredentialsEnv, and then, when a list is set, refuses a name no entry
// matches. The error is invalid_request and quotes nothing but the name and the list:
// the variable's value is never read to decide.
func (l EnvAllowlist) Check(name string) error {
	if err := CheckCredentialsEnv(name); err != nil || name == "" || !l.set {
		return err
	}
	for _, p := range l.patterns {
		// Entries hold no /, ?, [ or \, so * is path.Match's only special character.
		if ok, _ := path.Match(p, name); ok {
			return nil
		}
	}
	if len(l.patterns) == 0 {
		return Errorf(CodeInvalidRequest, "credentials.env %q is refused: the daemon's operator allows no pool credentials variables (poolCredentials.allowedEnv is empty in the daemon's config file)", name).
			WithDetail("env", name)
	}
	return Errorf(CodeInvalidRequest, "credentials.env %q is not among the variables the daemon's operator allows pools to name (poolCredentials.allowedEnv in the daemon's config file: %s)",
		name, strings.Join(l.patterns, ", ")).WithDetail("env", name)
}

// CheckTenantName checks an organisation's or a project's name (what says which):
// 1 to 128 characters, none of them a control character. The error is
// invalid_request.
func CheckTenantName(what, v string) error {
	if v == "" || len(v) > 128 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Errorf(CodeInvalidRequest, "%s must be 1 to 128 printable characters", what)
	}
	return nil
}
