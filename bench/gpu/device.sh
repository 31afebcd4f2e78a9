#!/usr/bin/env bash
# bench gpu on a machine without Go (docs/gpu.md), in two halves:
#
#   bash bench/gpu/device.sh prepare
#       Here, with Go: builds into .gpu/ (ignored through .git/info/exclude)
#       what the other machine needs: the bench binary (linux/amd64, static,
#       stripped), and dsmount, MinIO and toxiproxy (all static) compressed
#       with xz (MinIO alone is over 100 MB stripped: xz brings the four to
#       about 50 MB, under a 64 MiB carry limit). Prints the size of what
#       travels. DSMOUNT_MINIO and DSMOUNT_TOXIPROXY pick other binaries.
#
#   bash bench/gpu/device.sh run OUTDIR [bench gpu flags...]
#       There: needs bash, python3 with torch and torchvision, coreutils; no
#       Go, no network, nothing installed. Probes the machine, unpacks the
#       binaries (Python's lzma, else xz), runs the StagingLoader CUDA tests,
#       then `bench gpu` with every pass under a deadline (all of it in
#       under 6 minutes), and writes into
#       OUTDIR: gpu.log (everything), gpu.json (the results, rewritten
#       after each pass), cuda-tests.log. Without CUDA it runs the same
#       code on the CPU with a tiny model and a few hundred images. Work
#       files go to .gpu-work/ in the checkout (on its disk, not a tmpfs),
#       removed at the end. PYTHON picks the Python (default python3).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO="$PWD"
GPU="$REPO/.gpu"
WORK="$REPO/.gpu-work"

log() { printf '==> %s %s\n' "$(date +%T)" "$*"; }
die() { log "$*"; exit 1; }

# compress SRC DST: strip a copy of SRC and write it xz-compressed to DST,
# unless DST is newer than SRC already.
compress() {
	local src=$1 dst=$2
	if [[ -f $dst && $dst -nt $src ]]; then
		log "$dst is up to date"
		return
	fi
	local tmp
	tmp="$(mktemp)"
	cp "$src" "$tmp"
	strip "$tmp" 2>/dev/null || true # Go binaries built with -s -w are stripped already
	xz -T0 -6 -c "$tmp" >"$dst.tmp"
	mv "$dst.tmp" "$dst"
	rm -f "$tmp"
	log "$dst: $(stat -c %s "$dst") bytes (from $(stat -c %s "$src"))"
}

prepare() {
	command -v go >/dev/null || die "prepare needs Go"
	command -v xz >/dev/null || die "prepare needs xz (apt-get install xz-utils)"
	mkdir -p "$GPU"
	local exclude
	exclude="$(git rev-parse --git-path info/exclude)"
	mkdir -p "$(dirname "$exclude")"
	for p in /.gpu/ /.gpu-work/; do
		grep -qxF "$p" "$exclude" 2>/dev/null || echo "$p" >>"$exclude"
	done
	export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
	log "go build ./bench -> .gpu/bench"
	go build -trimpath -ldflags='-s -w' -o "$GPU/bench" ./bench
	log "go build ./cmd/dsmount -> .gpu/dsmount.xz"
	go build -trimpath -ldflags='-s -w' -o "$GPU/dsmount.bin" ./cmd/dsmount
	compress "$GPU/dsmount.bin" "$GPU/dsmount.xz"
	rm -f "$GPU/dsmount.bin"
	# MinIO and toxiproxy as test/run.sh pins them, but static
	# (CGO_ENABLED=0): test/run.sh's builds link glibc 2.34's symbols,
	# which the other machine may not have. One-off, about 5 minutes.
	local static="${HOME:-/root}/.cache/dsmount-tools/static" minio toxi
	minio="${DSMOUNT_MINIO:-$static/minio}" toxi="${DSMOUNT_TOXIPROXY:-$static/toxiproxy-server}"
	if [[ -z ${DSMOUNT_MINIO:-} && ! -x $minio ]]; then
		log "building a static MinIO into $static (one-off, about 5 minutes)"
		(cd / && CGO_ENABLED=0 GOFLAGS= GOWORK=off GOBIN="$static" go install -trimpath -ldflags='-s -w' \
			"$(sed -n 's/^MINIO_MODULE="\(.*\)"$/\1/p' "$REPO/test/run.sh")") || log "the static MinIO build failed"
	fi
	if [[ -z ${DSMOUNT_TOXIPROXY:-} && ! -x $toxi ]]; then
		log "building a static toxiproxy into $static"
		(cd / && CGO_ENABLED=0 GOFLAGS= GOWORK=off GOBIN="$static" go install -trimpath -ldflags='-s -w' \
			"$(sed -n 's/^TOXIPROXY_MODULE="\(.*\)"$/\1/p' "$REPO/test/run.sh")" && mv "$static/server" "$toxi") ||
			log "the static toxiproxy build failed"
	fi
	if [[ -x $minio && -x $toxi ]]; then
		compress "$minio" "$GPU/minio.xz"
		compress "$toxi" "$GPU/toxiproxy-server.xz"
	else
		log "no MinIO or toxiproxy at $minio, $toxi: the minio pass will be skipped there"
		rm -f "$GPU/minio.xz" "$GPU/toxiproxy-server.xz"
	fi
	(cd "$GPU" && sha256sum bench ./*.xz >SHA256SUMS)
	local tree carried
	tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
	carried=$(du -cb "$GPU" | tail -1 | cut -f1)
	log "what travels: the tracked tree $tree bytes + .gpu $carried bytes = $((tree + carried)) bytes ($(((tree + carried) >> 20)) MiB; the limit is 64 MiB)"
	git status --porcelain --untracked-files=all | grep '^??' && log "untracked files above travel too" || true
}

# unpack NAME: .gpu/NAME.xz into $WORK/bin/NAME, with Python's lzma or xz.
unpack() {
	local src="$GPU/$1.xz" dst="$WORK/bin/$1"
	[[ -f $src ]] || return 1
	"$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 20)' "$src" "$dst" 2>/dev/null ||
		xz -dc "$src" >"$dst" || return 1
	chmod +x "$dst"
}

# unmount_leftovers detaches any mount under $WORK.
unmount_leftovers() {
	local m
	for m in $(grep -F " $WORK/" /proc/mounts | cut -d' ' -f2 || true); do
		umount -l "$m" || true
	done
}

probe() {
	log "probe"
	echo "date: $(date -u)"
	echo "kernel: $(uname -srm); uid $(id -u); $(nproc) CPUs"
	free -g | sed 's/^/  /'
	echo "disk under the work dir:"
	df -hT "$REPO" | sed 's/^/  /'
	echo "/dev/fuse: $(ls -l /dev/fuse 2>&1)"
	echo "fusermount3: $(command -v fusermount3 || echo 'missing (as root dsmount mounts with mount(2) itself)')"
	echo "drop_caches: $([[ -w /proc/sys/vm/drop_caches ]] && echo writable || echo 'not writable (fadvise instead)')"
	# The DataLoader's workers hand batches over in /dev/shm: 14 workers
	# with 2 batches of 256 decoded 224 px images each hold about 1 GB. A
	# container's default of 64 MB kills them with a bus error.
	local shm
	shm=$(df -k --output=size /dev/shm 2>/dev/null | tail -1 | tr -d ' ' || echo 0)
	echo "/dev/shm: $((shm >> 10)) MiB"
	if ((shm < 8 << 20)); then
		mount -o remount,size=16g /dev/shm 2>&1 && echo "/dev/shm remounted with 16 GiB" ||
			echo "/dev/shm is small and could not be grown: runs with many workers may fail"
	fi
	echo "nvidia-smi:"
	timeout 10 nvidia-smi 2>&1 | sed 's/^/  /' || echo "  (nvidia-smi failed or is missing)"
	"$PY" - <<'EOF' 2>&1 | sed 's/^/  /'
import sys
print("python", sys.version.split()[0], sys.executable)
for m in ("torch", "torchvision", "PIL", "numpy", "lzma"):
    try:
        mod = __import__(m)
        print(m, getattr(mod, "__version__", "ok"))
    except Exception as e:
        print(m, "MISSING:", e)
import torch
print("cuda available:", torch.cuda.is_available(), "cuda", torch.version.cuda)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device 0:", p.name, "%.0f GiB" % (p.total_memory / 2**30), "bf16:", torch.cuda.is_bf16_supported())
EOF
}

# run OUTDIR [flags]: run_in with its output on stdout and in gpu.log (a
# pipe, not a process substitution: the log is whole when run returns).
run() {
	local out=${1:?usage: device.sh run OUTDIR [bench gpu flags...]}
	shift
	mkdir -p "$out"
	out="$(cd "$out" && pwd)"
	run_in "$out" "$@" 2>&1 | tee "$out/gpu.log"
	return "${PIPESTATUS[0]}"
}

run_in() {
	local out=$1
	shift
	PY="${PYTHON:-python3}"
	local t0=$SECONDS
	# In an || list errexit is off inside probe: a probe step that fails
	# (no free, no nvidia-smi, a Python without torch) only says so.
	probe || log "a probe step failed (above)"
	[[ -x $GPU/bench ]] || die "no .gpu/bench: run 'bash bench/gpu/device.sh prepare' where Go is, and carry .gpu"
	if [[ -f $GPU/SHA256SUMS ]] && command -v sha256sum >/dev/null; then
		(cd "$GPU" && sha256sum --quiet -c SHA256SUMS) || die ".gpu does not match its SHA256SUMS"
	fi
	unmount_leftovers # an earlier run killed midway may have left a mount
	rm -rf "$WORK"
	mkdir -p "$WORK/bin" "$WORK/tmp"
	local args=(--repo "$REPO" --python "$PY" --json "$out/gpu.json")
	if unpack dsmount; then
		args+=(--dsmount "$WORK/bin/dsmount")
	else
		log "no dsmount: the dsmount passes will be skipped"
		args+=(--dsmount /nonexistent/dsmount)
	fi
	local env=(TMPDIR="$WORK/tmp")
	if unpack minio && unpack toxiproxy-server; then
		env+=(DSMOUNT_MINIO="$WORK/bin/minio" DSMOUNT_TOXIPROXY="$WORK/bin/toxiproxy-server")
	else
		log "no MinIO or toxiproxy in .gpu: the minio pass will be skipped"
		env+=(DSMOUNT_MINIO=/nonexistent/minio DSMOUNT_TOXIPROXY=/nonexistent/toxiproxy-server)
	fi
	log "binaries unpacked in $((SECONDS - t0)) s"
	if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		log "CUDA: the full sweep"
	else
		log "no CUDA: the same passes on the CPU, with a tiny model and 400 images"
		args+=(--model tiny --batch 16 --crop 112 --images 400 --classes 10 --workers 1,2 --minio-workers 2 --seconds 2 --check)
	fi
	log "StagingLoader's CUDA tests (python/tests/test_staging_cuda.py)"
	(cd "$REPO/python" && PYTHONDONTWRITEBYTECODE=1 timeout 60 "$PY" -m unittest -v tests.test_staging_cuda tests.test_staging) \
		>"$out/cuda-tests.log" 2>&1 && log "CUDA tests: OK" || log "CUDA tests: FAILED"
	tail -n 30 "$out/cuda-tests.log"
	# The whole command stays under 6 minutes: bench gets what is left of
	# 350 s, its deadline 25 s less (the last pass and the report).
	local left=$((350 - (SECONDS - t0)))
	args+=(--deadline "$((left - 25))s")
	log "bench gpu ${args[*]} $*"
	local rc=0
	env "${env[@]}" timeout -k 10 "$((left - 5))" "$GPU/bench" gpu "${args[@]}" "$@" || rc=$?
	log "bench gpu exited $rc after $((SECONDS - t0)) s in all"
	unmount_leftovers
	if [[ -z ${KEEP_WORK:-} ]] && ! grep -qF " $WORK/" /proc/mounts; then rm -rf "$WORK"; fi
	return $rc
}

case "${1:-}" in
prepare) prepare ;;
run)
	shift
	run "$@"
	;;
*)
	echo "usage: bash bench/gpu/device.sh prepare | run OUTDIR [bench gpu flags...]" >&2
	exit 2
	;;
esac
