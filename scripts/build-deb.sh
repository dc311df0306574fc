#!/usr/bin/env bash
# Builds korvet_<version>_<arch>.deb from this checkout with dpkg-deb, and
# prints its path.
#
#   scripts/build-deb.sh
#   OUT_DIR=/tmp/debs VERSION=1.2.0 GOARCH=arm64 scripts/build-deb.sh
#
# OUT_DIR (default dist/) receives the package. VERSION defaults to `git
# describe` (v1.2.3-4-gabc → 1.2.3+git4.gabc) or, without a tag,
# 0.0.0~git<date>.<commit>. GOARCH picks the target (Go cross-compiles;
# cgo is off so the binary depends on nothing).
#
# The package: /usr/bin/korvet, /etc/korvet/korvet.toml (a conffile; this
# repository's korvet.toml with the HTTP side on the LAN behind a login),
# the systemd
# units from systemd/, and the maintainer scripts from packaging/deb/.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

command -v go >/dev/null 2>&1 || die "go is not on PATH"
command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb is missing (apt-get install dpkg)"

OUT_DIR=${OUT_DIR:-$REPO/dist}
GOARCH=${GOARCH:-$(go env GOARCH)}
case $GOARCH in
amd64 | arm64 | riscv64 | s390x | mips64le) ARCH=$GOARCH ;;
386) ARCH=i386 ;;
arm) ARCH=armhf GOARM=${GOARM:-7} && export GOARM ;;
ppc64le) ARCH=ppc64el ;;
*) die "no Debian architecture known for GOARCH=$GOARCH" ;;
esac

if [[ -z ${VERSION:-} ]]; then
	if d=$(git describe --tags --match 'v[0-9]*' 2>/dev/null); then
		d=${d#v}
		# 1.2.3-4-gabcdef: commits after a tag sort above it.
		VERSION=$(sed -E 's/^(.*)-([0-9]+)-(g[0-9a-f]+)$/\1+git\2.\3/' <<<"$d")
	elif c=$(git log -1 --format='%cd.%h' --date=format:%Y%m%d 2>/dev/null); then
		VERSION="0.0.0~git$c"
	else
		VERSION="0.0.0~dev"
	fi
fi
[[ $VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "VERSION $VERSION is not a Debian version (digits first; letters, digits, . + ~)"

# Reproducible timestamps: the last commit's, unless given.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
install -d "$root/DEBIAN" "$root/usr/bin" "$root/etc/korvet" "$root/lib/systemd/system" "$root/usr/share/doc/korvet" \
	"$root/usr/share/korvet/grafana"

log "building korvet $VERSION for $ARCH"
CGO_ENABLED=${CGO_ENABLED:-0} GOOS=linux GOARCH=$GOARCH \
	go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$VERSION" -o "$root/usr/bin/korvet" . ||
	die "go build failed"

# The packaged config is the documented one with the HTTP side (status
# page, metrics, KV view) on the LAN behind a login: HTTP Basic with the
# admin user that postinst gives a random password in
# /etc/korvet/admin.password.
awk '
	/^\[/ { section = $0 }
	section == "" && $0 == "admin_user = \"\"" { print "admin_user = \"admin\""; n++; next }
	section == "" && $0 == "admin_password_file = \"\"" { print "admin_password_file = \"/etc/korvet/admin.password\""; n++; next }
	section == "[http]" && $0 == "listen = \"127.0.0.1:8080\"" { print "listen = \"0.0.0.0:8080\""; n++; next }
	section == "[http]" && $0 == "auth = \"none\"" { print "auth = \"basic\""; n++; next }
	{ print }
	END { if (n != 4) { print "korvet.toml: expected 4 lines to change for the package, changed " n > "/dev/stderr"; exit 1 } }
' korvet.toml >"$root/etc/korvet/korvet.toml" || die "korvet.toml: the lines the package changes were not found"
grep -q '^data_dir = "/var/lib/korvet"$' "$root/etc/korvet/korvet.toml" || die "korvet.toml: data_dir is not /var/lib/korvet"
chmod 0640 "$root/etc/korvet/korvet.toml"

install -m 0644 systemd/korvet.service systemd/korvet-index-rebuild.service systemd/korvet-index-rebuild.timer "$root/lib/systemd/system/"
install -m 0644 README.md "$root/usr/share/doc/korvet/README.md"
install -m 0644 packaging/grafana/korvet.json "$root/usr/share/korvet/grafana/korvet.json"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
echo /etc/korvet/korvet.toml >"$root/DEBIAN/conffiles"

# copyright: korvet's own terms, then every module linked into the binary
# (and Go's standard library) with its license, as their licenses ask of
# a binary distribution.
write_copyright() {
	local bin=$1
	cat <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: korvet
Comment: korvet is a statically linked Go program. The stanzas after the
 first cover the sources compiled into /usr/bin/korvet: Go's standard
 library and each Go module, named module@version.

Files: *
Copyright: the korvet developers
EOF
	if [[ -f LICENSE ]]; then
		printf 'License: %s\n' "$(license_name LICENSE)"
		indent <LICENSE
	else
		printf 'License: all-rights-reserved\n The korvet developers have not published korvet under a license yet.\n'
	fi
	printf '\nFiles: %s/src/*\nCopyright: The Go Authors\nLicense: BSD-3-Clause\n' "$(go env GOVERSION)"
	indent <"$(go env GOROOT)/LICENSE"
	local path ver dir f
	while read -r path ver; do
		dir=$(go mod download -json "$path@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
		f=$(find "$dir" -maxdepth 1 -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' \) | sort | head -n 1)
		[[ -n $f ]] || die "no license file in module $path@$ver ($dir)"
		printf '\nFiles: %s@%s/*\nCopyright: its authors, as stated below\n' "$path" "$ver"
		local name
		name=$(license_name "$f")
		if [[ $name == Apache-2.0 ]]; then
			printf 'License: Apache-2.0\n On Debian systems the full text of the Apache License 2.0 is in\n /usr/share/common-licenses/Apache-2.0.\n'
			# (an if, not &&: a module without NOTICE last in the list
			# would make the loop, and so the script, fail)
			if [[ -f $dir/NOTICE ]]; then
				printf ' .\n NOTICE:\n'
				indent <"$dir/NOTICE"
			fi
		else
			printf 'License: %s\n' "$name"
			indent <"$f"
		fi
	done < <(go version -m "$bin" | awk '$1 == "dep" { if (m) print m; m = $2 " " $3 } $1 == "=>" { m = $2 " " $3 } END { if (m) print m }')
}
# license_name FILE: the SPDX-style short name of a license text.
license_name() {
	if grep -q 'Apache License' "$1" && grep -q 'Version 2.0' "$1"; then
		echo Apache-2.0
	elif grep -q 'Permission is hereby granted, free of charge' "$1"; then
		echo Expat
	elif grep -q 'Neither the name' "$1"; then
		echo BSD-3-Clause
	elif grep -q 'Redistribution and use in source and binary forms' "$1"; then
		echo BSD-2-Clause
	elif grep -q 'Mozilla Public License' "$1"; then
		echo MPL-2.0
	elif grep -q 'Permission to use, copy, modify, and/or distribute' "$1"; then
		echo ISC
	else
		echo other
	fi
}
# indent: copyright-format continuation lines (blank lines become " .").
indent() { sed -e 's/[[:space:]]*$//' -e 's/^$/./' -e 's/^/ /'; }
write_copyright "$root/usr/bin/korvet" >"$root/usr/share/doc/korvet/copyright"

size_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@SIZE@/$size_kb/" packaging/deb/control >"$root/DEBIAN/control"
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$OUT_DIR"
deb="$OUT_DIR/korvet_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null || die "dpkg-deb failed"
log "built $deb"
echo "$deb"
