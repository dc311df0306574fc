package kafkawire_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/korvet/korvet/engine"
)

// needTool returns the path of an external client, skipping the test when
// it is missing outside CI; in CI (where scripts/test.sh installs it) a
// missing tool is a failure.
func needTool(t *testing.T, name string, probe ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && len(probe) > 0 {
		err = exec.Command(path, probe...).Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed (scripts/test.sh installs it): %v", name, err)
		}
		t.Skipf("%s not available: %v", name, err)
	}
	return path
}

func TestKafkaPythonClient(t *testing.T) {
	py := needTool(t, "/usr/bin/python3", "-c", "import kafka")
	b := startBroker(t, engine.Options{AutoCreateTopics: true})
	out, err := exec.Command(py, "testdata/kafka_python_smoke.py", b.addr, "pytopic", "200").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok 200") {
		t.Fatalf("kafka-python: %v\n%s", err, out)
	}
}
