#!/bin/sh
# Builds Lisa's Debian package: deploy/build-deb.sh [OUTDIR] (default
# dist/) writes OUTDIR/lisa_VERSION_ARCH.deb and prints its path.
#
# The package is built with dpkg-deb, Debian's own archiver, from a tree
# this script lays out: no debhelper, no source package, nothing outside
# Debian's base tools and Go. It is reproducible: the same checkout, Go
# toolchain and SOURCE_DATE_EPOCH give the same bytes (cmd/lisa
# TestDebianPackage builds it twice and compares). SOURCE_DATE_EPOCH
# defaults to the commit time of HEAD; the version to
# 0.0.0~gitYYYYMMDDhhmmss.REVISION (commit time and revision), or
# LISA_DEB_VERSION. LISA_BINARY, if set, is a static lisa binary to use
# instead of building one.
#
# What it installs (docs/operations.md, "Debian package"):
#   /usr/bin/lisa                           the static binary
#   /usr/lib/systemd/system/lisa.service    deploy/lisa.service, ExecStart=/usr/bin/lisa
#   /usr/lib/sysusers.d/lisa.conf           the lisa system user
#   /usr/lib/tmpfiles.d/lisa.conf           /var/lib/lisa, 0700 lisa:lisa
#   /etc/lisa/lisa.toml                     conffile, from config.example.toml
#   /etc/lisa/persona.md                    conffile, from persona.example.md
#   /usr/share/doc/lisa/                    copyright, changelog, docs
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct)
fi
export SOURCE_DATE_EPOCH
rev=$(git -C "$root" rev-parse --short=12 HEAD)
version=${LISA_DEB_VERSION:-0.0.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S).$rev}

# Whoever builds the package maintains it: LISA_DEB_MAINTAINER, "Name <mail>".
maintainer=${LISA_DEB_MAINTAINER:-Lisa authors <lisa@example.org>}

arch=$(dpkg --print-architecture)
case $arch in
amd64 | arm64 | riscv64 | ppc64el | s390x) goarch=${arch%el} ;;
i386) goarch=386 ;;
*)
	echo "build-deb.sh: no Go architecture for the Debian architecture $arch" >&2
	exit 1
	;;
esac
[ "$goarch" = ppc64 ] && goarch=ppc64le

tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
pkg=$tree/lisa
umask 022
mkdir -p "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/lib/systemd/system" \
	"$pkg/usr/lib/sysusers.d" "$pkg/usr/lib/tmpfiles.d" "$pkg/etc/lisa" \
	"$pkg/usr/share/doc/lisa" "$pkg/usr/share/man/man1"

if [ -n "${LISA_BINARY:-}" ]; then
	cp "$LISA_BINARY" "$pkg/usr/bin/lisa"
else
	# A position-independent executable, stripped of its symbol table and
	# DWARF (stack traces keep their function names and lines), as Debian
	# builds Go programs; the container image keeps the static binary.
	(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$goarch \
		go build -trimpath -buildvcs=auto -buildmode=pie -ldflags="-s -w" -o "$pkg/usr/bin/lisa" ./cmd/lisa)
fi
chmod 0755 "$pkg/usr/bin/lisa"

# The unit of a hand install (docs/operations.md) with the packaged binary.
sed 's|^ExecStart=/usr/local/bin/lisa |ExecStart=/usr/bin/lisa |' \
	"$root/deploy/lisa.service" >"$pkg/usr/lib/systemd/system/lisa.service"
grep -q '^ExecStart=/usr/bin/lisa run --config /etc/lisa/lisa.toml$' "$pkg/usr/lib/systemd/system/lisa.service" || {
	echo "build-deb.sh: deploy/lisa.service has no ExecStart=/usr/local/bin/lisa run --config /etc/lisa/lisa.toml" >&2
	exit 1
}

printf '%s\n' \
	'# The system user Lisa runs as (lisa.service, User=lisa); its home is the' \
	'# data dir, and it has no login shell.' \
	'u lisa - "Lisa Matrix bot" /var/lib/lisa' >"$pkg/usr/lib/sysusers.d/lisa.conf"
printf '%s\n' \
	'# runtime.data_dir of /etc/lisa/lisa.toml: only Lisa reads it.' \
	'd /var/lib/lisa 0700 lisa lisa -' >"$pkg/usr/lib/tmpfiles.d/lisa.conf"

# The example configuration, with the data dir where the unit's
# StateDirectory= is. persona.path stays relative, so it names
# /etc/lisa/persona.md wherever the tree is (an image, a throw-away root).
sed -e 's|^path = "persona.example.md"$|path = "persona.md"|' \
	-e 's|^data_dir = "lisa-data"$|data_dir = "/var/lib/lisa"|' \
	"$root/config.example.toml" >"$pkg/etc/lisa/lisa.toml"
for want in '^path = "persona.md"$' '^data_dir = "/var/lib/lisa"$'; do
	grep -q "$want" "$pkg/etc/lisa/lisa.toml" || {
		echo "build-deb.sh: config.example.toml changed: no line $want after the rewrite" >&2
		exit 1
	}
done
cp "$root/persona.example.md" "$pkg/etc/lisa/persona.md"
printf '%s\n' /etc/lisa/lisa.toml /etc/lisa/persona.md >"$pkg/DEBIAN/conffiles"

doc=$pkg/usr/share/doc/lisa
cat >"$doc/copyright" <<'EOF'
Lisa, a Matrix chat bot

Copyright: 2026 the Lisa authors

License: the project has not chosen a licence yet. Until it does, the
authors grant no rights beyond installing and running this package.
EOF
changelog_date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
cat >"$doc/changelog" <<EOF
lisa ($version) unstable; urgency=medium

  * Built from revision $(git -C "$root" rev-parse HEAD).

 -- $maintainer  $changelog_date
EOF
gzip -9 -n "$doc/changelog"
for f in operations configuration reliability security; do
	cp "$root/docs/$f.md" "$doc/$f.md"
done

# The manual page: what the binary says about its commands, and the
# files of the package. (The binary is built for this machine's
# architecture, so it runs here.)
{
	printf '.TH LISA 1 "%s" "lisa %s" "User Commands"\n' "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)" "$version"
	printf '.SH NAME\nlisa \\- a Matrix chat bot that answers mentions with an LLM\n'
	printf '.SH SYNOPSIS\n.B lisa\n.I command\n[\\fIoptions\\fR]\n'
	printf '.SH DESCRIPTION\nLisa answers the members of Matrix rooms who mention her, once per\nquestion. The commands, as \\fBlisa help\\fR lists them:\n.PP\n.nf\n'
	"$pkg/usr/bin/lisa" help 2>&1 | sed -e 's/\\/\\e/g' -e 's/^\./\\\&./'
	printf '.fi\n.SH FILES\n.TP\n.I /etc/lisa/lisa.toml\nthe configuration (see /usr/share/doc/lisa/configuration.md)\n'
	printf '.TP\n.I /etc/lisa/lisa.env\nthe secrets the configuration names as env:NAME, mode 0600\n'
	printf '.TP\n.I /var/lib/lisa\nthe data dir; back it up with \\fBlisa backup\\fR\n'
	printf '.SH SEE ALSO\n/usr/share/doc/lisa/operations.md\n'
} >"$pkg/usr/share/man/man1/lisa.1"
gzip -9 -n "$pkg/usr/share/man/man1/lisa.1"

cat >"$pkg/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# Creates the lisa user and /var/lib/lisa (sysusers.d, tmpfiles.d), then
# restarts Lisa if she runs (an upgrade). A first install does not start
# her: /etc/lisa/lisa.toml and /etc/lisa/lisa.env need the operator first.
# DPKG_ROOT is set when dpkg installs into another root
# (--force-script-chrootless).
set -e
if [ "$1" = configure ]; then
	if [ -n "${DPKG_ROOT:-}" ]; then
		systemd-sysusers --root="$DPKG_ROOT" lisa.conf
		systemd-tmpfiles --root="$DPKG_ROOT" --create lisa.conf
	else
		systemd-sysusers lisa.conf
		systemd-tmpfiles --create lisa.conf
		if [ -d /run/systemd/system ]; then
			systemctl --system daemon-reload >/dev/null || true
			deb-systemd-invoke try-restart lisa.service
		fi
	fi
fi
exit 0
EOF
cat >"$pkg/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# On purge, removes the data dir (Lisa's ledger: take `lisa backup` first).
# The lisa user stays, as Debian keeps system users.
set -e
if [ "$1" = purge ]; then
	rm -rf "${DPKG_ROOT:-}/var/lib/lisa"
fi
if [ "$1" = remove ] && [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
exit 0
EOF
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/postrm"

size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: lisa
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: systemd
Recommends: pandoc (>= 2.15)
Section: net
Priority: optional
Description: Matrix chat bot that answers mentions with an LLM
 Lisa answers the members of small private Matrix rooms who mention her,
 once per question, with sources, using an OpenAI-compatible model
 server of the operator's choice. She keeps her state in an
 event-sourced database under /var/lib/lisa and runs as the lisa system
 user under systemd (lisa.service). Configure /etc/lisa/lisa.toml and
 put the secrets in /etc/lisa/lisa.env before starting her.
EOF

(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
	xargs md5sum >DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"
# Every file's time is the commit's, so the archive does not depend on
# when the tree was laid out.
find "$pkg" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

deb=$out/lisa_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --threads-max=1 --build "$pkg" "$deb" >/dev/null
echo "$deb"
