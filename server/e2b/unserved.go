package e2b

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// Why E2B's routes that this front door does not serve are not served. Each is
// answered with 501 in E2B's error shape, never with the router's 404: E2B's SDKs
// take a 404 from getMetrics or updateNetwork for "sandbox not
// found", and from Template.exists for "no such template", which would be wrong
// about a sandbox or profile that exists.
const (
	whyMetrics   = "Differently collects no per-sandbox resource metrics: its pools report none"
	whyLogs      = "Differently keeps no sandbox logs; its native API has the sandbox's events (GET /v1/sandboxes/{id}/events)"
	whyNetwork   = "a sandbox's network is its pool's, set by the operator"
	whyTemplates = "E2B templates are Differently profiles, which an admin defines on the native API (PUT /v1/admin/profiles/{name}); templates are not built or listed here"
	whyTeams     = "teams, API keys, access tokens and nodes are Differently's projects, tokens and pools, on its native API"
	whyVolumes   = "volumes are not supported"
	whySecrets   = "secrets are not supported"
)

// unservedRoutes are the routes of E2B's published API (openapi.yml, with the
// forms its SDKs send) that the front door answers with 501.
var unservedRoutes = []struct{ method, pattern, why string }{
	{"GET", "/sandboxes/metrics", whyMetrics},
	{"GET", "/sandboxes/{id}/metrics", whyMetrics},
	{"GET", "/teams/{team}/metrics", whyMetrics},
	{"GET", "/teams/{team}/metrics/max", whyMetrics},
	{"GET", "/sandboxes/{id}/logs", whyLogs},
	{"GET", "/v2/sandboxes/{id}/logs", whyLogs},
	{"PUT", "/sandboxes/{id}/network", whyNetwork},
	{"GET", "/templates", whyTemplates},
	{"POST", "/templates", whyTemplates},
	{"GET", "/v2/templates", whyTemplates},
	{"POST", "/v2/templates", whyTemplates},
	{"POST", "/v3/templates", whyTemplates},
	{"GET", "/templates/{template}", whyTemplates},
	{"POST", "/templates/{template}", whyTemplates},
	{"PATCH", "/templates/{template}", whyTemplates},
	{"PATCH", "/v2/templates/{template}", whyTemplates},
	{"GET", "/templates/{template}/files/{hash}", whyTemplates},
	{"POST", "/templates/{template}/builds/{build}", whyTemplates},
	{"POST", "/v2/templates/{template}/builds/{build}", whyTemplates},
	{"GET", "/templates/{template}/builds/{build}/status", whyTemplates},
	{"GET", "/templates/{template}/builds/{build}/logs", whyTemplates},
	{"POST", "/templates/tags", whyTemplates},
	{"DELETE", "/templates/tags", whyTemplates},
	{"GET", "/templates/{template}/tags", whyTemplates},
	{"GET", "/teams", whyTeams},
	{"GET", "/api-keys", whyTeams},
	{"POST", "/api-keys", whyTeams},
	{"PATCH", "/api-keys/{key}", whyTeams},
	{"DELETE", "/api-keys/{key}", whyTeams},
	{"POST", "/access-tokens", whyTeams},
	{"DELETE", "/access-tokens/{token}", whyTeams},
	{"GET", "/nodes", whyTeams},
	{"GET", "/nodes/{node}", whyTeams},
	{"POST", "/nodes/{node}", whyTeams},
	{"POST", "/admin/teams/{team}/sandboxes/kill", whyTeams},
	{"GET", "/admin/sandboxes/running-counts", whyTeams},
	{"POST", "/admin/teams/{team}/builds/cancel", whyTeams},
	{"POST", "/admin/teams/{team}/api-keys", whyTeams},
	{"DELETE", "/admin/teams/{team}/api-keys/{key}", whyTeams},
	{"GET", "/volumes", whyVolumes},
	{"POST", "/volumes", whyVolumes},
	{"GET", "/volumes/{volume}", whyVolumes},
	{"DELETE", "/volumes/{volume}", whyVolumes},
	{"GET", "/secrets", whySecrets},
	{"POST", "/secrets", whySecrets},
	{"GET", "/secrets/{secret}", whySecrets},
	{"POST", "/secrets/{secret}", whySecrets},
	{"DELETE", "/secrets/{secret}", whySecrets},
}

// routeUnserved adds unservedRoutes to r. They sit behind the key check: a caller
// without a key learns nothing but 401.
func routeUnserved(r chi.Router) {
	for _, u := range unservedRoutes {
		why := u.why
		r.Method(u.method, u.pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeUnserved(w, r, why) }))
	}
}

// writeUnserved answers r with 501, saying why.
func writeUnserved(w http.ResponseWriter, r *http.Request, why string) {
	writeJSON(w, http.StatusNotImplemented, apiError{Code: http.StatusNotImplemented,
		Message: "Differently's E2B front door does not serve " + r.Method + " " + r.URL.Path + ": " + why})
}
