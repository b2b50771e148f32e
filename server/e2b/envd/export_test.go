package envd

import "time"

// SetTicker replaces the keepalive tickers of h's streams.
func SetTicker(h *Handler, f func(time.Duration) (<-chan time.Time, func())) { h.newTicker = f }

// SetPollTicker replaces the tickers of h's directory watches.
func SetPollTicker(h *Handler, f func(time.Duration) (<-chan time.Time, func())) { h.newPollTicker = f }
