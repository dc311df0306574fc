package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadConfig: any file either loads or gives an error naming the file;
// never a panic.
func FuzzLoadConfig(f *testing.F) {
	if b, err := os.ReadFile("korvet.toml"); err == nil {
		f.Add(string(b))
	}
	f.Add("[kafka]\nlisten = \"127.0.0.1:9092\"\n[topic_defaults]\nretention.ms = 5\n")
	f.Add("kafka = { listen = \"x\", bogus = 1 }\n")
	f.Add("[redis]\ntimeout = \"-1s\"\n")
	f.Add("[[kafka]]\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(dir, "k.toml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(path)
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
