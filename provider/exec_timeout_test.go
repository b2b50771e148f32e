package provider

import (
	"context"
	"testing"
	"time"

	"github.com/different-ai/differently/api"
)

func TestExecTimeout(t *testing.T) {
	if got := execTimeout(context.Background()); got != api.MaxExecTimeoutSeconds {
		t.Errorf("no deadline: %d", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if got := execTimeout(ctx); got > 3600 || got < 3500 {
		t.Errorf("an hour left: %d", got)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Minute))
	defer cancel2()
	if got := execTimeout(past); got != 1 {
		t.Errorf("deadline passed: %d", got)
	}
	far, cancel3 := context.WithTimeout(context.Background(), 1000*time.Hour)
	defer cancel3()
	if got := execTimeout(far); got != api.MaxExecTimeoutSeconds {
		t.Errorf("far deadline: %d", got)
	}
}
