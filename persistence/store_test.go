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
