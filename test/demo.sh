#!/usr/bin/env bash
# dsmount's main job on an embedded default: mount a local dataset directory
# (test/testdata/sample-dataset unless DIR is given) through the cache, read
# every file through the mount twice and check each byte against the source,
# show that the second pass and a remount are served from the cache, unmount.
#
#   bash test/demo.sh [DIR]
#
# Needs: Go, root (or fusermount3) and /dev/fuse; installs fuse3 if missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "${1:-$repo/test/testdata/sample-dataset}" && pwd)

if ! command -v fusermount3 >/dev/null && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null
fi

work=$(mktemp -d)
mnt="$work/mnt"
mkdir -p "$mnt"
daemon=
cleanup() {
  mountpoint -q "$mnt" 2>/dev/null && (umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null)
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building dsmount"
(cd "$repo" && go build -o "$work/dsmount" ./cmd/dsmount)

# -d: the daemon goes to the background (its log in the cache dir) and the
# command returns once the mount serves reads, or fails with the reason.
start_mount() {
  "$work/dsmount" mount -d "$src" "$mnt" --cache-dir "$work/cache" "$@" 2>"$work/mount.out" || { cat "$work/mount.out" >&2; exit 1; }
  daemon=$(grep -o 'daemon_pid=[0-9]*' "$work/mount.out" | cut -d= -f2)
}
# The daemon exits with its last mount; the next mount of the same cache
# dir starts a new one once it has.
stop_mount() {
  "$work/dsmount" unmount "$mnt"
  while kill -0 "$daemon" 2>/dev/null; do sleep 0.05; done
  daemon=
}
verify_pass() {
  local n=0
  while IFS= read -r -d '' f; do
    rel=${f#"$src"/}
    cmp -s "$f" "$mnt/$rel" || { echo "MISMATCH: $rel" >&2; exit 1; }
    n=$((n+1))
  done < <(find "$src" -type f -print0)
  echo "   $n files read through the mount, every byte equal to the source"
}

echo "== mounting $src at $mnt"
start_mount
ls -la "$mnt" | head -20
echo "== pass 1 (cold: fetched from the source into the cache)"
verify_pass
echo "== pass 2 (hot)"
verify_pass
stop_mount
echo "== remount on the same cache (stored listing, cached chunks)"
start_mount
grep -o 'using stored listing[^"]*' "$work/cache/dsmount.log" | tail -1 || true
verify_pass
echo "   cache: $(du -sh "$work/cache/data" | cut -f1) in $work/cache"
stop_mount
echo "== done: unmounted cleanly"
