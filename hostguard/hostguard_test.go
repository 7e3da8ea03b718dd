package hostguard

import "testing"

func TestLocal(t *testing.T) {
	for _, c := range []struct {
		host, listen string
		ok           bool
	}{
		{"127.0.0.1", "", true},
		{"127.0.0.1:8088", "127.0.0.1", true},
		{"127.3.4.5:1", "", true},
		{"[::1]:8088", "", true},
		{"[::1]", "", true},
		{"::1", "", true},
		{"localhost", "", true},
		{"LOCALHOST:8088", "", true},
		{"lisa.lan:8088", "lisa.lan", true},
		{"192.168.1.5:8088", "192.168.1.5", true},
		{"[fe80::1]:8088", "fe80::1", true},
		{"rebind.attacker.example", "127.0.0.1", false},
		{"rebind.attacker.example:8088", "127.0.0.1", false},
		{"localhost.attacker.example", "", false},
		{"127.0.0.1.attacker.example", "", false},
		{"192.168.1.5:8088", "127.0.0.1", false},
		{"", "", false},
		{"[::1%25lo]:8088", "", false},
	} {
		if got := Local(c.host, c.listen); got != c.ok {
			t.Errorf("Local(%q, %q) = %v, want %v", c.host, c.listen, got, c.ok)
		}
	}
}
