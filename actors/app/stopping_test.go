package app_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lisabot/lisa/actors/app"
)

// boom makes the stopping child panic.
type boom struct{}

// TestChildFailingWhileStoppingIsStopped: a child of app that panics
// while it is stopping (waiting for a slow grandchild, which protoactor
// lets it do while it still takes messages) is stopped, not restarted, so
// Stop returns. Before, protoactor's restart turned the stopping child
// back into a running one and app waited for it until the stop future
// timed out (a chaos campaign's SIGTERM: "future: timeout", exit 1).
func TestChildFailingWhileStoppingIsStopped(t *testing.T) {
	sys := app.NewSystem(slog.New(slog.DiscardHandler))
	childStopping := make(chan *actor.PID, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	// The grandchild stops only when the test lets it, so the child stays
	// in its stopping state until then.
	slow := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Stopping); ok {
			<-release
		}
	})
	child := actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			started <- struct{}{}
			if _, err := c.SpawnNamed(slow, "slow"); err != nil {
				panic(err)
			}
		case *actor.Stopping:
			childStopping <- c.Self()
		case *boom:
			panic("injected while stopping")
		}
	})
	if _, err := sys.Start(app.Props([]app.Child{{Name: "c", Props: child}}, 3, time.Minute, nil)); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- sys.Stop(ctx) }()
	var pid *actor.PID
	select {
	case pid = <-childStopping:
	case <-ctx.Done():
		t.Fatal("the child never began to stop")
	}
	// Release the grandchild once app has decided about the failure:
	// then the child's stop can complete (or, before the fix, its
	// restart).
	decided := make(chan actor.Directive, 1)
	sub := sys.Actors.EventStream.Subscribe(func(evt any) {
		if se, ok := evt.(*actor.SupervisorEvent); ok && se.Child != nil && se.Child.Id == pid.Id {
			select {
			case decided <- se.Directive:
			default:
			}
		}
	})
	defer sys.Actors.EventStream.Unsubscribe(sub)
	sys.Root.Send(pid, &boom{})
	select {
	case d := <-decided:
		if d != actor.StopDirective {
			t.Errorf("directive %v for a child that failed while stopping, want stop", d)
		}
	case <-ctx.Done():
		t.Fatal("the failure was never decided")
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return: the failed child was restarted instead of stopped")
	}
	if n := len(started); n != 0 {
		t.Errorf("the child started %d more times after failing while stopping", n)
	}
}
