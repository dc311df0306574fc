package web

import "net/http"

// noChallenge answers a browser's fetch (Sec-Fetch-Dest: empty) with its
// 401 but without the Basic challenge: the status page asks for a login in
// its own form, while a challenge makes the browser show its prompt (or a
// headless one wait for an answer) before the page sees the refusal.
// Navigations and non-browser clients keep the challenge.
type noChallenge struct{ http.ResponseWriter }

func (w noChallenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		w.Header().Del("WWW-Authenticate")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer's Flush.
func (w noChallenge) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func pageFetch(r *http.Request) bool { return r.Header.Get("Sec-Fetch-Dest") == "empty" }
