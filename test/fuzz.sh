#!/usr/bin/env bash
# Run every Go fuzz test of the repository (every `func Fuzz...`) for a
# while each, one after the other, stopping at the first that fails.
#
#   bash test/fuzz.sh            # 2 minutes each
#   bash test/fuzz.sh 10m        # 10 minutes each
#   bash test/fuzz.sh 30s Order  # only the fuzzers whose name matches Order
#
# FUZZ_PARALLEL (default 1) is the fuzzing workers per fuzzer (go test
# -parallel); FUZZ_MINIMIZE (default 10s) bounds the minimizing of each
# new interesting input, which pauses the fuzzing (the default 60 s would
# eat half of a 2-minute run). A failing input is written under the
# package's testdata/fuzz/<Fuzzer>/ and, from then on, is run by the
# plain `go test` as a seed: commit it with the fix. See docs/fuzzing.md.
set -euo pipefail

dur=${1:-2m}
filter=${2:-.}
par=${FUZZ_PARALLEL:-1}
minimize=${FUZZ_MINIMIZE:-10s}
cd "$(dirname "$0")/.."

# go test -list prints a package's matching names, then its "ok" line.
listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
if ! go test -list '^Fuzz' ./... >"$listing" 2>&1; then
	cat "$listing"
	echo "fuzz.sh: listing the fuzz tests failed (does every package build?)" >&2
	exit 1
fi
fuzzers=()
names=()
while IFS= read -r line; do
	case $line in
	Fuzz*) names+=("$line") ;;
	ok*)
		pkg=$(awk '{print $2}' <<<"$line")
		for n in "${names[@]}"; do
			if [[ $n =~ $filter ]]; then
				fuzzers+=("$pkg $n")
			fi
		done
		names=()
		;;
	esac
done <"$listing"
if [ ${#fuzzers[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz test matches '$filter'" >&2
	exit 1
fi

echo "fuzz.sh: ${#fuzzers[@]} fuzzers, $dur each (-parallel $par)"
start=$SECONDS
i=0
for entry in "${fuzzers[@]}"; do
	read -r pkg name <<<"$entry"
	i=$((i + 1))
	echo "=== [$i/${#fuzzers[@]}] $name ($pkg)"
	log=$(mktemp)
	if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$dur" -fuzzminimizetime "$minimize" -parallel "$par" >"$log" 2>&1; then
		tail -n 40 "$log"
		rm -f "$log"
		dir=$(go list -f '{{.Dir}}' "$pkg")
		echo "fuzz.sh: FAIL: $name ($pkg); the failing input is in ${dir#"$PWD"/}/testdata/fuzz/$name/" >&2
		exit 1
	fi
	grep '^fuzz: elapsed' "$log" | tail -n 1 || true
	rm -f "$log"
done
echo "fuzz.sh: all ${#fuzzers[@]} fuzzers passed ($dur each, $((SECONDS - start)) s in all)"
