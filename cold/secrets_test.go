package cold

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSecretsNotInErrors: the S3 secret key, the REST catalog token and
// passwords in the endpoint and catalog URLs appear in no error, and the
// table config handed to readers names the endpoint without user info.
func TestSecretsNotInErrors(t *testing.T) {
	const pw, token, secret = "url-password-7f3a", "catalog-token-91bc", "s3-secret-c0de"
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, s := range []string{pw, token, secret} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q holds a secret", what, err)
			}
		}
	}
	// Bad endpoints and warehouses.
	_, err := newS3Objects(Config{Endpoint: "ftp://ak:" + pw + "@127.0.0.1:9000", SecretKey: secret}, "b", new(counters))
	check("ftp endpoint", err)
	_, err = newS3Objects(Config{Endpoint: "http://ak:" + pw + "@127.0.0.1:bad port", SecretKey: secret}, "b", new(counters))
	check("unparsable endpoint", err)
	_, err = Open(ctxT(t), Config{Warehouse: "s3://ak:" + pw + "@/wh", SecretKey: secret, CacheDir: t.TempDir()}, testLogger(t))
	check("warehouse without bucket", err)
	_, err = Open(ctxT(t), Config{Warehouse: "gs://ak:" + pw + "@b/wh", CacheDir: t.TempDir()}, testLogger(t))
	check("gs warehouse", err)
	_, err = newRESTCatalog("ftp://cat:"+pw+"@127.0.0.1/", token, "file:///wh", nil)
	check("ftp catalog", err)

	// A catalog that nobody serves.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	c, err := newRESTCatalog("http://cat:"+pw+"@"+dead+"/api", token, "file:///wh", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.configure(ctxT(t))
	check("unreachable catalog", err)
	if !strings.Contains(err.Error(), "cat:***@"+dead) {
		t.Errorf("unreachable catalog: error %q does not name it redacted", err)
	}

	// A catalog that echoes the request's Authorization header back.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		restError(w, http.StatusForbidden, "ForbiddenException", "refused "+r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	c, err = newRESTCatalog(srv.URL, token, "file:///wh", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.configure(ctxT(t))
	check("echoing catalog", err)
	if !strings.Contains(err.Error(), "refused Bearer ***") {
		t.Errorf("echoing catalog: error %q", err)
	}

	s := &Store{cfg: Config{Endpoint: "http://ak:" + pw + "@127.0.0.1:9000"}, root: "s3://b/wh"}
	if ep := s.clientConfig()["s3.endpoint"]; ep != "http://127.0.0.1:9000" {
		t.Errorf("s3.endpoint for readers = %q, want http://127.0.0.1:9000", ep)
	}
}
