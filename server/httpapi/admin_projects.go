package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/different-ai/differently/api"
	"github.com/different-ai/differently/server/store"
)

// Projects exist implicitly: any sandbox names its org and project. PUT declares one to
// give it a quota (0 = unlimited), DELETE removes the declaration. GET answers for any
// project, declared or not, with its usage and accrued cost, so that a Terraform
// resource can import a project by name and read it back without a diff.

// projectTally is what the API adds to a stored project: usage and accrued cost.
type projectTally struct {
	usage store.Usage
	cost  float64
}

type projectKey struct{ org, name string }

// tallyProjects walks the sandboxes matching f (every page) and sums, per project, the
// usage of the non-terminal ones and the estimated cost of all of them.
func (s *Server) tallyProjects(ctx context.Context, f store.SandboxFilter) (map[projectKey]*projectTally, error) {
	out := map[projectKey]*projectTally{}
	now := s.now()
	f.Limit = store.MaxLimit
	for {
		items, next, err := s.st.ListSandboxes(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		for _, sb := range items {
			k := projectKey{sb.Org, sb.Project}
			t := out[k]
			if t == nil {
				t = &projectTally{}
				out[k] = t
			}
			if !sb.State.IsTerminal() {
				t.usage.Add(sb.Resources)
			}
			if sb.Pool != "" {
				if v, ok := s.pools.View(sb.Pool); ok {
					t.cost = saturate(t.cost + estimateCost(sb, v.Pool.CostModel, now))
				}
			}
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

func toProject(p store.Project, declared bool, t projectTally) Project {
	q := p.Quota
	out := Project{
		Org:      p.Org,
		Name:     p.Name,
		Declared: declared,
		Quota:    ProjectQuota{Sandboxes: ptr(q.Sandboxes), Cpu: ptr(q.CPU), MemoryMiB: ptr(q.MemoryMiB), DiskGiB: ptr(q.DiskGiB)},
		Usage:    ProjectUsage{Sandboxes: t.usage.Sandboxes, Cpu: t.usage.CPU, MemoryMiB: t.usage.MemoryMiB, DiskGiB: t.usage.DiskGiB},
		Cost:     t.cost,
	}
	if declared {
		out.CreatedAt, out.UpdatedAt = ptr(p.CreatedAt), ptr(p.UpdatedAt)
	}
	return out
}

func validProject(org, project string) error {
	if err := api.CheckTenantName("org", org); err != nil {
		return err
	}
	return api.CheckTenantName("project", project)
}

// projectAnswer reads a project, declared or implicit, with its usage and cost.
func (s *Server) projectAnswer(ctx context.Context, org, name string) (Project, error) {
	p, err := s.st.GetProject(ctx, org, name)
	declared := err == nil
	switch {
	case api.IsCode(err, api.CodeNotFound):
		p = store.Project{Org: org, Name: name}
	case err != nil:
		return Project{}, fmt.Errorf("get project: %w", err)
	}
	t, err := s.projectTally(ctx, org, name)
	if err != nil {
		return Project{}, err
	}
	return toProject(p, declared, t), nil
}

// projectTally reads one project's usage and cost.
func (s *Server) projectTally(ctx context.Context, org, name string) (projectTally, error) {
	usage, err := s.st.ProjectUsage(ctx, org, name)
	if err != nil {
		return projectTally{}, fmt.Errorf("project usage: %w", err)
	}
	tally, err := s.tallyProjects(ctx, store.SandboxFilter{Org: org, Project: name})
	if err != nil {
		return projectTally{}, err
	}
	t := projectTally{usage: usage}
	if got := tally[projectKey{org, name}]; got != nil {
		t.cost = got.cost
	}
	return t, nil
}

func (s *Server) ListProjects(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	declared, err := s.st.ListProjects(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tally, err := s.tallyProjects(ctx, store.SandboxFilter{})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ProjectList{Items: []Project{}}
	for _, p := range declared {
		k := projectKey{p.Org, p.Name}
		t := projectTally{}
		if got := tally[k]; got != nil {
			t = *got
			delete(tally, k)
		}
		out.Items = append(out.Items, toProject(p, true, t))
	}
	for k, t := range tally {
		out.Items = append(out.Items, toProject(store.Project{Org: k.org, Name: k.name}, false, *t))
	}
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		if a.Org != b.Org {
			return a.Org < b.Org
		}
		return a.Name < b.Name
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) GetProject(w http.ResponseWriter, r *http.Request, org, project string) {
	if err := validProject(org, project); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.projectAnswer(r.Context(), org, project)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// PutProject declares the project or replaces its quota. A quota lowered below the
// current usage refuses new sandboxes only; running ones are left alone.
func (s *Server) PutProject(w http.ResponseWriter, r *http.Request, org, project string) {
	var body ProjectSpec
	if err := decodeJSON(r, &body, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := validProject(org, project); err != nil {
		s.writeError(w, r, err)
		return
	}
	p := store.Project{Org: org, Name: project}
	if q := body.Quota; q != nil {
		p.Quota = store.Quota{Sandboxes: deref(q.Sandboxes), CPU: deref(q.Cpu), MemoryMiB: deref(q.MemoryMiB), DiskGiB: deref(q.DiskGiB)}
	}
	if err := store.ValidateProject(p); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Usage and cost are read before the write, which does not change them: a failure
	// to read them then refuses the request with nothing stored, where reading them
	// after would answer an error for a quota already in force.
	ctx := r.Context()
	t, err := s.projectTally(ctx, org, project)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stored, err := s.st.PutProject(ctx, s.now(), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toProject(stored, true, t))
}

// DeleteProject removes the declaration and, with it, the project's tokens: a token
// kept would go on creating sandboxes in a project that no quota bounds any more.
// Refused (invalid_state) while the project has sandboxes that are not terminated.
func (s *Server) DeleteProject(w http.ResponseWriter, r *http.Request, org, project string) {
	// Dropped on this replica at once; the others hear of each token through the
	// change feed.
	defer s.cache.forgetProject(org, project)
	if err := s.st.DeleteProject(r.Context(), org, project); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
