package web

import "testing"

func TestNegotiateJSON(t *testing.T) {
	for _, c := range []struct {
		accept        []string
		wantJSON, raw bool
	}{
		{nil, false, false},
		{[]string{""}, false, false},
		{[]string{"*/*"}, false, true},
		{[]string{"application/json"}, true, false},
		{[]string{"Application/JSON; charset=utf-8"}, true, false},
		{[]string{"application/json, */*"}, true, true},
		{[]string{"application/json", "*/*;q=0.1"}, true, true},
		{[]string{"*/*;q=0.9, application/json;q=0.8"}, false, true},
		{[]string{"application/octet-stream, application/json;q=0.5"}, false, true},
		{[]string{"application/json;q=0"}, false, false},
		{[]string{"application/json;q=0, */*"}, false, true},
		{[]string{"application/*"}, false, true},
		{[]string{"text/plain"}, false, true},
		{[]string{"application/json;q=2, */*"}, false, true}, // malformed q: entry ignored
		{[]string{"application/json;q=x"}, false, false},
		{[]string{"garbage/;;, application/json"}, true, false},
	} {
		j, r := negotiateJSON(c.accept)
		if j != c.wantJSON || r != c.raw {
			t.Errorf("Accept %q: json %v raw %v, want %v %v", c.accept, j, r, c.wantJSON, c.raw)
		}
	}
}
