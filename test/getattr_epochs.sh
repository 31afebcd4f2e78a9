#!/usr/bin/env bash
# The FUSE requests a default image loader costs per epoch: an ImageFolder
# of 3,000 JPEGs in 100 class directories read with torchvision's default
# loader (Python's open(), which fstat()s every file) by a 4-worker
# DataLoader, three epochs on one mount, the first cold (read from the
# source directory through the daemon). Counts GETATTR, READ and LOOKUP
# per epoch with the fuse:fuse_request_send tracepoint. Binaries side by
# side, each on a fresh mount and cache:
#
#   bash test/getattr_epochs.sh [BINARY...]
#
# Default: a build of this checkout. Needs root, perf, and Debian's
# python3-torch, python3-torchvision and python3-pil (test/run.sh installs
# them). Prints one line per epoch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work=$(mktemp -d /tmp/getattr.XXXXXX)
trap 'umount -l "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
bins=("$@")
if [[ ${#bins[@]} -eq 0 ]]; then
	go build -o "$work/dsmount" ./cmd/dsmount
	bins=("$work/dsmount")
fi
/usr/bin/python3 python/tests/gen_images.py --out "$work/src" --classes 100 --images 3000 --seed 5 >/dev/null
cat >"$work/epoch.py" <<'PY'
import sys, warnings, torch
from torchvision.datasets import ImageFolder
warnings.simplefilter("ignore")
ds = ImageFolder(sys.argv[1], transform=lambda im: im.size)
dl = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=4, collate_fn=len)
print(sum(dl))
PY
mkdir -p "$work/mnt"
for bin in "${bins[@]}"; do
	rm -rf "$work/cache"
	"$bin" mount "$work/src" "$work/mnt" --cache-dir "$work/cache" >"$work/daemon.log" 2>&1 &
	for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
	for epoch in 1 2 3; do
		perf stat -a -x, -o "$work/stat" \
			-e fuse:fuse_request_send --filter 'opcode==3' \
			-e fuse:fuse_request_send --filter 'opcode==15' \
			-e fuse:fuse_request_send --filter 'opcode==1' \
			-- /usr/bin/python3 "$work/epoch.py" "$work/mnt" >"$work/out"
		counts=$(grep fuse_request "$work/stat" | cut -d, -f1 | tr '\n' ' ')
		read -r getattr read lookup <<<"$counts"
		echo "$bin epoch $epoch: $(cat "$work/out") images; GETATTR $getattr, READ $read, LOOKUP $lookup"
	done
	umount "$work/mnt"
	wait
done
