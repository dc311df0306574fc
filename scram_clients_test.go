package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// haveClient tells whether the external client that probe runs is there.
// Without it a test skips, except in CI, where scripts/test.sh installs it
// and its absence is a failure.
func haveClient(t *testing.T, what, pkg string, probe ...string) bool {
	t.Helper()
	if err := exec.Command(probe[0], probe[1:]...).Run(); err != nil {
		if inCI() {
			t.Fatalf("%s is missing in CI (scripts/test.sh installs %s): %v", what, pkg, err)
		}
		t.Logf("%s is not installed (apt-get install %s; scripts/test.sh does): %v", what, pkg, err)
		return false
	}
	return true
}

// startSASLKorvet starts the binary with SCRAM required on its Kafka
// listener and users made with `korvet user add`, name -> password.
func startSASLKorvet(t *testing.T, users map[string]string) *proc {
	t.Helper()
	r := testbed.StartRedis(t)
	p := newProc(t, r)
	p.cfg = writeConfig(t, fmt.Sprintf(`data_dir = %q
log_level = "debug"
`+p.registryKey()+`
[kafka]
listen = %q
auth = "sasl"
sasl_mechanisms = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
[http]
listen = %q
[redis]
url = %q
`, t.TempDir(), p.kafkaAddr, strings.TrimPrefix(p.httpBase, "http://"), r.URL))
	for name, pw := range users {
		cmd := exec.Command(p.bin, "user", "add", "--config", p.cfg, name)
		cmd.Stdin = strings.NewReader(pw + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("korvet user add %s: %v\n%s", name, err, out)
		}
	}
	p.launch(t)
	return p
}

// payload is random bytes with the ones a text path would mangle.
func payload(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return append(b, 0, '\n', '\r', 0xff, ',', '=')
}

// run runs a client with a deadline and returns its stdout and stderr.
func runClient(t *testing.T, timeout time.Duration, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish within %v\nstderr:\n%s", name, args, timeout, errOut.Bytes())
	}
	return out.Bytes(), errOut.Bytes(), err
}

// librdkafkaClients reports which of Debian's librdkafka clients are
// installed, kcat and python3-confluent-kafka; it skips the test when
// neither is (and haveClient fails it in CI).
func librdkafkaClients(t *testing.T) (kcat, python bool) {
	t.Helper()
	kcat = haveClient(t, "kcat", "kcat", "kcat", "-V")
	python = haveClient(t, "python3-confluent-kafka", "python3-confluent-kafka", "/usr/bin/python3", "-c", "import confluent_kafka")
	if !kcat && !python {
		t.Skip("neither kcat nor python3-confluent-kafka is installed")
	}
	return kcat, python
}

// TestLibrdkafkaSCRAM: Debian's librdkafka (2.0.2 in Debian 12), through
// kcat and python3-confluent-kafka, logs in to korvet with SCRAM-SHA-256
// and -512, produces and consumes byte-exact, and is refused with an
// authentication error for a wrong password. librdkafka before 2.6.1
// repeats its client nonce in the client-final message; korvet must take
// that form (and the proof over it).
func TestLibrdkafkaSCRAM(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kcat and confluent-kafka against the binary")
	}
	haveKcat, havePython := librdkafkaClients(t)
	const user, password = "ada", "pw-ada-Lovelace-1815"
	p := startSASLKorvet(t, map[string]string{user: password})
	logins, refusals := 0, 0

	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run("kcat/"+mech, func(t *testing.T) {
			if !haveKcat {
				t.Skip("kcat is not installed")
			}
			sasl := func(pw string) []string {
				return []string{"-b", p.kafkaAddr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=" + mech,
					"-X", "sasl.username=" + user, "-X", "sasl.password=" + pw}
			}
			topic := "kcat-" + strings.ToLower(mech)
			value := payload(t, 3000)
			file := filepath.Join(t.TempDir(), "value.bin")
			if err := os.WriteFile(file, value, 0o644); err != nil {
				t.Fatal(err)
			}
			// A file argument is produced as one message, as is.
			if _, errOut, err := runClient(t, time.Minute, "kcat", append(sasl(password), "-P", "-t", topic, "-k", "key-"+mech, file)...); err != nil {
				t.Fatalf("kcat produce: %v\n%s", err, errOut)
			}
			out, errOut, err := runClient(t, time.Minute, "kcat", append(sasl(password), "-C", "-t", topic, "-o", "beginning", "-e", "-c", "1", "-f", "%k|%s")...)
			if err != nil {
				t.Fatalf("kcat consume: %v\n%s", err, errOut)
			}
			if want := append([]byte("key-"+mech+"|"), value...); !bytes.Equal(out, want) {
				t.Errorf("kcat consumed %d bytes %q..., want %d bytes %q...", len(out), head(out), len(want), head(want))
			}
			logins += 2

			_, errOut, err = runClient(t, time.Minute, "kcat", append(sasl(password+"-wrong"), "-L", "-m", "5")...)
			if err == nil || !bytes.Contains(errOut, []byte("Authentication failed")) {
				t.Errorf("kcat with a wrong password: %v, want an authentication failure; stderr:\n%s", err, errOut)
			}
			refusals++
		})
		t.Run("confluent-kafka/"+mech, func(t *testing.T) {
			if !havePython {
				t.Skip("python3-confluent-kafka is not installed")
			}
			topic := "confluent-" + strings.ToLower(mech)
			key, value := payload(t, 16), payload(t, 5000)
			out, errOut, err := runClient(t, 2*time.Minute, "/usr/bin/python3", "testdata/confluent_scram.py", "roundtrip",
				p.kafkaAddr, mech, user, password, topic, hex.EncodeToString(key), hex.EncodeToString(value))
			if err != nil {
				t.Fatalf("confluent-kafka round trip: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			want := fmt.Sprintf("consumed %x %x\n", key, value)
			if string(out) != want {
				t.Errorf("confluent-kafka printed %q..., want %q...", head(out), head([]byte(want)))
			}
			logins += 2

			out, errOut, err = runClient(t, time.Minute, "/usr/bin/python3", "testdata/confluent_scram.py", "badauth",
				p.kafkaAddr, mech, user, password+"-wrong")
			if err != nil || !strings.HasPrefix(string(out), "auth-failed ") {
				t.Errorf("confluent-kafka with a wrong password: %v, stdout %q, want an authentication error; stderr:\n%s", err, out, errOut)
			}
			refusals++
		})
	}

	// The logins were SCRAM logins of ada, and every refusal was for the
	// password, never for the nonce.
	logs := p.waitLogs(30*time.Second, func(logs string) bool {
		return strings.Count(logs, "SASL authenticated") >= logins && strings.Count(logs, "invalid credentials for user") >= refusals
	})
	if strings.Contains(logs, "nonce mismatch") {
		t.Error("korvet refused a client-final nonce")
	}
	if n := strings.Count(logs, "SASL authenticated"); n < logins {
		t.Errorf("korvet logged %d SASL logins, want at least %d", n, logins)
	}
	if n := strings.Count(logs, "invalid credentials for user"); n < refusals {
		t.Errorf("korvet logged %d refusals for invalid credentials, want at least %d", n, refusals)
	}
}

// head is the start of b, for messages.
func head(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
