#!/usr/bin/env bash
# Replays the bottleneck classifier's regime corpus (slo/bottleneck's
# TestRegimeCorpus) on other draws of the same regimes, the simulator's
# seed set by CORPUS_SEED, and prints one markdown row per regime: for
# each seed the steady snapshots right, the onset in scrape intervals and
# the flaps (class changes in the steady part), as right%/onset/flaps, with
# a * where that replay misses a target (under 95% right, onset over 2,
# more than 1 flap per 10 minutes, a lead-in misread). The rules are tuned
# on seed 11 (the test's own); the other seeds are timelines they were not
# tuned on.
#
# usage: scripts/corpus-seeds.sh [seed ...]   (default: 11 1 2 3 4 5)
#        DIR=/path/to/checkout scripts/corpus-seeds.sh   (another tree)
set -euo pipefail
cd "${DIR:-$(dirname "$0")/..}"
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(11 1 2 3 4 5)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in "${seeds[@]}"; do
	CORPUS_SEED=$s go test -count=1 -v -run 'TestRegimeCorpus' ./slo/bottleneck/ >"$tmp/$s.log" 2>&1 || true
	# rows: | regime | `label` | right% (n/m) | onset | flaps | lead-in misread |
	grep -E '^\s+\| [a-z_0-9]+ \| `' "$tmp/$s.log" | awk -F'|' -v s="$s" '{
		gsub(/ /, "", $2); gsub(/ /, "", $6); gsub(/ /, "", $7)
		split($4, r, "%"); gsub(/ /, "", r[1]); split($4, nm, "[(/)]")
		steady = nm[3] + 0; tenmin = steady * 5 / 600; if (tenmin < 1) tenmin = 1
		bad = (r[1] + 0 < 95 || $5 + 0 < 0 || $5 + 0 > 2 || $6 + 0 > tenmin || $7 + 0 > 0) ? "*" : ""
		printf "%s\t%s\t%s/%d/%s%s\n", $2, s, r[1], $5, $6, bad
	}' >>"$tmp/rows"
done
printf '| regime |'; for s in "${seeds[@]}"; do printf ' seed %s |' "$s"; done; printf '\n|---|'
for _ in "${seeds[@]}"; do printf -- '---|'; done; printf '\n'
awk -F'\t' -v n="${#seeds[@]}" -v list="${seeds[*]}" '
	BEGIN { split(list, order, " ") }
	{ if (!($1 in seen)) { seen[$1] = 1; names[++k] = $1 } cell[$1, $2] = $3 }
	END {
		for (i = 1; i <= k; i++) {
			printf "| %s |", names[i]
			for (j = 1; j <= n; j++) { c = cell[names[i], order[j]]; printf " %s |", (c == "" ? "-" : c) }
			printf "\n"
		}
	}' "$tmp/rows"
for s in "${seeds[@]}"; do
	printf '%s' "seed $s: " >&2
	{ grep -cE 'corpus_test.go:[0-9]+: [a-z_0-9]+: [0-9.]+% of' "$tmp/$s.log" || true; } | tr -d '\n' >&2
	echo " regimes missed a target" >&2
done
