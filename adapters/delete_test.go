package adapters_test

import (
	"context"
	"testing"

	"github.com/different-ai/differently/adapters"
	"github.com/different-ai/differently/api"
)

// deleter answers Delete and Get as told.
type deleter struct {
	adapters.ExecutionAdapter
	del, get error
}

func (d deleter) Delete(context.Context, string) error { return d.del }
func (d deleter) Get(context.Context, string) (adapters.Instance, error) {
	return adapters.Instance{Ref: "i-1"}, d.get
}

func TestDeleteInstance(t *testing.T) {
	notFound := adapters.NotFound("no route for DELETE /x")
	down := adapters.Unavailable("down")
	for _, tc := range []struct {
		name     string
		del, get error
		want     api.Code // "" for success
	}{
		{"deleted", nil, nil, ""},
		{"delete failed", down, nil, api.CodeProviderUnavailable},
		{"not_found, and Get agrees", notFound, adapters.NotFound("gone"), ""},
		{"not_found, yet Get finds it", notFound, nil, api.CodeProviderUnavailable},
		{"not_found, and Get fails", notFound, down, api.CodeProviderUnavailable},
	} {
		err := adapters.DeleteInstance(t.Context(), deleter{del: tc.del, get: tc.get}, "i-1")
		if got := api.CodeOf(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
