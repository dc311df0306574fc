package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// TestDebPackage builds the .deb with scripts/build-deb.sh and checks
// what is in it: metadata, files, the packaged config (which korvet must
// accept), the binary's version, and the units (systemd-analyze verify
// on copies pointing at the extracted binary). As root with CI or
// KORVET_TEST_DEB=1 set it also installs the package on this machine,
// runs the installed korvet, verifies the installed units, upgrades in
// place, removes and purges it, leaving the machine as it was.
func TestDebPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian package")
	}
	for _, tool := range []string{"dpkg-deb", "dpkg", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing: the .deb is built and checked on Debian", tool)
		}
	}
	const version = "0.1.0~test1"
	out := t.TempDir()
	build := exec.Command("bash", "scripts/build-deb.sh")
	build.Env = append(os.Environ(), "OUT_DIR="+out, "VERSION="+version)
	stdout, err := build.Output()
	if err != nil {
		t.Fatalf("build-deb.sh: %v\n%s", err, debStderr(err))
	}
	arch := strings.TrimSpace(debRun(t, "dpkg", "--print-architecture"))
	deb := filepath.Join(out, "korvet_"+version+"_"+arch+".deb")
	if got := strings.TrimSpace(string(stdout)); got != deb {
		t.Fatalf("build-deb.sh printed %q, want %q", got, deb)
	}

	info := debRun(t, "dpkg-deb", "-I", deb)
	for _, want := range []string{"Package: korvet", "Version: " + version, "Architecture: " + arch, "Recommends: redis-server",
		"conffiles", "postinst", "prerm", "postrm"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb -I lacks %q:\n%s", want, info)
		}
	}
	if got := debRun(t, "dpkg-deb", "-f", deb, "Depends"); strings.Contains(got, "redis-server") {
		t.Errorf("Depends %q: Redis may be on another host, so it is only recommended", got)
	}
	contents := debRun(t, "dpkg-deb", "-c", deb)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^-rwxr-xr-x root/root .* \./usr/bin/korvet$`),
		regexp.MustCompile(`(?m)^-rw-r----- root/root .* \./etc/korvet/korvet\.toml$`),
		regexp.MustCompile(`(?m)^-rw-r--r-- root/root .* \./lib/systemd/system/korvet\.service$`),
		regexp.MustCompile(`(?m)^-rw-r--r-- root/root .* \./lib/systemd/system/korvet-index-rebuild\.service$`),
		regexp.MustCompile(`(?m)^-rw-r--r-- root/root .* \./lib/systemd/system/korvet-index-rebuild\.timer$`),
		regexp.MustCompile(`(?m)^-rw-r--r-- root/root .* \./usr/share/doc/korvet/copyright$`),
		regexp.MustCompile(`(?m)^-rw-r--r-- root/root .* \./usr/share/korvet/grafana/korvet\.json$`),
	} {
		if !want.MatchString(contents) {
			t.Errorf("dpkg-deb -c has no line matching %s:\n%s", want, contents)
		}
	}
	if cf := debRun(t, "sh", "-c", "dpkg-deb --ctrl-tarfile "+deb+" | tar -xO ./conffiles"); strings.TrimSpace(cf) != "/etc/korvet/korvet.toml" {
		t.Errorf("conffiles = %q", cf)
	}

	x := t.TempDir()
	debRun(t, "dpkg-deb", "-x", deb, x)
	// The packaged config: data in /var/lib/korvet, the page on the LAN,
	// and korvet itself accepts it.
	cfg, err := loadConfig(filepath.Join(x, "etc/korvet/korvet.toml"))
	if err != nil {
		t.Fatalf("packaged korvet.toml: %v", err)
	}
	if cfg.DataDir != "/var/lib/korvet" || cfg.HTTP.Listen != "0.0.0.0:8080" || cfg.HTTP.AdminToken != "" ||
		cfg.HTTP.Auth != authBasic || cfg.AdminUser != "admin" || cfg.AdminPasswordFile != "/etc/korvet/admin.password" {
		t.Errorf("packaged config: data_dir %q, http.listen %q, admin_token %q, http.auth %q, admin_user %q, admin_password_file %q",
			cfg.DataDir, cfg.HTTP.Listen, cfg.HTTP.AdminToken, cfg.HTTP.Auth, cfg.AdminUser, cfg.AdminPasswordFile)
	}
	// Turned anonymous on the LAN address, korvet refuses it and names
	// the key that would allow it.
	packaged, err := os.ReadFile(filepath.Join(x, "etc/korvet/korvet.toml"))
	if err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open.toml")
	if err := os.WriteFile(open, []byte(strings.Replace(string(packaged), "\nauth = \"basic\"\n", "\nauth = \"none\"\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(open); err == nil || !strings.Contains(err.Error(), "allow_anonymous") || !strings.Contains(err.Error(), "http.auth") {
		t.Errorf("packaged config with http.auth none: %v; want a refusal naming allow_anonymous", err)
	}
	bin := filepath.Join(x, "usr/bin/korvet")
	if runtime.GOOS == "linux" && runtime.GOARCH == debGoarch(arch) {
		if got := debRun(t, bin, "version"); got != "korvet "+version+"\n" {
			t.Errorf("packaged korvet version = %q", got)
		}
	}
	if got, err := os.ReadFile(filepath.Join(x, "usr/share/korvet/grafana/korvet.json")); err != nil {
		t.Error(err)
	} else if want, _ := os.ReadFile("packaging/grafana/korvet.json"); !bytes.Equal(got, want) {
		t.Error("the packaged Grafana dashboard differs from packaging/grafana/korvet.json")
	}
	copyright, err := os.ReadFile(filepath.Join(x, "usr/share/doc/korvet/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Files: " + runtime.Version() + "/src/*", "Files: github.com/twmb/franz-go@v", "Files: github.com/prometheus/client_golang@v"} {
		if !strings.Contains(string(copyright), want) {
			t.Errorf("copyright lacks %q", want)
		}
	}

	analyze, haveAnalyze := exec.LookPath("systemd-analyze")
	units := []string{"korvet.service", "korvet-index-rebuild.service", "korvet-index-rebuild.timer"}
	if haveAnalyze != nil {
		t.Log("systemd-analyze is missing (apt-get install systemd): units not verified")
	} else {
		// Copies whose ExecStart is the extracted binary: verify checks
		// that the command exists.
		dir := t.TempDir()
		var paths []string
		for _, u := range units {
			b, err := os.ReadFile(filepath.Join(x, "lib/systemd/system", u))
			if err != nil {
				t.Fatal(err)
			}
			b = []byte(strings.ReplaceAll(string(b), "/usr/bin/korvet", bin))
			p := filepath.Join(dir, u)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		debVerify(t, analyze, paths)
	}

	installDeb(t, deb, version, analyze, units)
}

// installDeb installs, upgrades, removes and purges the package on this
// machine; it runs only when asked to, as root.
func installDeb(t *testing.T, deb, version, analyze string, units []string) {
	if os.Geteuid() != 0 || os.Getenv("CI") == "" && os.Getenv("KORVET_TEST_DEB") != "1" {
		t.Log("not installing the .deb: that runs as root with CI or KORVET_TEST_DEB=1 set")
		return
	}
	if st, _ := exec.Command("dpkg-query", "-W", "-f=${Status}", "korvet").Output(); strings.Contains(string(st), "installed") {
		t.Skipf("a korvet package is already installed here (%s); not touching it", st)
	}
	_, userErr := user.Lookup("korvet")
	hadUser := userErr == nil
	t.Cleanup(func() {
		// Whatever happened above, leave no package and no user we made.
		if out, err := exec.Command("dpkg", "-P", "korvet").CombinedOutput(); err != nil {
			t.Logf("dpkg -P korvet: %v\n%s", err, out)
		}
		if !hadUser {
			if _, err := user.Lookup("korvet"); err == nil {
				if out, err := exec.Command("userdel", "korvet").CombinedOutput(); err != nil {
					t.Errorf("userdel korvet: %v\n%s", err, out)
				}
			}
		}
		for _, p := range []string{"/etc/korvet", "/var/lib/korvet", "/usr/bin/korvet", "/lib/systemd/system/korvet.service"} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s is left after purge", p)
			}
		}
	})

	debRun(t, "dpkg", "-i", deb)
	if got := debRun(t, "korvet", "version"); got != "korvet "+version+"\n" {
		t.Errorf("installed korvet version = %q", got)
	}
	u, err := user.Lookup("korvet")
	if err != nil {
		t.Fatalf("postinst made no korvet user: %v", err)
	}
	g, err := user.LookupGroup("korvet")
	if err != nil {
		t.Fatalf("postinst made no korvet group: %v", err)
	}
	debCheckOwner(t, "/var/lib/korvet", u.Uid, g.Gid, 0o750)
	debCheckOwner(t, "/etc/korvet/korvet.toml", "0", g.Gid, 0o640)
	debCheckOwner(t, "/etc/korvet/admin.password", "0", g.Gid, 0o640)
	debLogin(t)
	if analyze != "" {
		var paths []string
		for _, unit := range units {
			paths = append(paths, "/lib/systemd/system/"+unit)
		}
		debVerify(t, analyze, paths)
		if out, err := exec.Command(analyze, "security", "--offline=true", "/lib/systemd/system/korvet.service").CombinedOutput(); err == nil {
			m := regexp.MustCompile(`Overall exposure level for korvet\.service: ([0-9.]+)`).FindSubmatch(out)
			if m == nil {
				t.Errorf("systemd-analyze security printed no exposure level:\n%s", out)
			} else if v, _ := strconv.ParseFloat(string(m[1]), 64); v > 3 {
				t.Errorf("korvet.service exposure %v, want at most 3 (hardening options missing?)", v)
			} else {
				t.Logf("systemd-analyze security: exposure %s", m[1])
			}
		}
	}

	// An upgrade in place keeps the admin's edits to the conffile.
	f, err := os.OpenFile("/etc/korvet/korvet.toml", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("# edited by the admin\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	debRun(t, "dpkg", "-i", "--force-confold", deb)
	if b, _ := os.ReadFile("/etc/korvet/korvet.toml"); !strings.Contains(string(b), "# edited by the admin") {
		t.Error("reinstalling replaced the edited conffile")
	}

	debRun(t, "dpkg", "-r", "korvet")
	if _, err := os.Stat("/usr/bin/korvet"); err == nil {
		t.Error("/usr/bin/korvet is left after dpkg -r")
	}
	if _, err := os.Stat("/etc/korvet/korvet.toml"); err != nil {
		t.Errorf("dpkg -r removed the conffile: %v", err)
	}
	debRun(t, "dpkg", "-P", "korvet")
	for _, p := range []string{"/etc/korvet", "/var/lib/korvet"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left after dpkg -P", p)
		}
	}
}

func debVerify(t *testing.T, analyze string, paths []string) {
	t.Helper()
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", strings.Join(paths, " "), err, out)
	}
}

func debCheckOwner(t *testing.T, path, uid, gid string, mode os.FileMode) {
	t.Helper()
	out := debRun(t, "stat", "-c", "%u %g %a", path)
	if want := uid + " " + gid + " " + strconv.FormatUint(uint64(mode), 8) + "\n"; out != want {
		t.Errorf("%s: owner, group, mode %q, want %q", path, strings.TrimSpace(out), strings.TrimSpace(want))
	}
}

// goarchOf maps a Debian architecture to Go's name.
func debGoarch(debArch string) string {
	switch debArch {
	case "i386":
		return "386"
	case "armhf":
		return "arm"
	case "ppc64el":
		return "ppc64le"
	}
	return debArch
}

func debRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, debStderr(err))
	}
	return string(out)
}

func debStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// debLogin runs the installed korvet with the installed config (its
// Redis, data_dir and ports moved to the test's) and checks the safe
// default from outside: the HTTP side listens on every address, refuses
// anonymous requests, and lets the admin from /etc/korvet/admin.password
// in. That is the README's two commands: dpkg -i, then cat the password.
func debLogin(t *testing.T) {
	t.Helper()
	pw, err := os.ReadFile("/etc/korvet/admin.password")
	if err != nil || len(strings.TrimSpace(string(pw))) < 20 {
		t.Fatalf("admin.password: %v %q", err, pw)
	}
	b, err := os.ReadFile("/etc/korvet/korvet.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := newProc(t, testbed.StartRedis(t))
	p.bin = "/usr/bin/korvet"
	text := string(b)
	for _, sub := range [][2]string{
		{`data_dir = "/var/lib/korvet"`, fmt.Sprintf("data_dir = %q", t.TempDir())},
		{`url = "redis://127.0.0.1:6379/0"`, fmt.Sprintf("url = %q", p.redis.URL)},
		{`listen = "0.0.0.0:9092"`, fmt.Sprintf("listen = %q", p.kafkaAddr)},
		{`listen = "0.0.0.0:8080"`, `listen = "0.0.0.0` + p.httpBase[strings.LastIndex(p.httpBase, ":"):] + `"`},
	} {
		if !strings.Contains(text, sub[0]) {
			t.Fatalf("installed korvet.toml has no line %s", sub[0])
		}
		text = strings.Replace(text, sub[0], sub[1], 1)
	}
	p.cfg = writeConfig(t, text)
	p.launch(t)
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, c := range []struct {
		user, password string
		want           int
	}{{"", "", http.StatusUnauthorized}, {"admin", "wrong", http.StatusUnauthorized}, {"admin", strings.TrimSpace(string(pw)), http.StatusOK}} {
		req, _ := http.NewRequest("GET", p.httpBase+"/api/v1/status", nil)
		if c.user != "" {
			req.SetBasicAuth(c.user, c.password)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("installed korvet, user %q: /api/v1/status %d, want %d", c.user, resp.StatusCode, c.want)
		}
	}
	if _, err := p.stop(t, 15*time.Second); err != nil {
		t.Errorf("installed korvet stop: %v", err)
	}
}
