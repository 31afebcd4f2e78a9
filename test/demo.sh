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
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  mountpoint -q "$mnt" 2>/dev/null && (umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null)
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building dsmount"
(cd "$repo" && go build -o "$work/dsmount" ./cmd/dsmount)

start_mount() {
  "$work/dsmount" mount "$src" "$mnt" --cache-dir "$work/cache" "$@" 2>>"$work/log" &
  pid=$!
  for _ in $(seq 200); do
    grep -q 'msg=mounted' "$work/log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$work/log"; echo "dsmount exited early" >&2; exit 1; }
    sleep 0.05
  done
  cat "$work/log"; echo "mount did not come up" >&2; exit 1
}
stop_mount() {
  "$work/dsmount" unmount "$mnt"
  wait "$pid"; pid=
  : >"$work/log"
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
grep -o 'using stored listing[^"]*' "$work/log" | head -1 || true
verify_pass
echo "   cache: $(du -sh "$work/cache/data" | cut -f1) in $work/cache"
stop_mount
echo "== done: unmounted cleanly"
