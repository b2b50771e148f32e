package store

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// Quota bounds what one project's non-terminal sandboxes may request together. A zero
// field is unlimited, so the zero Quota is no quota at all.
type Quota struct {
	Sandboxes int     `json:"sandboxes"`
	CPU       float64 `json:"cpu"`
	MemoryMiB int64   `json:"memoryMiB"`
	DiskGiB   int64   `json:"diskGiB"`
}

// Usage is what a project's non-terminal sandboxes request together: how many there
// are and the sums of their requested resources.
type Usage struct {
	Sandboxes int     `json:"sandboxes"`
	CPU       float64 `json:"cpu"`
	MemoryMiB int64   `json:"memoryMiB"`
	DiskGiB   int64   `json:"diskGiB"`
}

// Add counts one more sandbox requesting r. The sums saturate instead of wrapping or
// reaching infinity: the API bounds what a sandbox may request (api/limits.go), but a
// row written before those bounds may hold any value, and a wrapped (negative) sum
// would let a project past its quota, an infinite one fail every answer that shows it.
func (u *Usage) Add(r adapters.Resources) {
	u.Sandboxes++
	u.CPU = SaturateCPU(u.CPU + r.CPU)
	u.MemoryMiB = addSaturating(u.MemoryMiB, r.MemoryMiB)
	u.DiskGiB = addSaturating(u.DiskGiB, r.DiskGiB)
}

// SaturateCPU keeps a sum of CPUs finite: past the largest float64 it is that.
func SaturateCPU(f float64) float64 {
	if f > math.MaxFloat64 {
		return math.MaxFloat64
	}
	return f
}

// SaturateInt converts a sum a database computed as a float (SQLite's total) to an
// int64, the largest one past it.
func SaturateInt(f float64) int64 {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(f)
}

func addSaturating(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Project is an operator-declared project of an organisation. Projects exist
// implicitly (a sandbox may name any project); a stored Project only adds a quota.
type Project struct {
	Org       string    `json:"org"`
	Name      string    `json:"name"`
	Quota     Quota     `json:"quota"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Version increases by one on every write.
	Version int64 `json:"version"`
}

// Profile is a named bundle of sandbox settings. A create naming it gets the
// profile's capabilities added to its own and the rest filled where it left them unset.
type Profile struct {
	Name         string             `json:"name"`
	Capabilities []string           `json:"capabilities,omitempty"`
	Resources    adapters.Resources `json:"resources"`
	Template     string             `json:"template,omitempty"`
	Placement    Placement          `json:"placement"`
	TTLSeconds   int64              `json:"ttlSeconds,omitempty"`
	CreatedAt    time.Time          `json:"createdAt"`
	UpdatedAt    time.Time          `json:"updatedAt"`
	Version      int64              `json:"version"`
}

// Admission is what CreateSandboxAdmitted shows its admit callback, read inside the
// transaction that inserts the sandbox.
type Admission struct {
	// Quota is the project's quota (zero when the project was never put).
	Quota Quota
	// Usage is the project's usage without the new sandbox. It is read only when the
	// quota limits something, and zero otherwise: an unlimited project's creates need
	// neither the sum nor the project lock that keeps it exact.
	Usage Usage
	// Queued counts the queued sandboxes of every project.
	Queued int
	// Due counts those of them whose next attempt has come (next_attempt_at at or
	// before the create's now): the ones a pass would claim now. One waiting out a
	// backoff or a capacity shortage is queued but not due.
	Due int
}

// Limited reports whether the quota bounds anything.
func (q Quota) Limited() bool { return q != Quota{} }

// ValidateProject checks what the schema cannot.
func ValidateProject(p Project) error {
	q := p.Quota
	switch {
	case p.Org == "" || p.Name == "":
		return api.Errorf(api.CodeInvalidRequest, "project org and name are required")
	case q.Sandboxes < 0 || q.Sandboxes > api.MaxQuotaSandboxes:
		return quotaBound(p, "sandboxes", api.MaxQuotaSandboxes)
	// Written so that a NaN fails too.
	case !(q.CPU >= 0 && q.CPU <= api.MaxQuotaCPU):
		return quotaBound(p, "cpu", api.MaxQuotaCPU)
	case q.MemoryMiB < 0 || q.MemoryMiB > api.MaxQuotaMemoryMiB:
		return quotaBound(p, "memoryMiB", api.MaxQuotaMemoryMiB)
	case q.DiskGiB < 0 || q.DiskGiB > api.MaxQuotaDiskGiB:
		return quotaBound(p, "diskGiB", api.MaxQuotaDiskGiB)
	}
	return nil
}

func quotaBound(p Project, field string, limit int64) error {
	return api.Errorf(api.CodeInvalidRequest, "project %s/%s: quota.%s must be between 0 and %d",
		p.Org, p.Name, field, limit)
}

// ValidateProfile checks what the schema cannot.
func ValidateProfile(p Profile) error {
	switch {
	case p.Name == "":
		return api.Errorf(api.CodeInvalidRequest, "profile name is required")
	case p.TTLSeconds < 0 || p.TTLSeconds > api.MaxTTLSeconds:
		return api.Errorf(api.CodeInvalidRequest, "profile %q: ttlSeconds must be between 0 and %d", p.Name, api.MaxTTLSeconds)
	case len(p.Template) > api.MaxTemplateBytes:
		return api.Errorf(api.CodeInvalidRequest, "profile %q: template is longer than %d bytes", p.Name, api.MaxTemplateBytes)
	}
	return p.Resources.Validate()
}

// CheckQuota reports whether a sandbox requesting r fits in project org/name's quota q
// next to its usage u. The error is quota_exceeded, names the first exceeded quota with
// the numbers ("project acme/ci would use 6 of 5 sandboxes") and carries them as
// details (quota, limit, used, requested).
//
// A resource the quota limits must be requested: left at 0, the sandbox gets its
// pool's default size, which the control plane does not know and so could not
// count. Such a request is invalid_request, naming the field.
func CheckQuota(org, name string, q Quota, u Usage, r adapters.Resources) error {
	type check struct {
		what              string
		limit, used, want float64
		unit              string
	}
	for _, c := range []check{
		{"sandboxes", float64(q.Sandboxes), float64(u.Sandboxes), 1, "sandboxes"},
		{"cpu", q.CPU, u.CPU, r.CPU, "CPUs"},
		{"memoryMiB", float64(q.MemoryMiB), float64(u.MemoryMiB), float64(r.MemoryMiB), "MiB of memory"},
		{"diskGiB", float64(q.DiskGiB), float64(u.DiskGiB), float64(r.DiskGiB), "GiB of disk"},
	} {
		// A tiny tolerance keeps float sums of CPUs (0.1+0.2) from refusing an exact fit.
		if c.limit <= 0 || c.used+c.want <= c.limit+1e-9 {
			continue
		}
		return api.Errorf(api.CodeQuotaExceeded, "project %s/%s would use %s of %s %s",
			org, name, num(c.used+c.want), num(c.limit), c.unit).
			WithDetail("quota", c.what).WithDetail("limit", c.limit).
			WithDetail("used", c.used).WithDetail("requested", c.want)
	}
	for _, c := range []struct {
		field   string
		limited bool
		unset   bool
	}{
		{"cpu", q.CPU > 0, r.CPU == 0},
		{"memoryMiB", q.MemoryMiB > 0, r.MemoryMiB == 0},
		{"diskGiB", q.DiskGiB > 0, r.DiskGiB == 0},
	} {
		if c.limited && c.unset {
			return api.Errorf(api.CodeInvalidRequest,
				"project %s/%s has a %s quota, so a sandbox must request resources.%s: the pool's default size cannot be counted against it",
				org, name, c.field, c.field).WithDetail("quota", c.field)
		}
	}
	return nil
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// NormalizeProject stamps a project for PutProject: CreatedAt and UpdatedAt are now (a
// replace keeps the stored CreatedAt), Version 1 (a replace bumps the stored one).
func NormalizeProject(now time.Time, p Project) (Project, error) {
	if err := ValidateProject(p); err != nil {
		return p, err
	}
	now = Timestamp(now)
	p.CreatedAt, p.UpdatedAt, p.Version = now, now, 1
	return p, nil
}

// NormalizeProfile is NormalizeProject for profiles.
func NormalizeProfile(now time.Time, p Profile) (Profile, error) {
	if err := ValidateProfile(p); err != nil {
		return p, err
	}
	now = Timestamp(now)
	p.CreatedAt, p.UpdatedAt, p.Version = now, now, 1
	return p, nil
}

// ProjectKey is how errors name a project.
func ProjectKey(org, name string) string { return fmt.Sprintf("%s/%s", org, name) }
