package api

import (
	"regexp"
	"strings"
)

// namePattern is a DNS label: 1 to 63 lowercase letters, digits and dashes, starting
// and ending with a letter or digit.
var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName reports whether s may name a pool or a profile. The daemon (API and
// config file) and the Terraform provider check with it alike.
func ValidName(s string) bool { return namePattern.MatchString(s) }

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
