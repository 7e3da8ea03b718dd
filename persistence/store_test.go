package persistence_test

import (
	"testing"

	"github.com/lisabot/lisa/persistence"
	"github.com/lisabot/lisa/persistence/persistencetest"
)

func TestMemoryConformance(t *testing.T) {
	persistencetest.Run(t, persistencetest.Factory{
		Open: func(testing.TB) persistence.Store { return persistence.NewMemory() },
	})
}

func TestBadgerConformance(t *testing.T) {
	dirs := map[persistence.Store]string{}
	open := func(t testing.TB, dir string) persistence.Store {
		s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dirs[s] = dir
		return s
	}
	persistencetest.Run(t, persistencetest.Factory{
		Open: func(t testing.TB) persistence.Store { return open(t, t.TempDir()) },
		Reopen: func(t testing.TB, s persistence.Store) persistence.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, dirs[s])
		},
	})
}

// The clean-stop mark survives a reopen, is taken once, and is absent
// after a run that did not mark it (a crash).
func TestCleanStopMark(t *testing.T) {
	dir := t.TempDir()
	open := func() *persistence.Badger {
		t.Helper()
		s, err := persistence.OpenBadger(dir, persistence.BadgerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	take := func(s *persistence.Badger) bool {
		t.Helper()
		clean, err := s.TakeCleanStop()
		if err != nil {
			t.Fatal(err)
		}
		return clean
	}
	steps := []struct {
		name string
		mark bool // the run stops cleanly: the next start must see it
	}{
		{"fresh store", false},
		{"after a crash", true},
		{"after a clean stop", false},
		{"after a crash following a clean start", true},
	}
	prevMarked := false
	for _, st := range steps {
		s := open()
		if got := take(s); got != prevMarked {
			t.Fatalf("%s: start sees clean=%v, want %v", st.name, got, prevMarked)
		}
		if take(s) {
			t.Fatalf("%s: the mark was taken twice", st.name)
		}
		if st.mark {
			if err := s.MarkCleanStop(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		prevMarked = st.mark
	}
}
