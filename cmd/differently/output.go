package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/different-ai/differently/client"
)

// table is what a command shows with -o table (aligned columns) and -o id (the first
// column's IDs, one a line, for scripts); -o json and -o yaml show the API's objects
// instead.
type table struct {
	header []string
	rows   [][]cell
	ids    []string
}

// cell is a table cell, with the colour its text gets on a terminal.
type cell struct {
	text   string
	colour int // an ANSI SGR foreground code; 0: none
}

func (a *app) table(header ...string) *table { return &table{header: header} }

// row adds a row of plain cells.
func (t *table) row(cells ...string) {
	r := make([]cell, len(cells))
	for i, c := range cells {
		r[i] = cell{text: c}
	}
	t.rows = append(t.rows, r)
}

// rowc adds a row of cells some of which may carry colour.
func (t *table) rowc(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) id(id string) { t.ids = append(t.ids, id) }

// emit writes v (for json and yaml) or t (for table and id) to stdout.
func (a *app) emit(v any, t *table) error {
	return a.emitTo(a.io.out, v, t, true)
}

func (a *app) emitTo(w io.Writer, v any, t *table, header bool) error {
	switch a.output {
	case "json":
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		data, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	case "id":
		for _, id := range t.ids {
			if _, err := fmt.Fprintln(w, id); err != nil {
				return err
			}
		}
		return nil
	}
	return t.write(w, a.colour(w), header)
}

// toYAML writes v as YAML with the keys and order of its JSON form, so that -o yaml
// and -o json name fields alike.
func toYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(data)
}

// paint wraps s in a colour. Every painted cell carries escape sequences of the same
// length (\x1b[NNm and \x1b[0m), so that tabwriter, which counts them as text, still
// aligns the columns when every cell is painted.
func paint(code int, s string) string {
	return fmt.Sprintf("\x1b[%02dm%s\x1b[0m", code, s)
}

// The colours of the tables.
const (
	bold   = 1
	red    = 31
	green  = 32
	yellow = 33
	blue   = 34
	cyan   = 36
	dim    = 90
	plain  = 39
)

func (t *table) write(w io.Writer, colour, header bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	line := func(cells []cell, head bool) {
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			text := c.text
			if text == "" && !head {
				text = "-"
			}
			// With colour, every cell is painted, the header bold and a cell without a
			// colour of its own plain: all carry escapes of one length (paint).
			switch {
			case !colour:
			case head:
				text = paint(bold, text)
			case c.colour != 0:
				text = paint(c.colour, text)
			default:
				text = paint(plain, text)
			}
			fmt.Fprint(tw, text)
		}
		fmt.Fprint(tw, "\n")
	}
	if header {
		h := make([]cell, len(t.header))
		for i, s := range t.header {
			h[i] = cell{text: s}
		}
		line(h, true)
	}
	for _, r := range t.rows {
		line(r, false)
	}
	return tw.Flush()
}

// widths are the widths of the table's columns: the longest cell of each, header
// included.
func (t *table) widths() []int {
	return t.growWidths(nil)
}

// growWidths widens w to fit the table's cells.
func (t *table) growWidths(w []int) []int {
	grow := func(i int, s string) {
		for len(w) <= i {
			w = append(w, 0)
		}
		w[i] = max(w[i], utf8.RuneCountInString(s))
	}
	for i, h := range t.header {
		grow(i, h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			grow(i, cellText(c.text))
		}
	}
	return w
}

func cellText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeRows writes the rows (no header) padded to widths, as the rows of a table
// written before: how a watch adds to its table.
func (t *table) writeRows(w io.Writer, colour bool, widths []int) error {
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			text := cellText(c.text)
			pad := ""
			if i < len(r)-1 && i < len(widths) {
				pad = strings.Repeat(" ", widths[i]-utf8.RuneCountInString(text)+3)
			}
			if colour && c.colour != 0 {
				text = paint(c.colour, text)
			}
			b.WriteString(text + pad)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// liveTable is a table whose rows keep coming (a watch, a follow): the header and
// the first rows at once, later rows padded to the same columns. With -o id it
// writes the IDs.
type liveTable struct {
	a      *app
	widths []int
	colour bool
}

// startLive writes t, leaving each column at least minWidths[i] wide for the rows
// to come.
func (a *app) startLive(t *table, minWidths map[int]int) (*liveTable, error) {
	l := &liveTable{a: a, widths: t.widths(), colour: a.colour(a.io.out)}
	for i, w := range minWidths {
		if i < len(l.widths) {
			l.widths[i] = max(l.widths[i], w)
		}
	}
	if a.output != "id" {
		head := &table{rows: [][]cell{make([]cell, len(t.header))}}
		for i, h := range t.header {
			head.rows[0][i] = cell{text: h, colour: bold}
		}
		if err := head.writeRows(a.io.out, l.colour, l.widths); err != nil {
			return nil, err
		}
	}
	return l, l.add(t)
}

// add writes t's rows.
func (l *liveTable) add(t *table) error {
	if l.a.output == "id" {
		for _, id := range t.ids {
			if _, err := fmt.Fprintln(l.a.io.out, id); err != nil {
				return err
			}
		}
		return nil
	}
	l.widths = t.growWidths(l.widths)
	return t.writeRows(l.a.io.out, l.colour, l.widths)
}

// stateColour is how a sandbox state shows on a terminal.
func stateColour(s string) int {
	switch s {
	case "running":
		return green
	case "queued", "provisioning", "terminating":
		return yellow
	case "stopped", "paused":
		return blue
	case "failed":
		return red
	case "terminated":
		return dim
	}
	return plain
}

// ago is how long before now t was, shortly: 45s, 12m, 3h, 5d.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	return short(now.Sub(t))
}

// short writes d in its largest unit.
func short(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if neg {
		return "-" + s
	}
	return s
}

// spinner shows that a long wait goes on: a turning mark and what is awaited, redrawn
// on one line of stderr. Only on a terminal; elsewhere the message is printed once, as
// a progress line, so that a CI log says what the job waits for.
type spinner struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (a *app) spin(msg string) *spinner {
	return a.spinIf(msg, true)
}

// spinIf is spin, saying msg off a terminal only when say is set: a short call
// (reconcile) needs no line in a log.
func (a *app) spinIf(msg string, say bool) *spinner {
	s := &spinner{stop: make(chan struct{}), done: make(chan struct{})}
	if !isTerminal(a.io.err) || a.quiet {
		if say {
			a.progress("%s", msg)
		}
		close(s.done)
		return s
	}
	w := a.io.err
	colour := a.colour(w)
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			frame := spinFrames[i%len(spinFrames)]
			if colour {
				frame = paint(cyan, frame)
			}
			fmt.Fprintf(w, "\r%s %s", frame, msg)
			select {
			case <-s.stop:
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// end stops the spinner and clears its line; it may be called more than once.
func (s *spinner) end() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// orEmpty gives an empty list rather than null to -o json.
// listCmd is a group's ls: what list returns, drawn by table, or as {"items": [...]}
// for -o json and -o yaml.
func listCmd[T any](a *app, short string, list func(*client.Client, context.Context) ([]T, error), table func([]T) *table) *cobra.Command {
	return &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: short, Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := list(c, a.ctx)
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"items": orEmpty(l)}, table(l))
		},
	}
}

// collectPages follows a list's cursors from the first page until there is no next
// one or limit items are in hand (0: no limit), and returns at most limit items.
func collectPages[T any](limit int, page func(cursor *string) ([]T, *string, error)) ([]T, error) {
	var all []T
	var cursor *string
	for {
		items, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == nil || *next == "" || limit > 0 && len(all) >= limit {
			break
		}
		cursor = next
	}
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// emitCompact writes v as one line of JSON (or a YAML document): a stream's element.
func (a *app) emitCompact(v any) error {
	if a.output == "yaml" {
		data, err := toYAML(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.io.out, "---\n%s", data)
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.io.out, "%s\n", data)
	return err
}
