package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/different-ai/differently/server/store"
)

// Placeholder until the event table lands; replaced by the real implementation.
var errNoEvents = errors.New("postgres: events are not stored yet")

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, string, error) {
	return nil, "", errNoEvents
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, now time.Time, r store.EventRetention) (int, error) {
	return 0, errNoEvents
}
