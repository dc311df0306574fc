package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// With HTTP Basic on, the page's own files load without a login, so that
// the page can show its log-in form; the API behind them does not, nor
// does anything but GET and HEAD on them.
func TestPageShellBeforeLogin(t *testing.T) {
	eng, _ := openEngine(t)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet, Login: LoginBasic,
		Passwords: fixedPasswords{"alice": "alice-pw"}})
	do := func(method, path, user, pw string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, path := range []string{"/", "/static/kit.js", "/static/app.js", "/static/login.js", "/static/style.css"} {
		for _, method := range []string{"GET", "HEAD"} {
			if w := do(method, path, "", ""); w.Code != http.StatusOK {
				t.Errorf("%s %s without a login: %d, want 200", method, path, w.Code)
			}
		}
	}
	if w := do("GET", "/", "", ""); !strings.Contains(w.Body.String(), `id="login-form"`) {
		t.Errorf("the page has no log-in form")
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/status"}, {"GET", "/api/v1/topics"}, {"POST", "/"}, {"POST", "/static/app.js"}, {"GET", "/metrics"}, {"GET", "/nope"},
	} {
		w := do(tc.method, tc.path, "", "")
		if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic") {
			t.Errorf("%s %s without a login: %d %q, want 401 with a Basic challenge", tc.method, tc.path, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
	if w := do("GET", "/api/v1/status", "alice", "wrong"); w.Code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", w.Code)
	}
	if w := do("GET", "/api/v1/status", "alice", "alice-pw"); w.Code != http.StatusOK {
		t.Errorf("alice: %d %s, want 200", w.Code, w.Body)
	}
}

// A browser's fetch gets its 401 without the Basic challenge, so that the
// page's form asks for the login, not the browser's prompt; a navigation
// keeps it.
func TestPageFetchNoChallenge(t *testing.T) {
	eng, _ := openEngine(t)
	h := New(eng, Options{Version: "v1", Started: time.Now(), Logger: quiet, Login: LoginBasic,
		Passwords: fixedPasswords{"alice": "alice-pw"}})
	for _, tc := range []struct {
		dest      string
		challenge bool
	}{{"empty", false}, {"document", true}, {"", true}} {
		req := httptest.NewRequest("GET", "/api/v1/status", nil)
		if tc.dest != "" {
			req.Header.Set("Sec-Fetch-Dest", tc.dest)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if got := w.Header().Get("WWW-Authenticate") != ""; w.Code != http.StatusUnauthorized || got != tc.challenge ||
			!strings.Contains(w.Body.String(), "log in") {
			t.Errorf("Sec-Fetch-Dest %q: %d, challenge %v %s; want 401, challenge %v", tc.dest, w.Code, got, w.Body, tc.challenge)
		}
	}
}
