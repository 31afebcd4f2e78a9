#!/usr/bin/env bash
# End-to-end test of dsmount's systemd units under a real systemd (opt-in).
#
#   bash test/systemd/e2e.sh
#
# Boots Debian 12 with systemd as PID 1 in a container (systemd-nspawn, on a
# per-run overlay of a debootstrapped rootfs cached in
# ~/.cache/dsmount-tools/systemd-rootfs-bookworm), installs the dsmount built
# from this working tree and deploy/systemd/*.service as they are now, and
# runs deployment scenarios against them with a local-directory source:
# start, READY timing, restarts, stop and restart while busy, kill -9, two
# instances on one cache dir, bad settings, a mountpoint with '-', fstab with
# `mount -a` twice, and a reboot. Prints PASS/FAIL per check with its
# evidence and ends with "N passed, M failed"; exits non-zero if any failed.
# docs/testing.md says what it needs and what each scenario checks.
#
# Needs: root, Linux with /dev/fuse and overlayfs (else the rootfs is
# copied), Go, apt-get (installs debootstrap and systemd-container if
# missing) and Debian's archive for the first run (about 2 minutes; later
# runs reuse the rootfs). The host needs no systemd: the container runs
# unregistered (--register=no --keep-unit) and every command inside runs
# through nsenter into its PID 1.
#
# Settings (environment):
#   DSMOUNT_E2E_CACHE            where the rootfs is cached (default ~/.cache/dsmount-tools)
#   DSMOUNT_E2E_MIRROR           Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   DSMOUNT_E2E_ENVFILE_NAMING   how an instance's env file is named:
#                                  instance: /etc/dsmount/<escaped instance>.env (literally,
#                                            e.g. /etc/dsmount/mnt-my\x2ddata.env)
#                                  path:     /etc/dsmount<mountpoint>.env (/etc/dsmount/mnt/my-data.env)
#                                  auto:     what docs/deploy.md shows (the default)
#   DSMOUNT_E2E_KEEP             1: keep the per-run directory (rootfs overlay) for inspection
set -euo pipefail

SUITE=bookworm
MIRROR=${DSMOUNT_E2E_MIRROR:-http://deb.debian.org/debian}
PACKAGES=systemd,systemd-sysv,dbus,fuse3,util-linux,procps
CACHE_ROOT=${DSMOUNT_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dsmount-tools}
ROOTFS=$CACHE_ROOT/systemd-rootfs-$SUITE
LOG_DIR=$CACHE_ROOT/systemd-e2e-last # journal and console of the last run
ENVFILE_NAMING=${DSMOUNT_E2E_ENVFILE_NAMING:-auto}
STAMP="suite=$SUITE packages=$PACKAGES variant=minbase v1"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"

PASSED=0
FAILED=0
FAILED_IDS=()
T_START=$SECONDS

report() { # PASS|FAIL ID EVIDENCE
	if [[ $1 == PASS ]]; then
		PASSED=$((PASSED + 1))
	else
		FAILED=$((FAILED + 1))
		FAILED_IDS+=("$2")
	fi
	printf '%s  %s: %s\n' "$1" "$2" "$3"
}

note() { printf '[%4ds] %s\n' $((SECONDS - T_START)) "$*"; }

# summary prints the closing line; the exit status follows it.
summary() {
	echo
	if ((FAILED > 0)); then
		echo "failed: ${FAILED_IDS[*]}"
	fi
	echo "$PASSED passed, $FAILED failed"
}

# fatal fails a setup step: the run ends with it as its one failure.
fatal() {
	report FAIL "$1" "$2"
	summary
	exit 1
}

# --- requirements ---------------------------------------------------------

[[ $(id -u) == 0 ]] || { echo "e2e.sh: must run as root (systemd-nspawn, overlay mounts)" >&2; exit 2; }
[[ -c /dev/fuse ]] || { echo "e2e.sh: /dev/fuse is missing" >&2; exit 2; }
command -v go >/dev/null || { echo "e2e.sh: go is not on PATH" >&2; exit 2; }

apt_install() { # PACKAGE...
	note "installing $* with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	timeout 600 apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
		{ timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
}
command -v debootstrap >/dev/null || apt_install debootstrap
command -v systemd-nspawn >/dev/null || apt_install systemd-container
for tool in debootstrap systemd-nspawn nsenter flock systemd-escape pgrep; do
	command -v "$tool" >/dev/null || { echo "e2e.sh: $tool is missing" >&2; exit 2; }
done

# --- the cached rootfs ----------------------------------------------------

mkdir -p "$CACHE_ROOT"
# A shared lock for the whole run (the overlay's lower layer must not
# change under it); building takes it exclusively.
exec {LOCK_FD}>"$CACHE_ROOT/.systemd-rootfs.lock"
if [[ ! -f $ROOTFS/.dsmount-e2e-stamp || $(cat "$ROOTFS/.dsmount-e2e-stamp") != "$STAMP" ]]; then
	flock -w 1200 "$LOCK_FD" || { echo "e2e.sh: waited 20 min for the rootfs lock" >&2; exit 2; }
	if [[ ! -f $ROOTFS/.dsmount-e2e-stamp || $(cat "$ROOTFS/.dsmount-e2e-stamp") != "$STAMP" ]]; then
		note "building the $SUITE rootfs with debootstrap from $MIRROR (a few minutes, once)"
		rm -rf --one-file-system "$ROOTFS.new"
		if ! timeout 1200 debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS.new" "$MIRROR" >"$CACHE_ROOT/debootstrap.log" 2>&1; then
			tail -20 "$CACHE_ROOT/debootstrap.log" >&2
			rm -rf --one-file-system "$ROOTFS.new"
			echo "e2e.sh: debootstrap failed (log: $CACHE_ROOT/debootstrap.log)" >&2
			exit 2
		fi
		# Nothing in the container should reach out or wake up on its own.
		for t in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer; do
			ln -sf /dev/null "$ROOTFS.new/etc/systemd/system/$t"
		done
		echo "$STAMP" >"$ROOTFS.new/.dsmount-e2e-stamp"
		rm -rf --one-file-system "$ROOTFS"
		mv "$ROOTFS.new" "$ROOTFS"
	fi
fi
flock -s -w 1200 "$LOCK_FD" || { echo "e2e.sh: waited 20 min for the rootfs lock" >&2; exit 2; }

# --- the per-run copy, and cleanup ------------------------------------------

RUN=$(mktemp -d "${TMPDIR:-/var/tmp}/dsmount-e2e.XXXXXX")
ROOT=$RUN/root
MACHINE=dsm-e2e-$$
NSPAWN_PID=
INIT_PID=
OVERLAY=0

cleanup() {
	local rc=$? i
	set +e
	trap - EXIT INT TERM
	# A signal can land while `IFS= read` runs, whose IFS the trap would
	# inherit.
	IFS=$' \t\n'
	if [[ -n $INIT_PID ]] && kill -0 "$INIT_PID" 2>/dev/null; then
		# Keep the container's journal for a look after the run.
		mkdir -p "$LOG_DIR"
		timeout 20 nsenter -t "$INIT_PID" -a journalctl -q --no-pager -o short-precise >"$LOG_DIR/journal.txt" 2>&1 </dev/null
	fi
	if [[ -n $NSPAWN_PID ]] && kill -0 "$NSPAWN_PID" 2>/dev/null; then
		# SIGTERM: nspawn asks the container's systemd to power off.
		kill -TERM "$NSPAWN_PID" 2>/dev/null
		for ((i = 0; i < 60; i++)); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.5; done
		if kill -0 "$NSPAWN_PID" 2>/dev/null; then
			note "the container did not power off in 30 s: killing it"
			[[ -n $INIT_PID ]] && kill -KILL "$INIT_PID" 2>/dev/null
			kill -KILL "$NSPAWN_PID" 2>/dev/null
		fi
		wait "$NSPAWN_PID" 2>/dev/null
	fi
	if [[ -n $INIT_PID ]] && kill -0 "$INIT_PID" 2>/dev/null; then
		kill -KILL "$INIT_PID" 2>/dev/null # its PID namespace goes with it
		sleep 1
	fi
	[[ -f $RUN/console.log ]] && mkdir -p "$LOG_DIR" && cp "$RUN/console.log" "$LOG_DIR/console.log"
	if ((OVERLAY)); then
		for ((i = 0; i < 5; i++)); do umount "$ROOT" 2>/dev/null && OVERLAY=0 && break; sleep 1; done
		((OVERLAY == 0)) || { umount -l "$ROOT" && OVERLAY=0; }
	fi
	rmdir "/run/systemd/nspawn/propagate/$MACHINE" 2>/dev/null
	if grep -qF " $RUN" /proc/self/mountinfo; then
		echo "e2e.sh: WARNING: mounts under $RUN remain on the host:" >&2
		grep -F " $RUN" /proc/self/mountinfo >&2
	elif [[ ${DSMOUNT_E2E_KEEP:-0} == 1 ]]; then
		note "kept $RUN"
	else
		rm -rf --one-file-system "$RUN"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$RUN/upper" "$RUN/work" "$ROOT"
if mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$RUN/upper,workdir=$RUN/work" "$ROOT" 2>/dev/null; then
	OVERLAY=1
else
	note "no overlayfs here: copying the rootfs"
	cp -a --reflink=auto "$ROOTFS/." "$ROOT/"
fi

# --- dsmount, the units, the dataset -----------------------------------------

note "building dsmount from the working tree"
build_log=$(timeout 600 go build -o "$RUN/dsmount" ./cmd/dsmount 2>&1) || fatal build "go build ./cmd/dsmount failed: $build_log"
install -m 0755 "$RUN/dsmount" "$ROOT/usr/local/bin/dsmount"
install -m 0644 deploy/systemd/*.service "$ROOT/etc/systemd/system/"
echo "$MACHINE" >"$ROOT/etc/hostname"
mkdir -p "$ROOT/var/log/journal" # a persistent journal: the reboot keeps the first boot's

if [[ $ENVFILE_NAMING == auto ]]; then
	# docs/deploy.md is the admin's guide: name the files the way it shows.
	if grep -qE '/etc/dsmount/mnt/[a-z]|/etc/dsmount<mountpoint>|/etc/dsmount%f' docs/deploy.md; then
		ENVFILE_NAMING=path
	else
		ENVFILE_NAMING=instance
	fi
	note "env files named as docs/deploy.md shows: $ENVFILE_NAMING (DSMOUNT_E2E_ENVFILE_NAMING=instance|path overrides)"
fi
case $ENVFILE_NAMING in
instance | path) ;;
*) echo "e2e.sh: DSMOUNT_E2E_ENVFILE_NAMING must be instance, path or auto" >&2; exit 2 ;;
esac

# A few hundred small files, some in subdirectories, a few larger than a
# chunk (4 MiB), an empty one, and probe.txt for the READY timing.
data=$ROOT/srv/data
mkdir -p "$data/sub1" "$data/sub2/deeper" "$data/sub3"
for i in $(seq 1 240); do head -c $((RANDOM % 32768)) /dev/urandom >"$data/f$i.bin"; done
for i in $(seq 1 20); do head -c $((RANDOM % 16384 + 1)) /dev/urandom >"$data/sub1/s$i.bin"; done
for i in $(seq 1 20); do head -c $((RANDOM % 16384 + 1)) /dev/urandom >"$data/sub2/deeper/d$i.bin"; done
for i in $(seq 1 10); do head -c $((RANDOM % 4096 + 1)) /dev/urandom >"$data/sub3/t$i.bin"; done
head -c $((6 << 20)) /dev/urandom >"$data/big1.bin"
head -c $((9 << 20 | 12345)) /dev/urandom >"$data/big2.bin"
: >"$data/empty"
head -c 1000 /dev/urandom >"$data/sub1/a file with spaces.bin"
echo "dsmount-e2e-probe $RANDOM$RANDOM" >"$data/probe.txt"
(cd "$data" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) >"$ROOT/srv/data.sha256"
note "dataset: $(wc -l <"$ROOT/srv/data.sha256") files, $(du -sh "$data" | cut -f1) in /srv/data"

# --- the container --------------------------------------------------------

# cin TIMEOUT SCRIPT [ARG...]: runs SCRIPT with bash inside the container,
# in all its namespaces, with a clean environment.
cin() {
	local t=$1 script=$2
	shift 2
	timeout -k 5 "$t" nsenter -t "$INIT_PID" -a \
		env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		SYSTEMD_PAGER=cat SYSTEMD_COLORS=0 TERM=dumb ENVFILE_NAMING="$ENVFILE_NAMING" \
		bash -c "$script" bash "$@" </dev/null
}

# boot starts the container and waits until its systemd is up. Sets
# NSPAWN_PID and INIT_PID.
boot() {
	setsid systemd-nspawn --boot --register=no --keep-unit --machine="$MACHINE" --directory="$ROOT" \
		--bind=/dev/fuse --capability=CAP_SYS_ADMIN --private-network --link-journal=no \
		</dev/null >>"$RUN/console.log" 2>&1 &
	NSPAWN_PID=$!
	INIT_PID=
	local c end=$((SECONDS + 30))
	while ((SECONDS < end)) && [[ -z $INIT_PID ]]; do
		kill -0 "$NSPAWN_PID" 2>/dev/null || break
		for c in $(pgrep -P "$NSPAWN_PID" || true); do
			# The container's init is nspawn's child that is PID 1 in its namespace.
			if [[ $(awk '/^NSpid:/{print $NF}' "/proc/$c/status" 2>/dev/null) == 1 ]]; then
				INIT_PID=$c
			fi
		done
		[[ -n $INIT_PID ]] || sleep 0.2
	done
	if [[ -z $INIT_PID ]]; then
		BOOT_STATE="no init process (nspawn: $(tail -3 "$RUN/console.log" | tr '\n' ' '))"
		return 1
	fi
	# Until its systemd listens, systemctl can't connect: ask again.
	end=$((SECONDS + 90))
	while :; do
		BOOT_STATE=$(cin 90 'timeout 85 systemctl is-system-running --wait' 2>&1 || true)
		[[ $BOOT_STATE == *'Failed to connect'* ]] && ((SECONDS < end)) && kill -0 "$INIT_PID" 2>/dev/null || break
		sleep 0.3
	done
	case $BOOT_STATE in
	running) return 0 ;;
	degraded)
		BOOT_STATE="degraded ($(cin 20 'systemctl --failed --no-legend --plain | cut -d" " -f1 | tr "\n" " "'))"
		return 0
		;;
	esac
	return 1
}

note "booting the container ($MACHINE) on $ROOT"
t0=$SECONDS
boot || fatal boot "the container did not come up: $BOOT_STATE; console: $LOG_DIR/console.log"
note "container up in $((SECONDS - t0)) s: init pid $INIT_PID, system $BOOT_STATE, $(cin 10 'systemctl --version | head -1')"

# --- the helpers every scenario's script starts with ---------------------------

LIB=$(
	cat <<'EOF'
set -u
exec 2>&1
ok()  { printf '@@PASS %s\t%s\n' "$1" "$2"; }
bad() { printf '@@FAIL %s\t%s\n' "$1" "$2"; }
U() { printf 'dsmount@%s.service' "$(systemd-escape --path "$1")"; }
prop() { systemctl show -P "$2" "$1"; }
now_us() { echo "${EPOCHREALTIME/./}"; }
secs() { # microseconds -> seconds, to the millisecond
	local d=$1 s=; ((d < 0)) && { s=-; d=$((-d)); }
	printf '%s%d.%03d' "$s" $((d / 1000000)) $(((d % 1000000) / 1000))
}
since() { secs $(($(now_us) - $1)); }
nmounts() { awk -v m="$1" '$5 == m' /proc/self/mountinfo | wc -l; }
fstype() { awk -v m="$1" '$5 == m { for (i = 7; $i != "-"; i++); t = $(i + 1) } END { print t }' /proc/self/mountinfo; }
# verify MP: every file of /srv/data under MP, with the source's sha256.
verify() {
	local mp=$1 want got out
	want=$(wc -l </srv/data.sha256)
	got=$(cd "$mp" 2>/dev/null && timeout 30 find . -type f 2>/dev/null | wc -l)
	if [[ $got != "$want" ]]; then
		echo "$mp: ${got:-0} files, want $want ($(timeout 5 stat -c %F "$mp" 2>&1))"
		return 1
	fi
	if ! out=$(cd "$mp" && timeout 60 sha256sum --quiet -c /srv/data.sha256 2>&1); then
		echo "$mp: sha256 differs: $(head -2 <<<"$out" | tr '\n' ' ')"
		return 1
	fi
	echo "$mp: all $want files match the source's sha256"
}
wait_until() { # SECONDS CMD...: polls CMD every 0.2 s
	local end=$(($(now_us) + $1 * 1000000))
	shift
	until "$@" >/dev/null 2>&1; do
		(($(now_us) < end)) || return 1
		sleep 0.2
	done
}
is_active() { [[ $(prop "$1" ActiveState) == active ]]; }
is_settled() { [[ $(prop "$1" ActiveState) =~ ^(inactive|failed)$ ]]; }
cursor() { journalctl -q -n 1 -o export | sed -n 's/^__CURSOR=//p'; }
jsince() { journalctl -q --no-pager -o short-precise --after-cursor="$1" "${@:2}"; }
jtail() { journalctl -q --no-pager -o short-precise -n "${2:-8}" -u "$1" | sed 's/^/    journal: /'; }
envfile_for() {
	case $ENVFILE_NAMING in
	path) echo "/etc/dsmount$1.env" ;;
	*) echo "/etc/dsmount/$(systemd-escape --path "$1").env" ;;
	esac
}
write_env() { # MOUNTPOINT LINE...
	local f
	f=$(envfile_for "$1")
	shift
	mkdir -p "$(dirname "$f")"
	printf '%s\n' "$@" >"$f"
}
# settle UNIT [MOUNTPOINT]: stopped, failure state reset, nothing left
# mounted at MOUNTPOINT, whatever state it was in.
settle() {
	timeout 20 systemctl stop "$1" >/dev/null 2>&1 || {
		systemctl kill -s KILL "$1" >/dev/null 2>&1
		wait_until 10 is_settled "$1"
	}
	systemctl reset-failed "$1" >/dev/null 2>&1
	if [[ -n ${2:-} ]]; then
		while (($(nmounts "$2") > 0)); do umount -l "$2" || break; done
	fi
	return 0
}
# ensure_active MOUNTPOINT: the unit of MOUNTPOINT active, started (with
# the mountpoint made first) if it isn't.
ensure_active() {
	local u
	u=$(U "$1")
	is_active "$u" && (($(nmounts "$1") == 1)) && return 0
	settle "$u" "$1"
	mkdir -p "$1"
	timeout 30 systemctl start "$u" >/dev/null 2>&1
	is_active "$u"
}
EOF
)

# scenario TITLE TIMEOUT "ID..." SCRIPT: runs SCRIPT (after LIB) in the
# container, streaming its output: @@PASS/@@FAIL lines are checks, the rest
# is evidence. A check of ID that the script never reported fails.
scenario() {
	local title=$1 t=$2 ids=$3 script=$4 line id ev seen=" " rc=
	echo
	note "== $title"
	while IFS= read -r line; do
		case $line in
		'@@PASS '* | '@@FAIL '*)
			id=${line#@@???? }
			ev=${id#*$'\t'}
			id=${id%%$'\t'*}
			report "${line:2:4}" "$id" "$ev"
			seen+="$id "
			;;
		'@@RC '*) rc=${line#@@RC } ;;
		*) printf '      %s\n' "$line" ;;
		esac
	done < <(
		cin "$t" "$LIB"$'\n'"$script"
		echo "@@RC $?"
	)
	for id in $ids; do
		if [[ $seen != *" $id "* ]]; then
			if [[ $rc == 124 || $rc == 137 ]]; then
				report FAIL "$id" "not reached: the scenario's script timed out after ${t}s"
			else
				report FAIL "$id" "not reached: the scenario's script ended with status $rc"
			fi
		fi
	done
}

# --- scenarios ----------------------------------------------------------------

scenario "start (no mountpoint made beforehand) and READY timing" 90 "start ready-timing" "$(
	cat <<'EOF'
mp=/mnt/data u=$(U $mp)
settle "$u" "$mp"
rm -rf "$mp"
write_env "$mp" DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/dsmount-a
systemctl daemon-reload
echo "env file $(envfile_for "$mp"); the unit's EnvironmentFiles: $(prop "$u" EnvironmentFiles | paste -sd ';')"

# A tight poller timestamps every attempt to read probe.txt through the
# mount, with bash builtins only (no fork per attempt).
rm -f /run/e2e-poller.stop
poller() {
	exec 2>/dev/null
	local want line t0 t1 lf0=0 lf1=0 n=0 end=$(($(now_us) + 40000000))
	want=$(</srv/data/probe.txt)
	while :; do
		t0=${EPOCHREALTIME/./}
		if IFS= read -r line <"$mp/probe.txt" && [[ $line == "$want" ]]; then
			t1=${EPOCHREALTIME/./}
			echo "ok $t0 $t1 $lf0 $lf1 $n"
			return
		fi
		lf0=$t0 lf1=${EPOCHREALTIME/./} n=$((n + 1))
		if ((lf1 > end)) || [[ -e /run/e2e-poller.stop ]]; then
			echo "none 0 0 $lf0 $lf1 $n"
			return
		fi
	done
}
poller >/run/e2e-poller.out &
pp=$!
sleep 0.3
t0=$(now_us)
out=$(timeout 30 systemctl start "$u" 2>&1)
rc=$?
dt=$(since "$t0")
for _ in $(seq 50); do kill -0 $pp 2>/dev/null || break; sleep 0.1; done
touch /run/e2e-poller.stop
wait $pp
read -r pres ok0 ok1 lf0 lf1 n </run/e2e-poller.out

st=$(prop "$u" ActiveState)/$(prop "$u" SubState)
v=$(verify "$mp")
vrc=$?
if [[ $st == active/running && $vrc == 0 && $(nmounts "$mp") == 1 && $(fstype "$mp") == fuse.dsmount ]]; then
	ok start "systemctl start returned in ${dt}s (rc $rc), $st, $mp made by the unit; $v"
else
	[[ -n $out ]] && echo "systemctl start: $out"
	jtail "$u" 10
	bad start "systemctl start rc $rc after ${dt}s; $st; mounts at $mp: $(nmounts "$mp"); $v"
fi

path=$(busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager GetUnit s "$u" 2>/dev/null | awk '{print $2}' | tr -d '"')
A=$(busctl get-property org.freedesktop.systemd1 "$path" org.freedesktop.systemd1.Unit ActiveEnterTimestamp 2>/dev/null | awk '{print $2}')
A=${A:-0}
echo "poller: $n failed attempts; last failed [$lf0, $lf1]; first served [$ok0, $ok1]; ActiveEnterTimestamp $A (µs, realtime)"
if ((A == 0)); then
	bad ready-timing "the unit never became active (poller: ${pres} after $n failed attempts)"
elif [[ $pres != ok ]]; then
	bad ready-timing "the unit became active but no read through $mp succeeded within 5 s after that"
elif ((lf0 > A)); then
	bad ready-timing "a read through the mount failed $(secs $((lf0 - A)))s AFTER the unit became active (READY=1 before the mount served)"
elif ((ok0 < A && ok1 - A > 200000)); then
	bad ready-timing "a read begun before the unit became active only completed $(secs $((ok1 - A)))s after it (READY=1 before the mount served)"
else
	# The mount began serving somewhere in [lf0, ok1]: after the last
	# failed read began, before the first good one ended.
	ok ready-timing "no read failed once the unit was active; after systemctl start: last failed read began +$(secs $((lf0 - t0)))s, unit active +$(secs $((A - t0)))s, first good read +$(secs $((ok0 - t0)))s..+$(secs $((ok1 - t0)))s (the mount began serving between +$(secs $((lf0 - t0)))s and +$(secs $((ok1 - t0)))s)"
fi
EOF
)"

scenario "systemctl restart x5" 240 "restart-x5 restart-journal" "$(
	cat <<'EOF'
mp=/mnt/data u=$(U $mp)
ensure_active "$mp" || echo "note: the unit was not active; started it with $mp made beforehand: $(prop "$u" ActiveState)"
# systemd refuses a 6th start within 10 s (StartLimitBurst=5,
# StartLimitIntervalSec=10s by default) and restarts count: with the start
# just before, 5 quick restarts would be 6. Reset the counter, so that
# what is tested is the 5 restarts.
systemctl reset-failed "$u"
echo "start-rate counter reset (systemd's default StartLimitBurst=5 per StartLimitIntervalSec=10s counts restarts too)"
c=$(cursor)
good=0
for i in 1 2 3 4 5; do
	t0=$(now_us)
	out=$(timeout 30 systemctl restart "$u" 2>&1)
	rc=$?
	dt=$(since "$t0")
	st=$(prop "$u" ActiveState)
	v=$(verify "$mp")
	vrc=$?
	n=$(nmounts "$mp")
	echo "restart $i: rc $rc in ${dt}s, $st, pid $(prop "$u" MainPID), $n mount(s) at $mp; $v"
	[[ $rc == 0 && $st == active && $vrc == 0 && $n == 1 ]] && good=$((good + 1))
	[[ $rc == 0 ]] || { echo "  systemctl: $out"; jtail "$u" 6; }
done
if ((good == 5)); then
	ok restart-x5 "5 of 5 restarts active with one mount and every byte right (NRestarts $(prop "$u" NRestarts))"
else
	bad restart-x5 "$good of 5 restarts active with one mount and every byte right"
fi
lines=$(jsince "$c" -u "$u" | grep -E 'umount(\[[0-9]+\])?: .*(not mounted|no mount point specified)')
if [[ -z $lines ]]; then
	ok restart-journal "no 'umount: ... not mounted' in the journal over the 5 restarts"
else
	sed 's/^/    journal: /' <<<"$lines" | head -5
	bad restart-journal "$(wc -l <<<"$lines") 'umount: ... not mounted' lines in the journal over 5 restarts"
fi
EOF
)"

scenario "stop and restart while a file is open" 240 \
	"busy-stop-time busy-stop-inactive busy-stop-lazy-logged busy-stop-no-dead-mount busy-start-again busy-restart-time busy-restart-active busy-restart-no-dead-mount" "$(
		cat <<'EOF'
mp=/mnt/data u=$(U $mp)
ensure_active "$mp" || echo "note: the unit is not active: $(prop "$u" ActiveState)"
f=$mp/big2.bin
holder() { # the busy reader: an open file, 5 s
	bash -c 'exec 3<"$1"; sleep 5' holder "$f" >/dev/null 2>&1 &
	hp=$!
	sleep 0.5
	echo "holder $hp has fd 3 -> $(readlink /proc/$hp/fd/3 2>&1)"
}
wait_holder() {
	for _ in $(seq 100); do kill -0 $hp 2>/dev/null || break; sleep 0.1; done
	kill -0 $hp 2>/dev/null && kill -KILL $hp
	wait $hp 2>/dev/null
}
dead() { stat "$mp" 2>&1 | grep -q 'Transport endpoint is not connected'; }

# stop while busy
holder
c=$(cursor)
t0=$(now_us)
out=$(timeout 20 systemctl stop "$u" 2>&1)
rc=$?
dt=$(since "$t0")
if [[ $rc == 0 ]] && (($(now_us) - t0 <= 10000000)); then
	ok busy-stop-time "systemctl stop with a file open returned in ${dt}s"
else
	bad busy-stop-time "systemctl stop with a file open: rc $rc after ${dt}s (want done within 10 s)${out:+: $out}"
fi
wait_until 10 is_settled "$u"
st=$(prop "$u" ActiveState) res=$(prop "$u" Result)
if [[ $st == inactive ]]; then
	ok busy-stop-inactive "ActiveState=$st Result=$res"
else
	jtail "$u" 10
	bad busy-stop-inactive "ActiveState=$st Result=$res (want inactive, not failed)"
fi
# The daemon serving the unit's mount unmounts it, and says so in its log
# (the cache dir's dsmount.log); the unit's journal has the rest.
lazy=$( (jsince "$c" -u "$u"; tail -n 40 /var/cache/dsmount-a/dsmount.log 2>/dev/null) | grep -iE 'lazy|lazily|detach' | head -3)
if [[ -n $lazy ]]; then
	ok busy-stop-lazy-logged "$(head -1 <<<"$lazy" | cut -c1-300)"
else
	jsince "$c" -u "$u" | tail -8 | sed 's/^/    journal: /'
	bad busy-stop-lazy-logged "no line of the unit's journal or the daemon's log mentions a lazy detach"
fi
wait_holder
s=$(stat -c %F "$mp" 2>&1)
n=$(nmounts "$mp")
if ! dead && ((n == 0)); then
	ok busy-stop-no-dead-mount "after the holder exited: stat $mp: $s; mounts at $mp: $n"
else
	bad busy-stop-no-dead-mount "after the holder exited: stat $mp: $s; mounts at $mp: $n"
fi
settle "$u" "$mp" # whatever the stop left, so the start is tested alone
out=$(timeout 30 systemctl start "$u" 2>&1)
rc=$?
v=$(verify "$mp")
vrc=$?
if [[ $rc == 0 ]] && is_active "$u" && ((vrc == 0)); then
	ok busy-start-again "systemctl start after the busy stop: active; $v"
else
	jtail "$u" 8
	bad busy-start-again "systemctl start after the busy stop: rc $rc, $(prop "$u" ActiveState); $v"
fi

# restart while busy
ensure_active "$mp" >/dev/null
holder
c=$(cursor)
t0=$(now_us)
out=$(timeout 20 systemctl restart "$u" 2>&1)
rc=$?
dt=$(since "$t0")
if [[ $rc == 0 ]] && (($(now_us) - t0 <= 10000000)); then
	ok busy-restart-time "systemctl restart with a file open returned in ${dt}s"
else
	bad busy-restart-time "systemctl restart with a file open: rc $rc after ${dt}s (want done within 10 s)${out:+: $out}"
fi
v=$(verify "$mp")
vrc=$?
if is_active "$u" && ((vrc == 0)) && (($(nmounts "$mp") == 1)); then
	ok busy-restart-active "active (pid $(prop "$u" MainPID)), one mount at $mp; $v"
else
	jsince "$c" -u "$u" | tail -10 | sed 's/^/    journal: /'
	bad busy-restart-active "$(prop "$u" ActiveState)/$(prop "$u" SubState), mounts at $mp: $(nmounts "$mp"); $v"
fi
wait_holder
v=$(verify "$mp")
vrc=$?
if ! dead && is_active "$u" && ((vrc == 0)); then
	ok busy-restart-no-dead-mount "after the holder exited: $(prop "$u" ActiveState), $v"
else
	bad busy-restart-no-dead-mount "after the holder exited: stat $mp: $(stat -c %F "$mp" 2>&1); $(prop "$u" ActiveState); $v"
fi
EOF
	)"

scenario "kill -9 (Restart=on-failure)" 90 "kill9-back" "$(
	cat <<'EOF'
mp=/mnt/data u=$(U $mp)
ensure_active "$mp" || echo "note: the unit is not active: $(prop "$u" ActiveState)"
old=$(prop "$u" MainPID) nr0=$(prop "$u" NRestarts)
t0=$(now_us)
systemctl kill -s KILL "$u"
back=
while (($(now_us) - t0 < 30000000)); do
	pid=$(prop "$u" MainPID)
	if is_active "$u" && [[ $pid != 0 && $pid != "$old" ]] && v=$(verify "$mp"); then
		back=$(now_us)
		break
	fi
	sleep 0.25
done
if [[ -n $back ]] && ((back - t0 <= 15000000)); then
	ok kill9-back "back and serving $(secs $((back - t0)))s after SIGKILL (pid $old -> $pid, NRestarts $nr0 -> $(prop "$u" NRestarts)); $v"
else
	jtail "$u" 12
	bad kill9-back "${back:+back only after $(secs $((back - t0)))s}${back:-not back within 30 s}: $(prop "$u" ActiveState)/$(prop "$u" SubState), NRestarts $nr0 -> $(prop "$u" NRestarts); $(verify "$mp")"
	settle "$u" "$mp" # so that no restart loop runs on under the next scenarios
fi
EOF
)"

scenario "two instances on one cache dir" 200 "two-active two-no-restarts two-stop-b two-start-b two-stop-a" "$(
	cat <<'EOF'
ua=$(U /mnt/a) ub=$(U /mnt/b)
settle "$ua" /mnt/a
settle "$ub" /mnt/b
mkdir -p /mnt/a /mnt/b
write_env /mnt/a DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/shared
write_env /mnt/b DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/shared
c=$(cursor)
ra=$(timeout 30 systemctl start "$ua" 2>&1; echo "rc $?")
tb=$(now_us)
rb=$(timeout 30 systemctl start "$ub" 2>&1; echo "rc $?")
pa=$(prop "$ua" MainPID) pb=$(prop "$ub" MainPID)
va=$(verify /mnt/a); vra=$?
vb=$(verify /mnt/b); vrb=$?
echo "start a: $(tail -1 <<<"$ra"), pid $pa; start b: $(tail -1 <<<"$rb"), pid $pb"
if is_active "$ua" && is_active "$ub" && ((vra == 0 && vrb == 0)); then
	ok two-active "a and b active; $va; $vb"
else
	jsince "$c" -u "$ua" -u "$ub" | tail -12 | sed 's/^/    journal: /'
	bad two-active "a: $(prop "$ua" ActiveState)/$(prop "$ua" SubState), b: $(prop "$ub" ActiveState)/$(prop "$ub" SubState); $va; $vb"
fi
# Watch for ~10 s: b's process must stay (it holds its mount), nothing restarts.
changed=
while (($(now_us) - tb < 10000000)); do
	[[ $(prop "$ub" MainPID) == "$pb" && $(prop "$ua" MainPID) == "$pa" ]] || changed="${changed:-main pids changed: a $pa->$(prop "$ua" MainPID), b $pb->$(prop "$ub" MainPID)}"
	sleep 1
done
na=$(prop "$ua" NRestarts) nb=$(prop "$ub" NRestarts)
if [[ $na == 0 && $nb == 0 && -z $changed ]] && is_active "$ua" && is_active "$ub" && [[ $pb != 0 ]] && kill -0 "$pb" 2>/dev/null; then
	ok two-no-restarts "over 10 s: NRestarts a=$na b=$nb, both active, b's process $pb alive"
else
	jsince "$c" -u "$ua" -u "$ub" | grep -vE 'Started|Starting' | tail -10 | sed 's/^/    journal: /'
	bad two-no-restarts "over 10 s: NRestarts a=$na b=$nb; a $(prop "$ua" ActiveState)/$(prop "$ua" SubState), b $(prop "$ub" ActiveState)/$(prop "$ub" SubState) (MainPID $(prop "$ub" MainPID)); ${changed:-pids unchanged}"
fi
jsince "$c" -u "$ua" -u "$ub" | grep -oE 'daemon_pid=[0-9]+' | sort | uniq -c | sed 's/^/    journal: /'

# stop b: a keeps serving, /mnt/b is unmounted
out=$(timeout 20 systemctl stop "$ub" 2>&1)
rc=$?
va=$(verify /mnt/a); vra=$?
n=$(nmounts /mnt/b)
if [[ $rc == 0 ]] && is_active "$ua" && ((vra == 0 && n == 0)); then
	ok two-stop-b "stop b: b $(prop "$ub" ActiveState), a active; $va; mounts at /mnt/b: $n"
else
	bad two-stop-b "stop b: rc $rc; b $(prop "$ub" ActiveState), a $(prop "$ua" ActiveState); $va; mounts at /mnt/b: $n"
fi
settle "$ub" /mnt/b
out=$(timeout 30 systemctl start "$ub" 2>&1)
rc=$?
vb=$(verify /mnt/b); vrb=$?
if [[ $rc == 0 ]] && is_active "$ub" && ((vrb == 0)); then
	ok two-start-b "start b again: active (pid $(prop "$ub" MainPID)); $vb"
else
	bad two-start-b "start b again: rc $rc, $(prop "$ub" ActiveState)/$(prop "$ub" SubState); $vb"
fi

# stop a, the instance that started the daemon: b keeps serving
ensure_active /mnt/b >/dev/null
echo "before stopping a: a pid $(prop "$ua" MainPID), b pid $(prop "$ub" MainPID), b NRestarts $(prop "$ub" NRestarts)"
c=$(cursor)
t0=$(now_us)
out=$(timeout 20 systemctl stop "$ua" 2>&1)
rc=$?
echo "stop a: rc $rc in $(since "$t0")s, a $(prop "$ua" ActiveState)"
back=
while (($(now_us) - t0 < 25000000)); do
	if is_active "$ub" && (($(nmounts /mnt/b) == 1)) && vb=$(verify /mnt/b); then
		back=$(now_us)
		break
	fi
	sleep 0.25
done
n=$(nmounts /mnt/a)
if [[ -n $back ]] && ((back - t0 <= 20000000 && n == 0)); then
	ok two-stop-a "b serving again $(secs $((back - t0)))s after stopping a (b pid $(prop "$ub" MainPID), NRestarts $(prop "$ub" NRestarts)); mounts at /mnt/a: $n; $vb"
else
	jsince "$c" -u "$ua" -u "$ub" | tail -12 | sed 's/^/    journal: /'
	bad two-stop-a "${back:+b back after $(secs $((back - t0)))s}${back:-b not serving within 25 s}: b $(prop "$ub" ActiveState)/$(prop "$ub" SubState), NRestarts $(prop "$ub" NRestarts); mounts at /mnt/a: $n, at /mnt/b: $(nmounts /mnt/b); $(verify /mnt/b)"
fi
settle "$ua" /mnt/a
settle "$ub" /mnt/b
EOF
)"

scenario "one instance's stop, restart or kill -9 leaves another's reads alone" 420 "indep-a-cycles indep-b-reads indep-fstab-reads crash-back daemon-exit-new" "$(
	cat <<'EOF'
# reader MP LOG STOP: reads every file of /srv/data under MP, over and
# over until STOP exists, each read checked against the source's sha256
# and its cached pages dropped after (iflag=nocache), so that the next
# pass asks the daemon again. One line per read: "TIME ok|FAIL FILE".
reader() {
	local mp=$1 log=$2 stop=$3 sum f got
	: >"$log"
	while [[ ! -e $stop ]]; do
		while read -r sum f; do
			[[ -e $stop ]] && break
			f=${f#./}
			got=$(dd if="$mp/$f" iflag=nocache bs=1M status=none 2>&1 | sha256sum)
			if [[ ${got%% *} == "$sum" ]]; then echo "$(now_us) ok $f"; else echo "$(now_us) FAIL $f"; fi >>"$log"
		done </srv/data.sha256
	done
}
# reads LOG: "N reads, M failed" and the first failures.
reads() {
	local n m
	n=$(wc -l <"$1") m=$(grep -c ' FAIL ' "$1")
	echo "$n reads, $m failed$( ((m > 0)) && echo " (first: $(grep -m3 ' FAIL ' "$1" | tr '\n' ' '))")"
}
nfailed() { grep -c ' FAIL ' "$1"; }
serves() { cmp -s "$1/probe.txt" /srv/data/probe.txt; }
# cycle UNIT MP: stop+start, restart, and kill -9 of the main process
# (Restart=on-failure brings it back), five times each; prints one line
# per step that did not end with the unit active and serving. reset-failed
# before each start clears systemd's start rate limit (5 in 10 s), which
# a person would not reach.
cycle() {
	local u=$1 mp=$2 i nr
	for i in 1 2 3 4 5; do
		timeout 20 systemctl stop "$u" || echo "stop $i: rc $?"
		systemctl reset-failed "$u" 2>/dev/null
		timeout 30 systemctl start "$u" || echo "start $i: rc $?"
		is_active "$u" && serves "$mp" || echo "stop+start $i: $(prop "$u" ActiveState), serves: $(serves "$mp" && echo yes || echo no)"
	done
	for i in 1 2 3 4 5; do
		systemctl reset-failed "$u" 2>/dev/null
		timeout 30 systemctl restart "$u" || echo "restart $i: rc $?"
		is_active "$u" && serves "$mp" || echo "restart $i: $(prop "$u" ActiveState), serves: $(serves "$mp" && echo yes || echo no)"
	done
	for i in 1 2 3 4 5; do
		systemctl reset-failed "$u" 2>/dev/null # NRestarts too
		nr=$(prop "$u" NRestarts)
		systemctl kill -s KILL --kill-whom=main "$u"
		wait_until 30 eval '(($(prop "$u" NRestarts) > nr))' && wait_until 30 is_active "$u" && wait_until 10 serves "$mp" ||
			echo "kill -9 $i: NRestarts $nr -> $(prop "$u" NRestarts), $(prop "$u" ActiveState), serves: $(serves "$mp" && echo yes || echo no)"
	done
}

ua=$(U /mnt/ia) ub=$(U /mnt/ib)
settle "$ua" /mnt/ia
settle "$ub" /mnt/ib
mkdir -p /mnt/ia /mnt/ib
write_env /mnt/ia DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/indep
write_env /mnt/ib DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/indep
c=$(cursor)
# a first: where a's process is the daemon, stopping a takes b down.
timeout 30 systemctl start "$ua"
timeout 30 systemctl start "$ub"
pb=$(prop "$ub" MainPID)
echo "a $(prop "$ua" ActiveState) (pid $(prop "$ua" MainPID)), b $(prop "$ub" ActiveState) (pid $pb); the daemon: pid $(dsmount stats /mnt/ib --json 2>/dev/null | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)"
rm -f /run/e2e-reader.stop
reader /mnt/ib /run/e2e-reader-b.log /run/e2e-reader.stop &
rp=$!
t0=$(now_us)
trouble=$(cycle "$ua" /mnt/ia)
touch /run/e2e-reader.stop
wait "$rp"
echo "a cycled 5x stop+start, 5x restart, 5x kill -9 in $(since "$t0")s; b's reader: $(reads /run/e2e-reader-b.log)"
if [[ -z $trouble ]]; then
	ok indep-a-cycles "a active and serving after each of 15 stops, restarts and kills (NRestarts $(prop "$ua" NRestarts))"
else
	bad indep-a-cycles "$(head -4 <<<"$trouble" | tr '\n' ';')"
fi
n=$(wc -l </run/e2e-reader-b.log) m=$(nfailed /run/e2e-reader-b.log)
if ((m == 0 && n >= 300)) && is_active "$ub" && [[ $(prop "$ub" NRestarts) == 0 && $(prop "$ub" MainPID) == "$pb" ]]; then
	ok indep-b-reads "b's reader while a cycled: $(reads /run/e2e-reader-b.log); b active throughout, NRestarts 0, pid $pb unchanged"
else
	jsince "$c" -u "$ub" | tail -8 | sed 's/^/    journal: /'
	bad indep-b-reads "b's reader while a cycled: $(reads /run/e2e-reader-b.log); b $(prop "$ub" ActiveState)/$(prop "$ub" SubState), NRestarts $(prop "$ub" NRestarts), pid $pb -> $(prop "$ub" MainPID)"
fi

# The daemon killed, three times: every instance's mount comes back, each
# unit's own process making it again (no restart by systemd). The time
# until both serve the right bytes again, each time.
ensure_active /mnt/ia >/dev/null
nra=$(prop "$ua" NRestarts) nrb=$(prop "$ub" NRestarts)
c=$(cursor)
times= fails= first=
for k in 1 2 3; do
	dpid=$(dsmount stats /mnt/ib --json 2>/dev/null | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)
	first=${first:-$dpid}
	t0=$(now_us)
	kill -KILL "$dpid"
	back=
	while (($(now_us) - t0 < 30000000)); do
		if serves /mnt/ia && serves /mnt/ib; then
			back=$(now_us)
			break
		fi
		sleep 0.05
	done
	npid=$(dsmount stats /mnt/ib --json 2>/dev/null | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)
	if [[ -n $back && -n $npid && $npid != "$dpid" ]]; then
		times+="$(secs $((back - t0)))s "
	else
		fails+="kill $k of daemon $dpid: not both serving within 30 s (daemon now ${npid:-none}); "
	fi
done
va=$(verify /mnt/ia); vra=$?
vb=$(verify /mnt/ib); vrb=$?
if [[ -z $fails ]] && ((vra == 0 && vrb == 0)) && [[ $(prop "$ua" NRestarts) == "$nra" && $(prop "$ub" NRestarts) == "$nrb" ]] && is_active "$ua" && is_active "$ub"; then
	ok crash-back "daemon killed 3 times (first pid $first): both mounts serve again after ${times% } (now daemon $npid; NRestarts a $nra -> $(prop "$ua" NRestarts), b $nrb -> $(prop "$ub" NRestarts)); $va; $vb"
else
	jsince "$c" -u "$ua" -u "$ub" | tail -10 | sed 's/^/    journal: /'
	bad crash-back "daemon killed 3 times: back after: ${times:-never}; ${fails}NRestarts a $nra -> $(prop "$ua" NRestarts), b $nrb -> $(prop "$ub" NRestarts); a $(prop "$ua" ActiveState), b $(prop "$ub" ActiveState); $va; $vb"
fi

# Its last mount gone, the daemon exits; the next mount starts another.
dpid=$npid
settle "$ua" /mnt/ia
settle "$ub" /mnt/ib
gone=no
wait_until 15 eval '! kill -0 "$dpid" 2>/dev/null' && gone=yes
timeout 30 systemctl start "$ua"
npid=$(dsmount stats /mnt/ia --json 2>/dev/null | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)
dcg=$(grep -m1 '^0::' "/proc/$npid/cgroup" 2>/dev/null | cut -d: -f3)
va=$(verify /mnt/ia); vra=$?
if [[ $gone == yes && -n $npid && $npid != "$dpid" && $dcg == *dsmount-daemon-*.scope ]] && ((vra == 0)); then
	ok daemon-exit-new "both units stopped: daemon $dpid exited; a started again: new daemon $npid in $dcg; $va"
else
	bad daemon-exit-new "daemon $dpid exited with no mount left: $gone; a started again: daemon ${npid:-none} in '${dcg:-?}'; $va"
fi
settle "$ua" /mnt/ia

# b an fstab mount, a a dsmount@ unit, on one cache dir; a first.
line='/srv/data /mnt/fb fuse.dsmount cache_dir=/var/cache/indep2,_netdev,nofail 0 0'
grep -qxF "$line" /etc/fstab || echo "$line" >>/etc/fstab
systemctl daemon-reload
ua=$(U /mnt/fa)
settle "$ua" /mnt/fa
mkdir -p /mnt/fa /mnt/fb
write_env /mnt/fa DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/indep2
timeout 30 systemctl start "$ua"
timeout 30 mount /mnt/fb
echo "a $(prop "$ua" ActiveState), /mnt/fb: $(nmounts /mnt/fb) mount, mnt-fb.mount $(prop mnt-fb.mount ActiveState)"
rm -f /run/e2e-reader.stop
reader /mnt/fb /run/e2e-reader-fb.log /run/e2e-reader.stop &
rp=$!
t0=$(now_us)
trouble=$(cycle "$ua" /mnt/fa)
touch /run/e2e-reader.stop
wait "$rp"
n=$(wc -l </run/e2e-reader-fb.log) m=$(nfailed /run/e2e-reader-fb.log)
echo "a cycled in $(since "$t0")s${trouble:+; trouble of a: $(head -3 <<<"$trouble" | tr '\n' ';')}"
if ((m == 0 && n >= 300)) && (($(nmounts /mnt/fb) == 1)) && [[ $(prop mnt-fb.mount ActiveState) == active ]]; then
	ok indep-fstab-reads "the fstab mount's reader while a (dsmount@) cycled: $(reads /run/e2e-reader-fb.log); mnt-fb.mount active throughout"
else
	bad indep-fstab-reads "the fstab mount's reader while a cycled: $(reads /run/e2e-reader-fb.log); mounts at /mnt/fb: $(nmounts /mnt/fb), mnt-fb.mount $(prop mnt-fb.mount ActiveState)"
fi
settle "$ua" /mnt/fa
timeout 20 umount /mnt/fb
grep -vxF "$line" /etc/fstab >/etc/fstab.new && mv /etc/fstab.new /etc/fstab
systemctl daemon-reload
EOF
)"

scenario "bad settings" 150 "bad-size-failed bad-size-journal misspelled-warning daemon-true-no-forkbomb daemon-true-clean" "$(
	cat <<'EOF'
# DSMOUNT_CACHE_SIZE=bogus: fails once, for good, naming the variable
mp=/mnt/bad u=$(U $mp)
settle "$u" "$mp"
mkdir -p "$mp"
write_env "$mp" DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/dsmount-bad DSMOUNT_CACHE_SIZE=bogus
c=$(cursor)
t0=$(now_us)
timeout 20 systemctl start "$u" >/dev/null 2>&1
rc=$?
while (($(now_us) - t0 < 12000000)); do sleep 0.5; done
st=$(prop "$u" ActiveState) sub=$(prop "$u" SubState) nr=$(prop "$u" NRestarts) res=$(prop "$u" Result)
if [[ $st == failed && $nr == 0 ]]; then
	ok bad-size-failed "12 s after start (rc $rc): ActiveState=$st SubState=$sub NRestarts=$nr Result=$res"
else
	bad bad-size-failed "12 s after start (rc $rc): ActiveState=$st SubState=$sub NRestarts=$nr Result=$res (want failed, no restarts)"
fi
line=$(jsince "$c" -u "$u" | grep -F DSMOUNT_CACHE_SIZE | head -1)
if [[ -n $line ]]; then
	ok bad-size-journal "$(cut -c1-300 <<<"$line")"
else
	jsince "$c" -u "$u" | grep -v systemd | head -3 | sed 's/^/    journal: /'
	bad bad-size-journal "no journal line of the unit names DSMOUNT_CACHE_SIZE"
fi
settle "$u" "$mp"

# DSMOUNT_CACHESIZE=1G (misspelled): a warning that names it
mp=/mnt/warn u=$(U $mp)
settle "$u" "$mp"
mkdir -p "$mp"
write_env "$mp" DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/dsmount-w DSMOUNT_CACHESIZE=1G
c=$(cursor)
timeout 30 systemctl start "$u" >/dev/null 2>&1
rc=$?
sleep 0.5
line=$(jsince "$c" -u "$u" | grep -F DSMOUNT_CACHESIZE | head -1)
if [[ -n $line ]]; then
	ok misspelled-warning "unit $(prop "$u" ActiveState); $(cut -c1-300 <<<"$line")"
else
	bad misspelled-warning "no journal line of the unit names DSMOUNT_CACHESIZE (start rc $rc, unit $(prop "$u" ActiveState))"
fi
settle "$u" "$mp"

# DSMOUNT_DAEMON=true: no fork bomb; works or fails cleanly
mp=/mnt/dd u=$(U $mp)
settle "$u" "$mp"
mkdir -p "$mp"
write_env "$mp" DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/dsmount-dd DSMOUNT_DAEMON=true
count() { local n; n=$(pgrep -c -x dsmount); echo "${n:-0}"; }
base=$(count)
c=$(cursor)
t0=$(now_us)
systemctl start --no-block "$u"
max=0 aborted=
while (($(now_us) - t0 < 8000000)); do
	n=$(($(count) - base))
	((n > max)) && max=$n
	if ((n > 20)); then
		aborted=1
		systemctl kill -s KILL "$u"
		break
	fi
	sleep 0.2
done
st=$(prop "$u" ActiveState) sub=$(prop "$u" SubState) nr=$(prop "$u" NRestarts)
echo "DSMOUNT_DAEMON=true after $(since "$t0")s: $st/$sub, NRestarts $nr, dsmount processes of it now $(($(count) - base)), at most $max${aborted:+ (stopped early: over 20)}"
if ((max <= 5)); then
	ok daemon-true-no-forkbomb "at most $max dsmount processes of the unit over 8 s"
else
	bad daemon-true-no-forkbomb "$max dsmount processes of the unit${aborted:+ (killed at over 20)}"
fi
v=$(verify "$mp")
vrc=$?
left=$(($(count) - base))
if [[ -z $aborted && $st == active ]] && ((vrc == 0)); then
	ok daemon-true-clean "works: active, $v"
elif [[ -z $aborted && $st == failed && $nr == 0 ]] && ((left == 0 && $(nmounts "$mp") == 0)); then
	ok daemon-true-clean "fails cleanly: failed, NRestarts 0, no process or mount left; $(jsince "$c" -u "$u" | grep -F 'dsmount[' | tail -1 | cut -c1-200)"
else
	jsince "$c" -u "$u" | tail -6 | sed 's/^/    journal: /'
	bad daemon-true-clean "$st/$sub, NRestarts $nr, $left dsmount processes left, mounts at $mp: $(nmounts "$mp"); $v"
fi
settle "$u" "$mp"
echo "after stopping it: $(($(count) - base)) dsmount processes of it left"
EOF
)"

scenario "mountpoint with '-'" 60 "dash-active" "$(
	cat <<'EOF'
mp=/mnt/my-data u=$(U $mp)
settle "$u" "$mp"
mkdir -p "$mp"
write_env "$mp" DSMOUNT_SOURCE=/srv/data DSMOUNT_CACHE_DIR=/var/cache/dsmount-dash
echo "unit $u, env file $(envfile_for "$mp"); the unit's EnvironmentFiles: $(prop "$u" EnvironmentFiles | paste -sd ';')"
out=$(timeout 30 systemctl start "$u" 2>&1)
rc=$?
v=$(verify "$mp")
vrc=$?
if [[ $rc == 0 ]] && is_active "$u" && ((vrc == 0)); then
	ok dash-active "$u with $(envfile_for "$mp"): active; $v"
else
	jtail "$u" 6
	bad dash-active "$u with $(envfile_for "$mp"): rc $rc, $(prop "$u" ActiveState)/$(prop "$u" SubState) ($(prop "$u" Result)); $v"
fi
settle "$u" "$mp"
EOF
)"

scenario "fstab line, mount -a twice" 90 "fstab-mount fstab-mount-again fstab-source" "$(
	cat <<'EOF'
mp=/mnt/fst
line='/srv/data /mnt/fst fuse.dsmount cache_dir=/var/cache/dsmount-f,_netdev,nofail 0 0'
grep -qxF "$line" /etc/fstab || echo "$line" >>/etc/fstab
mkdir -p "$mp"
systemctl daemon-reload
t0=$(now_us)
out=$(timeout 30 mount -a 2>&1)
rc=$?
v=$(verify "$mp")
vrc=$?
n=$(nmounts "$mp")
if [[ $rc == 0 && $n == 1 ]] && ((vrc == 0)); then
	ok fstab-mount "mount -a: rc 0 in $(since "$t0")s, one mount at $mp; $v"
else
	bad fstab-mount "mount -a: rc $rc${out:+ ($out)}, mounts at $mp: $n; $v"
fi
out=$(timeout 30 mount -a 2>&1)
rc=$?
n=$(nmounts "$mp")
if [[ $rc == 0 && $n == 1 ]]; then
	ok fstab-mount-again "mount -a again: rc 0, still $n mount at $mp"
else
	bad fstab-mount-again "mount -a again: rc $rc${out:+ ($(tr '\n' ' ' <<<"$out"))}, mounts at $mp: $n"
fi
src=$(findmnt -n -o SOURCE "$mp" | head -1)
if [[ $src == /srv/data ]]; then
	ok fstab-source "findmnt SOURCE: $src (as in fstab)"
else
	bad fstab-source "findmnt SOURCE: '$src', fstab says /srv/data (mount -a compares source, root and target to tell what is mounted)"
fi
EOF
)"

# --- reboot -----------------------------------------------------------------

echo
note "== reboot with dsmount@mnt-data enabled and the fstab line in place"
cin 60 "$LIB"$'\n''
for u in $(systemctl list-units --all --plain --no-legend "dsmount@*" | cut -d" " -f1); do
	[[ $u == "$(U /mnt/data)" ]] || settle "$u"
done
ensure_active /mnt/data
systemctl enable "$(U /mnt/data)" 2>&1 | sed "s/^/      /"
grep -F fuse.dsmount /etc/fstab | sed "s/^/      fstab: /"
echo "      before: $(U /mnt/data) $(prop "$(U /mnt/data)" ActiveState), mnt-fst.mount $(prop mnt-fst.mount ActiveState)"
' || true
old_init=$INIT_PID
t0=$SECONDS
cin 15 'systemctl reboot' >/dev/null 2>&1 || true
# nspawn exits with status 133 when the container asks to reboot; a
# systemd-nspawn@.service would start it again, here the harness does.
nspawn_rc=
end=$((SECONDS + 150))
while ((SECONDS < end)); do
	if ! kill -0 "$NSPAWN_PID" 2>/dev/null; then
		wait "$NSPAWN_PID" && nspawn_rc=0 || nspawn_rc=$?
		break
	fi
	sleep 0.5
done
if [[ -z $nspawn_rc ]]; then
	report FAIL reboot-boot "the container did not go down within 150 s of 'systemctl reboot'"
	report FAIL reboot-unit "not reached"
	report FAIL reboot-fstab "not reached"
else
	down=$((SECONDS - t0))
	note "nspawn exited with status $nspawn_rc after $down s$([[ $nspawn_rc == 133 ]] && echo ' (the container asked for a reboot)')"
	INIT_PID=
	t1=$SECONDS
	if boot; then
		report PASS reboot-boot "shut down in ${down}s (nspawn status $nspawn_rc), booted again in $((SECONDS - t1))s: init pid $old_init -> $INIT_PID, system $BOOT_STATE"
		scenario "after the reboot" 90 "reboot-unit reboot-fstab reboot-fstab-scope" "$(
			cat <<'EOF'
u=$(U /mnt/data)
wait_until 30 is_active "$u"
v=$(verify /mnt/data)
vrc=$?
if is_active "$u" && ((vrc == 0)); then
	ok reboot-unit "$u: $(systemctl is-enabled "$u"), active since boot (NRestarts $(prop "$u" NRestarts)); $v"
else
	jtail "$u" 10
	bad reboot-unit "$u: $(systemctl is-enabled "$u"), $(prop "$u" ActiveState)/$(prop "$u" SubState); $v"
fi
wait_until 30 [ "$(prop mnt-fst.mount ActiveState)" = active ]
v=$(verify /mnt/fst)
vrc=$?
if [[ $(prop mnt-fst.mount ActiveState) == active ]] && ((vrc == 0)); then
	ok reboot-fstab "mnt-fst.mount (from fstab) active after boot, SOURCE $(findmnt -n -o SOURCE /mnt/fst | head -1); $v"
else
	jtail mnt-fst.mount 10
	bad reboot-fstab "mnt-fst.mount $(prop mnt-fst.mount ActiveState)/$(prop mnt-fst.mount SubState) ($(prop mnt-fst.mount Result)); $v"
fi
# Not a check: where systemd keeps the fstab mount's daemon, and what it
# says when the mount goes while the daemon still runs.
cg=$(prop mnt-fst.mount ControlGroup)
echo "mnt-fst.mount's cgroup ${cg:-(none)} holds: $(cat "/sys/fs/cgroup/unified$cg/cgroup.procs" 2>/dev/null | while read -r p; do printf '%s(%s) ' "$p" "$(cat /proc/$p/comm 2>/dev/null)"; done)"
dpid=$(dsmount stats /mnt/fst --json 2>/dev/null | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)
dcg=$(grep -m1 '^0::' "/proc/$dpid/cgroup" 2>/dev/null | cut -d: -f3)
c=$(cursor)
timeout 20 umount /mnt/fst
echo "umount /mnt/fst: rc $?"
sleep 2
jsince "$c" | grep -E 'mnt-fst|dsmount' | sed 's/^/    journal: /'
# The daemon a .mount unit's mount.fuse3 started lives in a scope of its
# own, not in the mount unit's cgroup: it serves every mount of its cache
# dir, and stopping that unit must not leave it there.
if [[ $dcg == *dsmount-daemon-*.scope ]] && ! jsince "$c" | grep -q 'remains running after unit stopped'; then
	ok reboot-fstab-scope "the fstab mount's daemon (pid $dpid) ran in $dcg; no 'remains running' at umount"
else
	bad reboot-fstab-scope "the fstab mount's daemon (pid ${dpid:-?}) ran in '${dcg:-?}'$(jsince "$c" | grep -q 'remains running' && echo '; systemd logged remains running after unit stopped')"
fi
EOF
		)"
	else
		report FAIL reboot-boot "shut down in ${down}s (nspawn status $nspawn_rc) but did not come up again: $BOOT_STATE"
		report FAIL reboot-unit "not reached"
		report FAIL reboot-fstab "not reached"
	fi
fi

# --- what systemd said along the way ---------------------------------------------

if [[ -n $INIT_PID ]] && kill -0 "$INIT_PID" 2>/dev/null; then
	echo
	note "== what systemd said about the dsmount units and mounts, all boots (count, message with numbers as N)"
	cin 30 'journalctl -q --no-pager -o cat _PID=1 | grep -E "dsmount|mnt-" | grep -vE "^(Started|Starting|Stopped|Stopping|Mounting|Mounted|Unmounting|Created slice|Removed slice)|Deactivated successfully|Consumed" | sed -E "s/[0-9]+/N/g" | sort | uniq -c | sort -rn | head -25 | sed "s/^/      /"' || true
fi

note "done in $((SECONDS - T_START)) s; the container's journal and console go to $LOG_DIR"
summary
((FAILED == 0))
