package matrix

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/testkit/fakehs"
)

// TestIdentifyThroughFakeHomeserver: the "auto" verdict of
// matrix.txn_ids_survive_restart for each server's way of naming itself
// (docs/homeservers.md, "How each server names itself"), served by the
// fake homeserver's Identity and Proxy modes: Synapse is trusted by its
// header or, behind nginx, its federation version; nginx alone, Dendrite
// and the Conduit family are not (its mapping is written apart from the
// event); the Conduit family is still named through its own endpoint
// when federation is off.
func TestIdentifyThroughFakeHomeserver(t *testing.T) {
	synapse := fakehs.Identity{ServerHeader: "Synapse/1.67.0", Name: "Synapse", Version: "1.67.0", FederationVersion: true}
	continuwuity := fakehs.Identity{Name: "continuwuity", Version: "26.8.0-alpha.1", FederationVersion: true, ServerVersionPath: "/_continuwuity/server_version"}
	noFederation := continuwuity
	noFederation.FederationVersion = false
	cases := []struct {
		name  string
		id    fakehs.Identity
		proxy *fakehs.Proxy
		want  ServerIdentity
		keep  bool
	}{
		{"Synapse", synapse, nil, ServerIdentity{"Synapse", "1.67.0", "server header"}, true},
		{"Synapse behind nginx", synapse, &fakehs.Proxy{ServerHeader: "nginx"}, ServerIdentity{"Synapse", "1.67.0", "federation version"}, true},
		{"Synapse behind nginx, federation not routed", synapse, &fakehs.Proxy{ServerHeader: "nginx", HideFederation: true}, ServerIdentity{"nginx", "", "server header"}, false},
		{"Dendrite", fakehs.Identity{Name: "Dendrite", Version: "0.13.8", FederationVersion: true}, nil, ServerIdentity{"Dendrite", "0.13.8", "federation version"}, false},
		{"Continuwuity", continuwuity, nil, ServerIdentity{"continuwuity", "26.8.0-alpha.1", "federation version"}, false},
		{"Continuwuity without federation", noFederation, nil, ServerIdentity{"continuwuity", "26.8.0-alpha.1", "server_version"}, false},
		{"Continuwuity behind nginx, federation not routed", continuwuity, &fakehs.Proxy{ServerHeader: "nginx", HideFederation: true}, ServerIdentity{"continuwuity", "26.8.0-alpha.1", "server_version"}, false},
		{"nothing said", fakehs.Identity{}, nil, ServerIdentity{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs := fakehs.New(fakehs.Options{UserID: "@lisa:fake.test", DeviceID: "LISA", Token: "tok", Identity: tc.id, Proxy: tc.proxy})
			if err := hs.Listen(); err != nil {
				t.Fatal(err)
			}
			defer hs.Close()
			c, err := Connect(context.Background(), hs.URL(), "@lisa:fake.test", "LISA", "tok", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := c.Identify(context.Background(), 5*time.Second)
			if got != tc.want {
				t.Fatalf("Identify = %+v, want %+v", got, tc.want)
			}
			if p := TxnIDPolicy("auto", got); (p.Retention > 0) != tc.keep {
				t.Fatalf("auto = %+v, want keep %v", p, tc.keep)
			}
		})
	}
}

// TestAppserviceTokenRefused: whoami without device_id (a token without
// a device, an appservice's, on Continuwuity and Synapse) is refused with
// a message that names appservice tokens.
func TestAppserviceTokenRefused(t *testing.T) {
	hs := fakehs.New(fakehs.Options{UserID: "@lisa:fake.test", Token: "as_token"})
	if err := hs.Listen(); err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	_, err := Connect(context.Background(), hs.URL(), "@lisa:fake.test", "LISA", "as_token", nil)
	if err == nil || !strings.Contains(err.Error(), "appservice token") || strings.Contains(err.Error(), "as_token") {
		t.Fatalf("Connect = %v, want a refusal naming appservice tokens (and not the token)", err)
	}
}
