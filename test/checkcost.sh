#!/usr/bin/env bash
# What checking every read of a cached chunk costs through a real mount:
# reads that reach the daemon (the mount's page cache empty: a fresh mount)
# of a dataset already wholly in the cache, with --fast-path off so that
# every read goes through the daemon. Two binaries side by side in one run,
# alternating, each on a cache dir it filled itself:
#
#   bash test/checkcost.sh OLD_BINARY [NEW_BINARY] [ROUNDS]
#
# NEW_BINARY defaults to a build of this checkout; OLD_BINARY is typically a
# build of an earlier commit (git worktree add /tmp/old <commit>; go build
# -o /tmp/dsmount-old ./cmd/dsmount there). The dataset: 2,000 files of
# 110,000 bytes (8 parallel readers, files/s) and one 256 MiB file (dd
# bs=1M, MB/s), each pass twice: with the cache files in the page cache
# ("warm": the daemon's cost alone) and after dropping all page caches
# ("cold": from the disk). Needs root. Prints one line per pass.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

old=${1:?usage: checkcost.sh OLD_BINARY [NEW_BINARY] [ROUNDS]}
new=${2:-}
rounds=${3:-3}
work=$(mktemp -d /tmp/checkcost.XXXXXX)
trap 'for m in "$work"/mnt-*; do umount -l "$m" 2>/dev/null || true; done; rm -rf "$work"' EXIT
if [[ -z $new ]]; then
	new=$work/dsmount-new
	go build -o "$new" ./cmd/dsmount
fi

src=$work/src
mkdir -p "$src/small"
head -c 110000 /dev/urandom >"$work/one"
for i in $(seq -w 1 2000); do
	# Distinct bytes per file: a prefix of its own number.
	{ printf '%s' "$i"; cat "$work/one"; } | head -c 110000 >"$src/small/$i.bin"
done
head -c $((256 << 20)) /dev/urandom >"$src/large.bin"

mountwith() { # bin name: mount src at $work/mnt-name, cache $work/cache-name
	local bin=$1 name=$2 mp=$work/mnt-$2
	mkdir -p "$mp" "$work/cache-$name"
	chmod 700 "$work/cache-$name"
	"$bin" mount "$src" "$mp" --cache-dir "$work/cache-$name" --cache-size 2G --fast-path off --log-level warn &
	for _ in $(seq 1 100); do
		mountpoint -q "$mp" && return 0
		sleep 0.1
	done
	echo "mount of $name did not come up" >&2
	return 1
}
unmountit() { umount "$work/mnt-$1"; wait; }

pass() { # name: one timed pass through the mount
	local mp=$work/mnt-$1 t0 t1 mbps
	t0=$(date +%s.%N)
	ls "$mp/small" | sed "s|^|$mp/small/|" | xargs -P 8 -n 50 cat >/dev/null
	t1=$(date +%s.%N)
	# dd's own clock, to the millisecond (its rate is rounded to 2 digits).
	mbps=$(dd if="$mp/large.bin" of=/dev/null bs=1M 2>&1 | sed -n 's/.*copied, \([0-9.]*\) s.*/\1/p' | awk '{ printf "%.0f", 268.435456 / $1 }')
	echo "$(echo "2000 / ($t1 - $t0)" | bc -l | xargs printf '%.0f') files/s, $mbps MB/s"
}

for name in old new; do
	bin=$old
	[[ $name == new ]] && bin=$new
	mountwith "$bin" "$name"
	pass "$name" >/dev/null # fills the cache
	unmountit "$name"
done

for r in $(seq 1 "$rounds"); do
	order="old new"
	((r % 2 == 0)) && order="new old"
	for mode in warm cold; do
		for name in $order; do
			bin=$old
			[[ $name == new ]] && bin=$new
			if [[ $mode == cold ]]; then
				sync
				echo 3 >/proc/sys/vm/drop_caches
			else
				cat "$work/cache-$name"/packs/* >/dev/null 2>&1 || true
				find "$work/cache-$name/data" -type f -exec cat {} + >/dev/null
			fi
			mountwith "$bin" "$name"
			echo "round $r $mode $name: $(pass "$name")"
			unmountit "$name"
		done
	done
done
