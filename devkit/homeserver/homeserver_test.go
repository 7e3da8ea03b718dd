package homeserver

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// Both adapters satisfy Server.
var (
	_ Server = DendriteServer{}
	_ Server = SynapseServer{}
)

func TestParseNames(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"":                            nil,
		"dendrite":                    {"dendrite"},
		" Synapse , dendrite,synapse": {"synapse", "dendrite"},
		",,":                          nil,
	} {
		got, err := ParseNames(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseNames(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseNames("dendrite,conduit"); err == nil || !strings.Contains(err.Error(), `"conduit"`) || !strings.Contains(err.Error(), "synapse") {
		t.Errorf("unknown name: %v", err)
	}
	if err := Available(t.Context(), "conduit"); err == nil {
		t.Error("Available(conduit) = nil")
	}
	if err := Available(t.Context(), Dendrite); err != nil {
		t.Errorf("Available(dendrite) = %v", err)
	}
}

func TestAccountRedaction(t *testing.T) {
	t.Parallel()
	const token = "syt_very_secret_token"
	a := Account{UserID: "@lisa:localhost", DeviceID: "LISADEV", AccessToken: token}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "account", a)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q", a, a, a, a, a), logged.String()} {
		if strings.Contains(s, token) || !strings.Contains(s, "LISADEV") {
			t.Errorf("formatted account: %s", s)
		}
	}
}
