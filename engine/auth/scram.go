package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"unicode/utf8"
)

// Mechanism is a SCRAM mechanism, numbered as Kafka's SCRAM credential APIs
// number them.
type Mechanism int8

// The SCRAM mechanisms korvet supports (RFC 5802, RFC 7677).
const (
	ScramSHA256 Mechanism = 1
	ScramSHA512 Mechanism = 2
)

// Mechanisms lists the supported SCRAM mechanisms.
var Mechanisms = []Mechanism{ScramSHA256, ScramSHA512}

// Iteration bounds for stored credentials: Kafka's, so that credentials
// move between korvet and Kafka tooling unchanged.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 8192
)

// ErrAuthFailed is returned for any failed authentication. The wrapped
// detail is for the log; clients are told only that authentication failed.
var ErrAuthFailed = errors.New("authentication failed")

// ErrInvalidCredential is returned for a credential korvet will not store.
var ErrInvalidCredential = errors.New("invalid credential")

func (m Mechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM(%d)", int8(m))
}

// ParseMechanism parses "SCRAM-SHA-256" or "SCRAM-SHA-512".
func ParseMechanism(name string) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if strings.EqualFold(name, m.String()) {
			return m, true
		}
	}
	return 0, false
}

// Valid reports whether m is a supported mechanism.
func (m Mechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

func (m Mechanism) hash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

func (m Mechanism) size() int {
	if m == ScramSHA512 {
		return sha512.Size
	}
	return sha256.Size
}

// Credential is what korvet keeps of a password: never the password, only
// the salt, the iteration count and the two keys RFC 5802 derives from the
// salted password.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// NewCredential salts and hashes password for m.
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	if password == "" {
		return Credential{}, fmt.Errorf("%w: empty password", ErrInvalidCredential)
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	salted, err := saltPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSalted(m, salt, salted, iterations)
}

// CredentialFromSalted derives a credential from a salted password, which
// is what AlterUserScramCredentials carries: the client salts, so the
// password never reaches the broker.
//
// Like Kafka (ScramControlManager checks only the name, mechanism and
// iterations; ScramFormatter keys HMAC with the bytes as given), a salted
// password of any length is accepted: HMAC takes keys of any length, so
// the stored keys are well defined and a client proving knowledge of
// those same bytes logs in. A client salting a password gets hash-size
// bytes, so only such a client can use an odd-sized one. Refused: an
// empty salted password (Kafka fails it too, as an unknown server error,
// since Java refuses an empty HMAC key) and an empty salt (RFC 5802
// requires one; Kafka does not check).
func CredentialFromSalted(m Mechanism, salt, salted []byte, iterations int) (Credential, error) {
	switch {
	case !m.Valid():
		return Credential{}, fmt.Errorf("%w: unknown mechanism %d", ErrInvalidCredential, m)
	case iterations < MinIterations || iterations > MaxIterations:
		return Credential{}, fmt.Errorf("%w: %d iterations (use %d to %d)", ErrInvalidCredential, iterations, MinIterations, MaxIterations)
	case len(salt) == 0:
		return Credential{}, fmt.Errorf("%w: empty salt", ErrInvalidCredential)
	case len(salted) == 0:
		return Credential{}, fmt.Errorf("%w: empty salted password", ErrInvalidCredential)
	}
	clientKey := mac(m, salted, []byte("Client Key"))
	return Credential{
		Salt:       bytes.Clone(salt),
		Iterations: iterations,
		StoredKey:  sum(m, clientKey),
		ServerKey:  mac(m, salted, []byte("Server Key")),
	}, nil
}

// checkPassword reports whether password matches c, for SASL PLAIN.
func (c Credential) checkPassword(m Mechanism, password string) bool {
	salted, err := saltPassword(m, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(sum(m, mac(m, salted, []byte("Client Key"))), c.StoredKey) == 1
}

func saltPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	if iterations < 1 || iterations > MaxIterations {
		return nil, fmt.Errorf("%w: %d iterations", ErrInvalidCredential, iterations)
	}
	k, err := pbkdf2.Key(m.hash(), password, salt, iterations, m.size())
	if err != nil {
		return nil, fmt.Errorf("salt password: %w", err)
	}
	return k, nil
}

func mac(m Mechanism, key, msg []byte) []byte {
	h := hmac.New(m.hash(), key)
	h.Write(msg)
	return h.Sum(nil)
}

func sum(m Mechanism, b []byte) []byte {
	h := m.hash()()
	h.Write(b)
	return h.Sum(nil)
}

// Scram is the server side of one SCRAM exchange (RFC 5802): client-first,
// server-first, client-final, server-final. Channel binding is not
// offered. Not safe for concurrent use.
type Scram struct {
	store *Store
	mech  Mechanism
	step  int

	user  string
	cred  Credential
	known bool // cred is the user's; otherwise a decoy, and the proof fails

	gs2Header       string
	clientFirstBare string
	serverFirst     string
	cnonce          string // the client's nonce
	nonce           string // client nonce + server nonce

	// serverNonce makes the server's nonce; tests fix it.
	serverNonce func() string
}

// NewScram starts a SCRAM exchange for m.
func (s *Store) NewScram(m Mechanism) *Scram {
	return &Scram{store: s, mech: m, serverNonce: randomNonce}
}

// User is the authenticated user once Step has returned done.
func (sc *Scram) User() string { return sc.user }

// Step takes the client's next message and returns the server's answer.
// done is true with the server-final message; an error ends the exchange
// (ErrAuthFailed for bad input or credentials, else a storage error).
func (sc *Scram) Step(ctx context.Context, msg []byte) (out []byte, done bool, err error) {
	sc.step++
	switch sc.step {
	case 1:
		out, err = sc.clientFirst(ctx, string(msg))
		return out, false, err
	case 2:
		out, err = sc.clientFinal(string(msg))
		return out, err == nil, err
	}
	return nil, false, fmt.Errorf("%w: SCRAM exchange already finished", ErrAuthFailed)
}

func (sc *Scram) clientFirst(ctx context.Context, msg string) ([]byte, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: malformed client-first message", ErrAuthFailed)
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, fmt.Errorf("%w: channel binding is not supported", ErrAuthFailed)
	default:
		return nil, fmt.Errorf("%w: bad gs2 flag %q", ErrAuthFailed, flag)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: malformed client-first message", ErrAuthFailed)
	}
	sc.gs2Header = flag + "," + authzid + ","
	sc.clientFirstBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		// "m=" (mandatory extensions) also lands here: RFC 5802 says fail.
		return nil, fmt.Errorf("%w: malformed client-first message", ErrAuthFailed)
	}
	user, err := decodeSaslName(attrs[0][2:])
	if err != nil {
		return nil, err
	}
	for _, ext := range attrs[2:] {
		if !strings.Contains(ext, "=") {
			return nil, fmt.Errorf("%w: malformed extension %q", ErrAuthFailed, ext)
		}
		if strings.HasPrefix(ext, "tokenauth=") {
			return nil, fmt.Errorf("%w: delegation tokens are not supported", ErrAuthFailed)
		}
	}
	if authzid != "" {
		if !strings.HasPrefix(authzid, "a=") {
			return nil, fmt.Errorf("%w: bad authzid %q", ErrAuthFailed, authzid)
		}
		z, err := decodeSaslName(authzid[2:])
		if err != nil {
			return nil, err
		}
		if z != user {
			return nil, fmt.Errorf("%w: authorization id %q differs from user %q", ErrAuthFailed, z, user)
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || !printable(cnonce) {
		return nil, fmt.Errorf("%w: bad client nonce", ErrAuthFailed)
	}
	sc.user = user
	cred, known, err := sc.store.Credential(ctx, sc.mech, user)
	if err != nil {
		return nil, err
	}
	if !known {
		// Answer as for a real user, so that a client cannot tell which
		// users exist; the proof will not verify.
		cred = sc.store.decoy(sc.mech, user)
	}
	sc.cred, sc.known = cred, known
	sc.cnonce = cnonce
	sc.nonce = cnonce + sc.serverNonce()
	sc.serverFirst = "r=" + sc.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + fmt.Sprintf(",i=%d", cred.Iterations)
	return []byte(sc.serverFirst), nil
}

func (sc *Scram) clientFinal(msg string) ([]byte, error) {
	withoutProof, proof64, ok := cutLast(msg, ",p=")
	if !ok {
		return nil, fmt.Errorf("%w: client-final message has no proof", ErrAuthFailed)
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: malformed client-final message", ErrAuthFailed)
	}
	cbind, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cbind) != sc.gs2Header {
		return nil, fmt.Errorf("%w: channel binding data does not match the gs2 header", ErrAuthFailed)
	}
	if !sc.nonceOK(attrs[1][2:]) {
		return nil, fmt.Errorf("%w: nonce mismatch", ErrAuthFailed)
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != sc.mech.size() {
		return nil, fmt.Errorf("%w: malformed client proof", ErrAuthFailed)
	}
	// The client-final message as sent, whichever nonce form it has: the
	// proof is over what the client signed.
	authMessage := []byte(sc.clientFirstBare + "," + sc.serverFirst + "," + withoutProof)
	sig := mac(sc.mech, sc.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	if subtle.ConstantTimeCompare(sum(sc.mech, clientKey), sc.cred.StoredKey) != 1 || !sc.known {
		return nil, fmt.Errorf("%w: invalid credentials for user %q", ErrAuthFailed, sc.user)
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac(sc.mech, sc.cred.ServerKey, authMessage))), nil
}

// nonceOK checks the nonce of the client-final message. RFC 5802 wants
// the combined nonce (client nonce + server nonce) back, exactly.
// librdkafka before 2.6.1 (Debian 12's 2.0.2, under kcat and
// confluent-kafka) sends its client nonce in front of the combined nonce,
// client nonce twice. That one form is accepted too: it still carries the
// whole server nonce, and the proof covers the message as sent. Kafka
// 3.8.1 to 3.9 accepted any prefix (an "ends with" check); Kafka 4 and
// korvet accept nothing else (CVE-2024-56128).
func (sc *Scram) nonceOK(r string) bool {
	return r == sc.nonce || r == sc.cnonce+sc.nonce
}

// decodeSaslName undoes RFC 5802's escaping of ',' and '=' in names.
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		if s == "" || !utf8.ValidString(s) {
			return "", fmt.Errorf("%w: bad user name", ErrAuthFailed)
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in user name", ErrAuthFailed)
		}
		i += 2
	}
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("%w: bad user name", ErrAuthFailed)
	}
	return b.String(), nil
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// printable is RFC 5802's nonce alphabet: printable ASCII except ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

func randomNonce() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
