#!/bin/sh
# Builds Lisa's container image with podman: deploy/build-image.sh [TAG]
# (default localhost/lisa:latest). The build context is a temporary
# directory holding what the image holds: the static binary
# (CGO_ENABLED=0), the host's CA bundle and an empty data dir. No registry
# is needed. LISA_BINARY, if set, is a static lisa binary to use instead
# of building one.
set -eu
tag=${1:-localhost/lisa:latest}
root=$(cd "$(dirname "$0")/.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
if [ -n "${LISA_BINARY:-}" ]; then
	cp "$LISA_BINARY" "$ctx/lisa"
else
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -buildvcs=auto -o "$ctx/lisa" ./cmd/lisa)
fi
cp /etc/ssl/certs/ca-certificates.crt "$ctx/ca-certificates.crt"
# The data dir itself (not only its contents) is copied with its mode.
mkdir -p "$ctx/rootfs" && mkdir -m 0700 "$ctx/rootfs/data"
podman --runtime runc build --format docker --file "$root/deploy/Containerfile" --tag "$tag" "$ctx"
