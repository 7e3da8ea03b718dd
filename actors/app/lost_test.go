package app_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/app"
)

// TestLostChildIsReported: a top-level child that keeps failing is stopped
// by the app supervisor, and that is reported instead of leaving Lisa
// running without it; stopping the app itself reports nothing.
func TestLostChildIsReported(t *testing.T) {
	sys := app.NewSystem(slog.New(slog.DiscardHandler))
	lost := make(chan string, 4)
	failing := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			panic("cannot start")
		}
	})
	healthy := actor.PropsFromFunc(func(actor.Context) {})
	if _, err := sys.Start(app.Props([]app.Child{{Name: "bad", Props: failing}, {Name: "good", Props: healthy}}, 2, time.Minute,
		func(child string) { lost <- child })); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-lost:
		if got != "bad" {
			t.Fatalf("lost %q, want bad", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stopped child was not reported")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sys.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-lost:
		t.Fatalf("stopping the app reported %q as lost", got)
	default:
	}
}
