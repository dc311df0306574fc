package auth

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// scramClient is the client side of one exchange, written out here so that
// a test can send any nonce in the client-final message and still sign it
// properly: a nonce check, not a bad proof, must be what refuses it.
type scramClient struct {
	m               Mechanism
	password        string
	cnonce          string
	clientFirstBare string
	serverFirst     string
	salted          []byte
}

func (c *scramClient) first(user string) []byte {
	c.clientFirstBare = "n=" + user + ",r=" + c.cnonce
	return []byte("n,," + c.clientFirstBare)
}

// final answers serverFirst with the nonce r; it returns the message and
// the server signature the client expects back.
func (c *scramClient) final(t *testing.T, serverFirst []byte, r string) (msg []byte, serverSig string) {
	t.Helper()
	c.serverFirst = string(serverFirst)
	attrs := strings.Split(c.serverFirst, ",")
	if len(attrs) != 3 || !strings.HasPrefix(attrs[0], "r=") || !strings.HasPrefix(attrs[1], "s=") || !strings.HasPrefix(attrs[2], "i=") {
		t.Fatalf("server-first %q", serverFirst)
	}
	salt, err := base64.StdEncoding.DecodeString(attrs[1][2:])
	if err != nil {
		t.Fatal(err)
	}
	iters, err := strconv.Atoi(attrs[2][2:])
	if err != nil {
		t.Fatal(err)
	}
	if c.salted, err = saltPassword(c.m, c.password, salt, iters); err != nil {
		t.Fatal(err)
	}
	withoutProof := "c=biws,r=" + r
	authMessage := []byte(c.clientFirstBare + "," + c.serverFirst + "," + withoutProof)
	clientKey := mac(c.m, c.salted, []byte("Client Key"))
	sig := mac(c.m, sum(c.m, clientKey), authMessage)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	serverSig = "v=" + base64.StdEncoding.EncodeToString(mac(c.m, mac(c.m, c.salted, []byte("Server Key")), authMessage))
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), serverSig
}

// TestScramClientFinalNonce: the combined nonce and librdkafka's form
// (client nonce + combined nonce) log in, with a server signature over
// the message as sent; every near miss fails on the nonce.
func TestScramClientFinalNonce(t *testing.T) {
	s, _ := openStore(t)
	const cnonce = "fyko+d2lbbFgONRv9qkxdawL"
	const snonce = "3rfcNHYJY1ZVvWVs7j"
	nonce := cnonce + snonce
	for _, m := range Mechanisms {
		cred, err := NewCredential(m, "pencil", MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetCredential(ctx(t), m, "user", cred); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		r    string
		ok   bool
	}{
		{"RFC 5802", nonce, true},
		{"librdkafka before 2.6.1", cnonce + nonce, true},
		{"server nonce only", snonce, false},
		{"client nonce only", cnonce, false},
		{"client nonce twice, no server nonce", cnonce + cnonce, false},
		{"truncated server nonce", nonce[:len(nonce)-1], false},
		{"librdkafka form, truncated server nonce", cnonce + nonce[:len(nonce)-1], false},
		{"client nonce three times", cnonce + cnonce + nonce, false},
		{"other prefix", "x" + nonce, false},
		{"other prefix of client-nonce length", strings.Repeat("A", len(cnonce)) + nonce, false},
		{"half the client nonce as prefix", cnonce[:len(cnonce)/2] + nonce, false},
		{"suffix added", nonce + "x", false},
		{"librdkafka form, suffix added", cnonce + nonce + "x", false},
		{"server nonce first", snonce + cnonce, false},
		{"combined nonce twice", nonce + nonce, false},
		{"empty", "", false},
	} {
		for _, m := range Mechanisms {
			t.Run(tc.name+"/"+m.String(), func(t *testing.T) {
				sc := s.NewScram(m)
				sc.serverNonce = func() string { return snonce }
				cl := &scramClient{m: m, password: "pencil", cnonce: cnonce}
				first, done, err := sc.Step(ctx(t), cl.first("user"))
				if err != nil || done {
					t.Fatalf("client-first: %v, done %v", err, done)
				}
				msg, wantSig := cl.final(t, first, tc.r)
				out, done, err := sc.Step(ctx(t), msg)
				if !tc.ok {
					if err == nil || !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "nonce mismatch") || done || out != nil {
						t.Fatalf("nonce %q: out %q, done %v, err %v; want a nonce mismatch", tc.r, out, done, err)
					}
					return
				}
				if err != nil || !done {
					t.Fatalf("nonce %q: done %v, err %v", tc.r, done, err)
				}
				if !hmac.Equal(out, []byte(wantSig)) {
					t.Errorf("server-final %q, want %q (signature over the message as sent)", out, wantSig)
				}
				if sc.User() != "user" {
					t.Errorf("user %q", sc.User())
				}
			})
		}
	}

	// A wrong password in librdkafka's form still fails, on the proof.
	sc := s.NewScram(ScramSHA256)
	cl := &scramClient{m: ScramSHA256, password: "wrong", cnonce: cnonce}
	first, _, err := sc.Step(ctx(t), cl.first("user"))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := cl.final(t, first, cnonce+string(first[2:strings.IndexByte(string(first), ',')]))
	if _, _, err := sc.Step(ctx(t), msg); !errors.Is(err, ErrAuthFailed) || strings.Contains(err.Error(), "nonce") {
		t.Errorf("wrong password, librdkafka form: %v, want invalid credentials", err)
	}
	// So does an unknown user, whose decoy credential cannot verify.
	sc = s.NewScram(ScramSHA256)
	cl = &scramClient{m: ScramSHA256, password: "pencil", cnonce: cnonce}
	if first, _, err = sc.Step(ctx(t), cl.first("nobody")); err != nil {
		t.Fatal(err)
	}
	msg, _ = cl.final(t, first, cnonce+string(first[2:strings.IndexByte(string(first), ',')]))
	if _, _, err := sc.Step(ctx(t), msg); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("unknown user, librdkafka form: %v", err)
	}
}
