// Package ids makes the prefixed, sortable IDs the system uses (sbx_<ulid>, inst_<ulid>,
// snap_<ulid>, fake_<ulid>).
package ids

import (
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// New returns prefix + "_" + a new ULID. ULIDs sort by creation time, which keeps
// list order stable and index inserts cheap.
func New(prefix string) string { return At(prefix, time.Now()) }

// At is New with the time given, for callers that carry an injected clock. IDs made in
// the same millisecond still sort in the order they were made: the library's default
// entropy is monotonic within a millisecond and safe for concurrent use.
func At(prefix string, t time.Time) string {
	return prefix + "_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(t), ulid.DefaultEntropy()).String())
}
