package freestyle

import "github.com/different-ai/differently/adapters/httpx"

// WithClientOptions configures the provider client further: tests lower its limits.
func WithClientOptions(opts ...httpx.Option) Option {
	return func(o *options) { o.httpx = append(o.httpx, opts...) }
}
