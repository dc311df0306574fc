package redact

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user:hunter2@127.0.0.1:6379/0", "redis://user:***@127.0.0.1:6379/0"},
		{"redis://:hunter2@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"},
		{"redis://default:p%40ss%2Fw@host/3", "redis://default:***@host/3"},
		{"unix://u:hunter2@/run/redis.sock?db=2", "unix://u:***@/run/redis.sock?db=2"},
		{"https://cat:hunter2@catalog.lan:8181/api", "https://cat:***@catalog.lan:8181/api"},
		{"http://only-user@host:9000", "http://only-user@host:9000"},
		{"127.0.0.1:9000", "127.0.0.1:9000"},
		// Does not parse, or parses as an opaque URL: all user info goes.
		{"redis://u:hun ter2@host:bad/0", "redis://***@host:bad/0"},
		{"redis://u:hunter2@[::1/0", "redis://***@[::1/0"},
		{"ak:hunter2@127.0.0.1:9000", "***@127.0.0.1:9000"},
		{"", ""},
	} {
		got := URL(tc.in)
		if got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "hunter2") || strings.Contains(got, "hun ter2") {
			t.Errorf("URL(%q) = %q keeps the password", tc.in, got)
		}
	}
}

func TestParseURLAndURLError(t *testing.T) {
	_, err := ParseURL("http://u:hunter2@h0st:port/x")
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "h0st") {
		t.Errorf("ParseURL error %v: want one that quotes no URL", err)
	}
	if u, err := ParseURL("http://u:hunter2@host:81/x"); err != nil || u.Host != "host:81" {
		t.Errorf("ParseURL = %v, %v", u, err)
	}
	_, err = http.Get("http://u:hunter2@127.0.0.1:1/x?y")
	if err == nil {
		t.Fatal("GET to port 1 succeeded")
	}
	if !strings.Contains(err.Error(), "hunter2") && !strings.Contains(err.Error(), "***") {
		t.Fatalf("net/http's error %q names no URL", err)
	}
	direct := URLError(err)
	var ue *url.Error
	if !errors.As(direct, &ue) || strings.Contains(direct.Error(), "hunter2") || !strings.Contains(direct.Error(), "u:***@127.0.0.1:1/x") {
		t.Errorf("URLError = %q (%T)", direct, direct)
	}
	forged := &url.Error{Op: "Get", URL: "http://u:hunter2@h0st/", Err: errors.New("boom")}
	got := URLError(fmt.Errorf("wrapped: %w", forged)).Error()
	if got != "wrapped: Get \"http://u:***@h0st/\": boom" {
		t.Errorf("URLError of a wrapped *url.Error = %q", got)
	}
	plain := errors.New("no URL here")
	if URLError(plain) != plain {
		t.Error("URLError changed an error without a URL")
	}
}
