package kafkawire_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/korvet/korvet/kafkawire"
)

// TestScramOddSizedSaltedPassword: AlterUserScramCredentials takes a
// salted password whose length is not the hash size, as Kafka does (its
// ScramControlManager checks only name, mechanism and iterations), and
// the stored credential works: a kgo client proving knowledge of those
// same bytes logs in; one with other bytes does not.
func TestScramOddSizedSaltedPassword(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, super: []string{"User:root"},
		tls: true, tlsSASL: []string{kafkawire.MechScramSHA256, kafkawire.MechScramSHA512}})
	b.addUser("root", "pw-root-1234")
	root := b.client(b.plainAddr, scram256("root", "pw-root-1234"))
	ctx := ctxT(t, 30*time.Second)

	// segmentio/kafka-go's own test credential: 18 bytes for SHA-512; and
	// 40 bytes for SHA-256.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name   string
		mech   int8
		salted string
	}{
		{"odd512", 2, "my-salted-password"},
		{"odd256", 1, strings.Repeat("x", 40)},
	} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mech, 15000, []byte("my-salt"), []byte(u.salted)
		req.Upsertions = append(req.Upsertions, up)
	}
	// Still refused: an empty salted password.
	empty := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	empty.Name, empty.Mechanism, empty.Iterations, empty.Salt, empty.SaltedPassword = "empty", 1, 4096, []byte("s"), []byte{}
	req.Upsertions = append(req.Upsertions, empty)
	resp, err := req.RequestWith(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, r := range resp.Results {
		codes[r.User] = r.ErrorCode
		if r.ErrorCode != 0 && r.User != "empty" {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Errorf("upsert %s: %v %s", r.User, kerr.ErrorForCode(r.ErrorCode), msg)
		}
	}
	if len(codes) != 3 || codes["empty"] != kerr.UnacceptableCredential.Code {
		t.Fatalf("results %+v, want odd512 and odd256 accepted, empty UNACCEPTABLE_CREDENTIAL", resp.Results)
	}

	desc, err := kadm.NewClient(root).DescribeUserSCRAMs(ctx, "odd512", "odd256")
	if err != nil {
		t.Fatal(err)
	}
	if ci := desc["odd512"].CredInfos; len(ci) != 1 || ci[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 15000}) {
		t.Errorf("odd512 described as %+v", desc["odd512"])
	}

	tlsCfg := kgo.DialTLSConfig(b.pki.clientTLS(false))
	for _, tc := range []struct {
		user   string
		sha512 bool
		salted string
		ok     bool
	}{
		{"odd512", true, "my-salted-password", true},
		{"odd256", false, strings.Repeat("x", 40), true},
		{"odd512", true, "my-salted-passworD", false},
		{"odd256", false, strings.Repeat("x", 32), false},
	} {
		mech := saltedScram{user: tc.user, salted: []byte(tc.salted), sha512: tc.sha512}
		cl := b.client(b.tlsAddr, tlsCfg, kgo.SASL(mech), kgo.RequestRetries(0))
		err := cl.Ping(ctx)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s with the stored %d salted bytes: %v", tc.user, len(tc.salted), err)
		case !tc.ok && !errors.Is(err, kerr.SaslAuthenticationFailed):
			t.Errorf("%s with other salted bytes: %v, want SASL_AUTHENTICATION_FAILED", tc.user, err)
		}
	}
}

// saltedScram is a SCRAM client (RFC 5802) that holds the salted password
// itself rather than a password, as an admin that set a credential with
// AlterUserScramCredentials does.
type saltedScram struct {
	user   string
	salted []byte
	sha512 bool
}

func (m saltedScram) Name() string {
	if m.sha512 {
		return "SCRAM-SHA-512"
	}
	return "SCRAM-SHA-256"
}

func (m saltedScram) hash() func() hash.Hash {
	if m.sha512 {
		return sha512.New
	}
	return sha256.New
}

func (m saltedScram) mac(key []byte, msg string) []byte {
	h := hmac.New(m.hash(), key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

func (m saltedScram) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	s := &saltedSession{m: m, cnonce: base64.RawURLEncoding.EncodeToString(nonce)}
	s.clientFirstBare = "n=" + m.user + ",r=" + s.cnonce
	return s, []byte("n,," + s.clientFirstBare), nil
}

type saltedSession struct {
	m               saltedScram
	cnonce          string
	clientFirstBare string
	authMessage     string
	step            int
}

func (s *saltedSession) Challenge(in []byte) (bool, []byte, error) {
	s.step++
	m := s.m
	switch s.step {
	case 1:
		serverFirst := string(in)
		var nonce string
		for _, attr := range strings.Split(serverFirst, ",") {
			if v, ok := strings.CutPrefix(attr, "r="); ok {
				nonce = v
			}
		}
		if !strings.HasPrefix(nonce, s.cnonce) || len(nonce) == len(s.cnonce) {
			return false, nil, fmt.Errorf("server nonce %q does not extend ours", nonce)
		}
		withoutProof := "c=biws,r=" + nonce
		s.authMessage = s.clientFirstBare + "," + serverFirst + "," + withoutProof
		clientKey := m.mac(m.salted, "Client Key")
		h := m.hash()()
		h.Write(clientKey)
		sig := m.mac(h.Sum(nil), s.authMessage)
		proof := make([]byte, len(clientKey))
		for i := range proof {
			proof[i] = clientKey[i] ^ sig[i]
		}
		return false, []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
	case 2:
		want := "v=" + base64.StdEncoding.EncodeToString(m.mac(m.mac(m.salted, "Server Key"), s.authMessage))
		if !bytes.Equal(in, []byte(want)) {
			return false, nil, fmt.Errorf("server signature %q does not verify", in)
		}
		return true, nil, nil
	}
	return false, nil, errors.New("SCRAM exchange already done")
}
