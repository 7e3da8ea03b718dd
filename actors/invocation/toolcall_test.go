package invocation

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckArgumentsNullable: a required argument whose schema allows
// null (how strict schemas spell an optional one, e.g. web_search's
// result_count) may be omitted; a required argument that may not be null
// may not, and a present one must still have the declared type.
func TestCheckArgumentsNullable(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},` +
		`"result_count":{"type":["integer","null"]}},"required":["query","result_count"],"additionalProperties":false}`)
	for _, c := range []struct {
		args, problem string
	}{
		{`{"query":"q","result_count":3}`, ""},
		{`{"query":"q","result_count":null}`, ""},
		{`{"query":"q"}`, ""},
		{`{"result_count":3}`, `missing required argument "query"`},
		{`{"query":"q","result_count":"3"}`, `argument "result_count" must be of type integer or null`},
		{`{"query":"q","result_count":2.5}`, `must be of type integer or null`},
	} {
		_, problem := checkArguments(c.args, schema)
		if (c.problem == "") != (problem == "") || !strings.Contains(problem, c.problem) {
			t.Errorf("checkArguments(%s) problem = %q, want %q", c.args, problem, c.problem)
		}
	}
}
