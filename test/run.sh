#!/usr/bin/env bash
# The one command that runs dsmount's whole test suite (unit + end-to-end):
#
#   bash test/run.sh            (from anywhere; needs root for FUSE mounts)
#
# On a fresh machine with only Go, gcc and git it first installs what the
# end-to-end tests need:
#   - fuse3 (fusermount3), via apt-get, if missing;
#   - the MinIO server binary, built with `go install` into
#     $HOME/.cache/dsmount-tools/bin (outside the checkout, reused across runs;
#     the first build takes ~5 min on 2 cores). DSMOUNT_MINIO overrides the path;
#   - the toxiproxy server (a TCP latency/fault proxy), built with `go install`
#     into the same directory and renamed toxiproxy-server (go install names
#     it `server`). DSMOUNT_TOXIPROXY overrides the path.
# Then it runs `go vet ./...`, the cache packages' tests under the race
# detector (their concurrency tests catch a recycled buffer reaching a reader
# reliably only there), and `go test -count=1 -timeout 40m ./...`.
# Extra arguments are passed to go test (e.g. -run TestCrash -v).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

MINIO_MODULE="github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"
TOOLS_BIN="${HOME:-/root}/.cache/dsmount-tools/bin"
MINIO_BIN="${DSMOUNT_MINIO:-$TOOLS_BIN/minio}"
TOXIPROXY_MODULE="github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0"
TOXIPROXY_BIN="${DSMOUNT_TOXIPROXY:-$TOOLS_BIN/toxiproxy-server}"

log() { printf '==> %s\n' "$*" >&2; }

# need_tool VAR BIN WHAT: false when BIN is an executable already. When VAR
# named it and it is not one, the run stops; otherwise it says it builds
# WHAT, makes $TOOLS_BIN, and is true: the caller builds BIN.
need_tool() {
	[[ -x "$2" ]] && return 1
	if [[ -n "${!1:-}" ]]; then
		log "$1=${!1} is not an executable file"
		exit 1
	fi
	log "building $3"
	mkdir -p "$TOOLS_BIN"
}

if [[ ! -e /dev/fuse ]]; then
	log "warning: /dev/fuse is missing; the mount tests will fail"
fi

if ! command -v fusermount3 >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null 2>&1 || ! /usr/bin/python3 -c 'import torch, numpy, PIL, torchvision, matplotlib, pytest, mypy, ensurepip, setuptools, wheel, lmdb' >/dev/null 2>&1; then
	log "installing fuse3 (fusermount3, mount.fuse3), systemd (systemd-analyze, for the unit files), Debian's PyTorch, torchvision, Pillow and matplotlib (for the DataLoader and image pipeline tests and the pipeline plot), pytest, mypy, venv, setuptools and wheel (pip install ./python offline and its tests), and python3-lmdb (bench ranges' LMDB scripts)"
	SUDO=""
	if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -q
	$SUDO apt-get install -y -q fuse3 systemd python3-torch python3-numpy python3-pil python3-torchvision python3-matplotlib python3-pytest python3-mypy python3-venv python3-setuptools python3-wheel python3-lmdb
fi

if need_tool DSMOUNT_MINIO "$MINIO_BIN" "the MinIO server into $TOOLS_BIN (one-off, a few minutes)"; then
	# A module-aware install outside this module: don't let this repo's
	# go.mod, GOFLAGS=-mod=... or a workspace interfere.
	(cd / && GOFLAGS= GOWORK=off GOBIN="$TOOLS_BIN" go install "$MINIO_MODULE")
fi
export DSMOUNT_MINIO="$MINIO_BIN"

if need_tool DSMOUNT_TOXIPROXY "$TOXIPROXY_BIN" "the toxiproxy server into $TOOLS_BIN (one-off)"; then
	# Build into a scratch GOBIN so an unrelated $TOOLS_BIN/server is left alone.
	tmpbin="$(mktemp -d)"
	(cd / && GOFLAGS= GOWORK=off GOBIN="$tmpbin" go install "$TOXIPROXY_MODULE")
	mv "$tmpbin/server" "$TOXIPROXY_BIN"
	rmdir "$tmpbin"
fi
export DSMOUNT_TOXIPROXY="$TOXIPROXY_BIN"

log "go version: $(go version)"
log "go vet ./..."
go vet ./...

log "go test -race ./cache/..."
go test -count=1 -race -timeout 20m ./cache/...

log "go test -count=1 -timeout 40m ./... $*"
go test -count=1 -timeout 40m "$@" ./...
