package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/different-ai/differently/server/store"
)

// pageNames are the templates under templates/, each rendered inside layout.html.
var pageNames = []string{"signin", "error", "sandboxes", "sandbox", "confirm", "pools", "trust", "reconcile"}

// pages holds one template set per page: layout.html with the page's "content" (and
// "live", the part the script refreshes, where it has one).
type pages map[string]*template.Template

var funcs = template.FuncMap{
	"when": func(t any) string {
		switch t := t.(type) {
		case time.Time:
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if t == nil || t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		}
		return "—"
	},
	"cost": func(f float64) string { return fmt.Sprintf("%.4f", f) },
	// claimP50 is a warm shape's median claim time, or "" before its first hit.
	"claimP50": func(s store.WarmStats) string {
		d, ok := s.ClaimQuantile(0.5)
		if !ok {
			return ""
		}
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	},
	"ttl":    ttlText,
	"labels": labelText,
	"join":   strings.Join,
	"pct": func(used, limit int) string {
		if limit <= 0 {
			return ""
		}
		return fmt.Sprintf("%d%%", used*100/limit)
	},
}

// ttlText is a TTL in seconds as an operator reads it.
func ttlText(secs int64) string {
	if secs <= 0 {
		return "none"
	}
	return (time.Duration(secs) * time.Second).String()
}

// labelText is labels as k=v, sorted.
func labelText(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return strings.Join(keys, " ")
}

func parsePages() (pages, error) {
	out := pages{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// frame is what the layout needs besides the page's own data.
type frame struct {
	Page     string
	SignedIn bool
	Admin    bool
	Who      string
	CSRF     string
	// Refresh is the script's refresh interval in milliseconds.
	Refresh int64
	Data    any
}

// render writes page name, or with fragment only its "live" part, rendered into a
// buffer first so that a template error is a 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view, data any) {
	f := frame{Page: name, Data: data, Refresh: c.refresh.Milliseconds()}
	if v != nil {
		f.SignedIn, f.Admin, f.CSRF = true, v.caller.Admin, v.ses.csrf
		f.Who = "admin"
		if !v.caller.Admin {
			f.Who = "project " + v.caller.Org + "/" + v.caller.Project
		}
	}
	tmpl := "layout"
	if isFragment(r) && status == http.StatusOK {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, tmpl, f); err != nil {
		c.log.Error("console: render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// serveStatic serves the embedded script and style sheet; nothing else is listed.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	data, err := fs.ReadFile(staticFS, name)
	if err != nil || !strings.HasPrefix(name, "static/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(data)
}
