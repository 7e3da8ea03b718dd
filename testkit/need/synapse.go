package need

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lisabot/lisa/devkit/synapse"
)

// RequireSynapseEnv, set to 1, turns a Synapse that cannot run here (no
// source tarball, no Debian Python packages) into a test failure.
const RequireSynapseEnv = "LISA_REQUIRE_SYNAPSE"

// synapseTool is Synapse from its source tarball on Debian's Python. Its
// check names exactly what is missing; the fix names where both come from.
var synapseTool = Tool{
	Name:       "synapse " + synapse.Version,
	RequireEnv: RequireSynapseEnv,
	Fix: "point " + synapse.TarballEnv + " at synapse-" + synapse.Version +
		".tar.gz (../shared/tools/synapse/) and apt-get install the packages named (.ci/run lists them)",
	Check: checkSynapse,
}

// checkSynapse returns "" when Synapse can run, else what is missing.
func checkSynapse() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := synapse.Prerequisites(ctx, "")
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), "synapse "+synapse.Version+": ")
}

// Synapse skips t with one line naming what is missing unless Synapse can
// run here (its source tarball is found and Debian's python3 imports every
// module it needs); with LISA_REQUIRE_SYNAPSE=1 it fails t instead.
func Synapse(t testing.TB) {
	t.Helper()
	synapseTool.Need(t)
}

// HaveSynapse reports whether Synapse can run here.
func HaveSynapse() bool { return synapseTool.problem() == "" }

// SynapseRequired reports whether LISA_REQUIRE_SYNAPSE=1 is set.
func SynapseRequired() bool { return synapseTool.Required() }

// SynapseProblem returns "" when Synapse can run here, else one line
// saying what is missing and how to fix it.
func SynapseProblem() string {
	if why := synapseTool.problem(); why != "" {
		return synapseTool.Name + ": " + why + " (" + synapseTool.Fix + ")"
	}
	return ""
}
