package main

import "testing"

func TestInvocationText(t *testing.T) {
	cases := []struct{ in, want string }{
		{`<room_context room_id="!r"><message sequence="1" invocation="true">
Lisa, is 1 &lt; 2 &amp;&amp; "x"?
</message></room_context>`, `Lisa, is 1 < 2 && "x"?`},
		{`<room_context></room_context>`, ""},
		{`<message invocation="true">
and then?
<reply_to sequence="3" />
</message>`, "and then?"},
	}
	for _, c := range cases {
		if got := invocationText(c.in); got != c.want {
			t.Errorf("invocationText = %q, want %q", got, c.want)
		}
	}
}
