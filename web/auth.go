package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/korvet/korvet/engine/auth"
)

// Who may do what over HTTP. Every request but /healthz and /readyz is
// logged in first (gate below): a request over the local admin socket is
// the administrator's; "Authorization: Bearer <admin_token>" is too;
// "Authorization: Basic" is checked against the same SCRAM users as the
// Kafka listeners (User:name); with Login "none" a request without
// credentials is User:ANONYMOUS. Handlers then ask Options.Policy, the
// Kafka listeners' own, so a principal sees the same topics and groups
// through either door.

// Login modes of Options.Login.
const (
	LoginNone  = "none"  // no credentials needed: User:ANONYMOUS
	LoginBasic = "basic" // HTTP Basic against the SCRAM users
)

// Passwords verifies a user's password; *auth.Store has it.
type Passwords interface {
	CheckPassword(ctx context.Context, user, password string) error
}

// credentialGenerations is what a Passwords may also have (*auth.Store
// does): a number that changes whenever a credential may have changed.
// Cached logins are trusted only while it stays the same; without it they
// are trusted for the cache's TTL.
type credentialGenerations interface {
	CredentialGeneration() uint64
}

// identity is who sent a request.
type identity struct {
	principal string // "User:name"
	super     bool   // may do everything
	host      string // remote IP, for host-scoped ACLs
}

type identityKey struct{}

func identityOf(r *http.Request) identity {
	id, _ := r.Context().Value(identityKey{}).(identity)
	return id
}

// allowed reports whether the request's principal may do op on the
// resource.
func (s *server) allowed(r *http.Request, op auth.Operation, rt auth.ResourceType, name string) bool {
	id := identityOf(r)
	if id.super || s.opts.Policy == nil {
		return true
	}
	return s.opts.Policy.Allowed(id.principal, id.host, op, rt, name)
}

func (s *server) mayTopic(r *http.Request, op auth.Operation, topic string) bool {
	return s.allowed(r, op, auth.ResTopic, topic)
}

// mayAdmin: state-changing endpoints need a super user (the admin socket
// and token count as one) or, with ACLs on, ALTER on the cluster. With ACLs
// off being logged in is not enough: that is the Kafka side's "everyone
// may do everything", which korvet does not extend to its admin actions.
func (s *server) mayAdmin(r *http.Request) bool {
	id := identityOf(r)
	if id.super {
		return true
	}
	p := s.opts.Policy
	return p != nil && p.ACLs && p.AllowedCluster(id.principal, id.host, auth.OpAlter)
}

// forbidden answers 403 for a resource the principal may not touch.
func forbidden(w http.ResponseWriter, r *http.Request, what string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, http.StatusForbidden, map[string]string{
		"error":  identityOf(r).principal + " is not authorized for " + what,
		"reason": "forbidden",
	})
}

// topicGuard wraps a handler of a {topic} route so that it runs only for
// principals that may do op on that topic.
func (s *server) topicGuard(op auth.Operation, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		topic := r.PathValue("topic")
		if !s.mayTopic(r, op, topic) {
			forbidden(w, r, op.String()+" on topic "+topic)
			return
		}
		h(w, r)
	}
}

// gate logs every request in and puts its identity in the context;
// /healthz and /readyz stay open for load balancers and systemd, and
// the page's files (pageShell) on the HTTP side.
func (s *server) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || s.openPage && pageShell(r) {
			next.ServeHTTP(w, r)
			return
		}
		if pageFetch(r) {
			w = noChallenge{w}
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		id := identity{host: host}
		switch {
		case isLocalAdmin(r.Context()):
			id.principal, id.super = "local admin socket", true
		default:
			var ok bool
			if id, ok = s.login(w, r, host); !ok {
				return
			}
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && crossSite(r) {
			s.fail(w, r, http.StatusForbidden, "cross-site request refused: send it from korvet's own page or a non-browser client")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// pageShell: the status page's own files (/ and /static/), embedded in
// the binary and holding no data, load before a login so that the page
// can show its log-in form; all it shows comes from /api/v1, behind the
// gate.
func pageShell(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/static/")
}

// login finds the request's principal; on failure it has answered.
func (s *server) login(w http.ResponseWriter, r *http.Request, host string) (identity, bool) {
	id := identity{host: host}
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") && s.adminHash != nil:
		got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
		if subtle.ConstantTimeCompare(got[:], s.adminHash[:]) != 1 {
			s.challenge(w, r, "wrong bearer token (the admin token is [http] admin_token)")
			return id, false
		}
		id.principal, id.super = "admin token", true
		return id, true
	case strings.EqualFold(scheme, "Bearer"):
		s.fail(w, r, http.StatusForbidden, "bearer tokens are disabled: set [http] admin_token in korvet.toml")
		return id, false
	case strings.EqualFold(scheme, "Basic") && s.opts.Passwords != nil:
		user, password, ok := r.BasicAuth()
		if !ok || !s.logins.check(r.Context(), s.opts.Passwords, user, password) {
			s.log.Info("HTTP login failed", "remote", r.RemoteAddr, "user", user)
			s.challenge(w, r, "wrong user name or password (users are the Kafka SASL users: korvet user add NAME)")
			return id, false
		}
		id.principal = "User:" + user
	case scheme != "":
		s.challenge(w, r, "unsupported Authorization scheme "+scheme+" (use Basic with a korvet user)")
		return id, false
	case s.opts.Login == LoginBasic:
		s.challenge(w, r, "log in with a korvet user (HTTP Basic; users are the Kafka SASL users)")
		return id, false
	default:
		// Anonymous: the only case a foreign page could ride on, through a
		// DNS name that rebinds to this host. Such a request carries that
		// name in Host; korvet's own names and IP literals are fine.
		if s.opts.RestrictHosts && !s.knownHost(r.Host) {
			s.fail(w, r, http.StatusMisdirectedRequest, "Host "+r.Host+" is not one of korvet's names: add it to [http] hosts, or use an IP address or localhost")
			return id, false
		}
		id.principal = auth.Anonymous
	}
	id.super = s.opts.Policy != nil && s.opts.Policy.Super(id.principal)
	return id, true
}

func (s *server) challenge(w http.ResponseWriter, r *http.Request, msg string) {
	if s.opts.Passwords != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="korvet", charset="UTF-8"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="korvet"`)
	}
	s.fail(w, r, http.StatusUnauthorized, msg)
}

// fail answers a request the gate refuses, in the shape of the API the
// server serves (the registry answers Confluent's error bodies).
func (s *server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	switch {
	case s.failBody != nil:
		s.failBody(w, code, msg)
	case strings.HasPrefix(r.URL.Path, "/api/v1/"):
		// The admin API's error shape: {"error":code,"message":...}.
		writeAPIError(w, &apiError{status: code, code: gateCode(code), msg: msg})
	default:
		writeError(w, code, msg)
	}
}

// knownHost: an IP literal or a localhost name cannot be rebound; other
// names must be listed in Options.Hosts.
func (s *server) knownHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return slices.ContainsFunc(s.opts.Hosts, func(h string) bool { return strings.EqualFold(h, host) })
}

// crossSite reports a browser request sent by another site's page (a form
// posting to korvet with the user's cached credentials). Non-browser
// clients send neither header.
func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site != "same-origin" && site != "none"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		o, ok := strings.CutPrefix(origin, "http://")
		if !ok {
			o, _ = strings.CutPrefix(origin, "https://")
		}
		return !strings.EqualFold(o, r.Host)
	}
	return false
}

// loginCache remembers verified Basic credentials briefly, so that a page
// refreshing every 2 s does not cost a PBKDF2 run per request. Entries are
// keyed by an HMAC of user and password under a per-process key: the
// cache holds no password, nor a fast hash an attacker could brute-force
// from a memory dump. Checks that miss are limited to a few at a time, so
// a flood of wrong passwords costs at most that many cores.
type loginCache struct {
	key  [32]byte
	ttl  time.Duration
	max  int
	sem  chan struct{}
	mu   sync.Mutex
	seen map[[32]byte]cachedLogin
}

// cachedLogin is a verified login: until when it is trusted, and the
// credential generation it was verified at.
type cachedLogin struct {
	expires time.Time
	gen     uint64
}

func newLoginCache() *loginCache {
	c := &loginCache{ttl: 30 * time.Second, max: 1024, sem: make(chan struct{}, 2), seen: map[[32]byte]cachedLogin{}}
	_, _ = rand.Read(c.key[:])
	return c
}

func (c *loginCache) check(ctx context.Context, pw Passwords, user, password string) bool {
	if user == "" || password == "" {
		return false
	}
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(password))
	var k [32]byte
	m.Sum(k[:0])
	now := time.Now()
	var gen uint64
	gens, _ := pw.(credentialGenerations)
	if gens != nil {
		gen = gens.CredentialGeneration()
	}
	c.mu.Lock()
	e, ok := c.seen[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) && e.gen == gen {
		return true
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	err := pw.CheckPassword(ctx, user, password)
	<-c.sem
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) >= c.max {
		for k, e := range c.seen {
			if now.After(e.expires) || e.gen != gen {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= c.max {
			clear(c.seen)
		}
	}
	// gen was read before the check: a change during it leaves an entry
	// that the next request does not trust.
	c.seen[k] = cachedLogin{expires: now.Add(c.ttl), gen: gen}
	return true
}

// gateCode is the admin API error code of a refusal by the gate.
func gateCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusMisdirectedRequest:
		return "unknown_host"
	}
	return "refused"
}
