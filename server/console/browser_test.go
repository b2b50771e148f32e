package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/different-ai/differently/client"
)

// Environment of the browser test.
const (
	// envSkipBrowser=1 skips the browser test where Chromium cannot be installed;
	// .ci/run refuses it.
	envSkipBrowser = "DIFFERENTLY_SKIP_BROWSER_TESTS"
	// envScreenshots names the folder the test writes its screenshots to
	// (docs/console/ for the documentation); unset, a temporary one.
	envScreenshots = "DIFFERENTLY_CONSOLE_SCREENSHOTS"
)

// browserTimeout bounds the whole browser session, start of Chromium included.
const browserTimeout = 2 * time.Minute

// chromium finds Debian's Chromium, failing the test without it unless the skip is
// asked for: a console nobody drove in a browser is not tested.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(envSkipBrowser) == "1" {
		t.Skipf("%s=1: skipping the console's browser test (no chromium on PATH)", envSkipBrowser)
	}
	t.Fatalf("chromium is not on PATH: the console's browser test drives a real headless Chromium "+
		"(apt-get install -y chromium); set %s=1 to skip it", envSkipBrowser)
	return ""
}

// The console in a real headless Chromium against a real daemon: sign in, watch a
// sandbox appear without reloading, open its history, stop and delete it through
// the confirmation pages, look at the admin pages, and see that a project token
// cannot open another project's sandbox. Screenshots of the main pages are written
// on the way.
func TestConsoleBrowser(t *testing.T) {
	path := chromium(t)
	shots := os.Getenv(envScreenshots)
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	dd := startDaemon(t)
	beta := dd.projectToken(t, "beta")
	// A price, a limit and a warm shape on the fake pool, for the pools page to show.
	cpuHour, memHour, limit, template := 0.05, 0.01, 20, "python"
	if _, err := dd.c.PatchPool(t.Context(), "fake", client.PoolPatch{
		CostModel:      &client.CostModel{CpuHour: &cpuHour, MemoryGiBHour: &memHour},
		MaxConcurrency: &limit,
		Warm:           &[]client.WarmShape{{Template: &template, Size: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	// Some company for the screenshots, and a sandbox of another project to hide.
	dd.sandbox(t, "alpha", map[string]string{"team": "red", "job": "ci"})
	dd.sandbox(t, "gamma", map[string]string{"team": "blue"})
	hidden := dd.sandbox(t, "alpha", map[string]string{"team": "red"})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// Every error the pages log (a CSP violation, a failed load) and every uncaught
	// exception fails the test; the 401 and 404 answers the test asks for are
	// expected.
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(browserCtx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError && !strings.Contains(ev.Entry.Text, "status of 404") {
				problems = append(problems, "log: "+ev.Entry.Text)
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The browser lives as long as browserCtx; each step is bounded by ctx.
	ctx, cancel := context.WithTimeout(browserCtx, browserTimeout)
	defer cancel()

	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			return chromedp.Void{}, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		}
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	eval := func(expr string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}

	run("sign-in page", chromedp.Navigate(dd.url+"/ui/"), chromedp.WaitVisible(css("#token")), shot("signin"))
	run("sign in", chromedp.SendKeys(css("#token"), dd.token), chromedp.Submit(css("#signin")),
		chromedp.WaitVisible(css("#sandbox-rows")))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || strings.Contains(loc, dd.token) || !strings.HasSuffix(loc, "/ui/sandboxes") {
		t.Fatalf("after sign-in the browser is at %s (%v)", loc, err)
	}

	// A sandbox created through the API shows up in the open page: the marker set
	// on the page survives, so no navigation happened.
	eval(`window.consoleTestMarker = 42`)
	sb := dd.sandbox(t, "alpha", map[string]string{"team": "green"})
	row := fmt.Sprintf(`tr[data-id="%s"]`, sb.Id)
	run("the new sandbox appears live", chromedp.WaitVisible(css(row)))
	if m := eval(`window.consoleTestMarker`); m != float64(42) {
		t.Fatalf("the page was reloaded (marker %v), not refreshed in place", m)
	}
	run("sandboxes screenshot", shot("sandboxes"))

	run("open the sandbox", chromedp.Click(css(row+" a")), chromedp.WaitVisible(css("#events")))
	history := text("#events")
	for _, want := range []string{"created", "placed", "running", "fake", "rank 1"} {
		if !strings.Contains(history, want) {
			t.Errorf("the history lacks %q:\n%s", want, history)
		}
	}
	run("sandbox screenshot", shot("sandbox"))

	run("stop: confirmation", chromedp.Click(css("#action-stop")), chromedp.WaitVisible(css("#confirm")),
		shot("confirm-stop"))
	if got, _ := dd.c.GetSandbox(t.Context(), sb.Id); got == nil || got.State != "running" {
		t.Fatalf("the confirmation page alone changed the sandbox: %+v", got)
	}
	run("stop", chromedp.Click(css("#confirm")), chromedp.WaitVisible(css("#done")))
	if s := text("#state"); s != "stopped" {
		t.Fatalf("after stop the page shows %q", s)
	}
	run("delete: confirmation, then cancel", chromedp.Click(css("#action-delete")),
		chromedp.WaitVisible(css("#cancel")), chromedp.Click(css("#cancel")),
		chromedp.WaitVisible(css("#action-delete")))
	if got, _ := dd.c.GetSandbox(t.Context(), sb.Id); got == nil || got.State != "stopped" {
		t.Fatalf("a cancelled delete changed the sandbox: %+v", got)
	}
	run("delete", chromedp.Click(css("#action-delete")), chromedp.WaitVisible(css("#confirm")),
		chromedp.Click(css("#confirm")), chromedp.WaitVisible(css("#done")),
		// The scheduler deletes the instance; the page follows it to terminated.
		chromedp.WaitVisible(css("#state.state-terminated")))

	run("pools", chromedp.Navigate(dd.url+"/ui/pools"), chromedp.WaitVisible(css(`tr[data-pool="fake"]`)),
		shot("pools"))
	if p := text(`tr[data-pool="fake"]`); !strings.Contains(p, "healthy") || !strings.Contains(p, "/ 20") ||
		!strings.Contains(p, "python") || !strings.Contains(p, "of 2") || !strings.Contains(p, "0 misses") || !strings.Contains(p, "0.05/CPU") {
		t.Errorf("the fake pool's row lacks its health, limit, warm shape or price: %q", p)
	}
	run("trust", chromedp.Navigate(dd.url+"/ui/trust"), chromedp.WaitVisible(css("#trust")), shot("trust"))
	run("reconcile", chromedp.Navigate(dd.url+"/ui/reconcile"), chromedp.Click(css("#action-reconcile")),
		chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm")),
		chromedp.WaitVisible(css(`section.pass[data-trigger="on_demand"] table.pass`)), shot("reconcile"))

	// A project token: its own project only. Another project's sandbox is not
	// found, and absent from the list.
	run("sign out", chromedp.Click(css("header .signout button")), chromedp.WaitVisible(css("#token")))
	run("sign in as beta", chromedp.SendKeys(css("#token"), beta), chromedp.Submit(css("#signin")),
		chromedp.WaitVisible(css("#sandbox-rows")))
	if absent := eval(fmt.Sprintf(`document.querySelector('tr[data-id="%s"]') === null`, hidden.Id)); absent != true {
		t.Errorf("project beta's list shows alpha's sandbox %s", hidden.Id)
	}
	run("another project's sandbox", chromedp.Navigate(dd.url+"/ui/sandboxes/"+hidden.Id),
		chromedp.WaitVisible(css("#error-message")))
	if msg := text("#error-message"); !strings.Contains(msg, "not found") {
		t.Errorf("another project's sandbox: %q", msg)
	}
	if h := text("h1"); !strings.Contains(h, "404") {
		t.Errorf("another project's sandbox: heading %q, want 404", h)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}
