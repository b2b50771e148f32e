package sqlite

import (
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/different-ai/differently/server/store"
)

// Times are stored as INTEGER Unix microseconds, UTC: exact, sortable, and comparable in
// SQL with the "now" parameters, which are converted the same way.

func micros(t time.Time) int64 { return store.Timestamp(t).UnixMicro() }

// microsPtr converts an optional time to a nullable column value.
func microsPtr(t *time.Time) driver.Value {
	if t == nil {
		return nil
	}
	return micros(*t)
}

// timeCol scans an INTEGER micros column into a time.Time.
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(v any) error {
	n, ok := v.(int64)
	if !ok {
		return fmt.Errorf("sqlite: time column holds %T, not an integer", v)
	}
	*c.t = time.UnixMicro(n).UTC()
	return nil
}

// nullTimeCol scans a nullable INTEGER micros column into a *time.Time.
type nullTimeCol struct{ t **time.Time }

func (c nullTimeCol) Scan(v any) error {
	if v == nil {
		*c.t = nil
		return nil
	}
	var t time.Time
	if err := (timeCol{&t}).Scan(v); err != nil {
		return err
	}
	*c.t = &t
	return nil
}

// jsonText marshals a value for a TEXT column (STRICT tables refuse a BLOB there).
func jsonText(v any) (string, error) {
	b, err := store.MarshalJSON(v)
	return string(b), err
}
