#!/usr/bin/env bash
# DSSTNE's MovieLens recipe (samples/movielens/run_movielens_sample.sh) flag for flag on the whole
# of MovieLens 100K, with DSSTNE's own sample config: convert x2, train, predict; then checks that
# every user of ml_ratings has k recommendations in DSSTNE's format, in order, none of them an
# item the user rated (the filter's values are timestamps: they must exclude, not multiply).
# Usage: benchmarks/data/dsstne_recipe.sh [BUILD_DIR] [U.DATA] [EPOCHS]
# (defaults: build, $SPARSENET_DATA_DIR/movielens/ml-100k/u.data or ../shared/data/..., 45).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
data="${2:-${SPARSENET_DATA_DIR:-$root/../shared/data}/movielens/ml-100k/u.data}"
epochs="${3:-45}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
# DSSTNE's convert_ratings.awk output: userId<TAB>movieId,timestamp:... (movies in time order)
sort -n -k1,1 -k4,4 -s "$data" | awk -F'\t' '{ if ($1 != u) { if (u != "") printf "\n";
    printf "%s\t%s,%s", $1, $2, $4; u = $1 } else printf ":%s,%s", $2, $4 } END { printf "\n" }' \
  > ml_ratings
cp "$root/tests/config/dsstne-configs/samples_movielens_config.json" config.json
S="$build/sparsenet"
start=$(date +%s.%N)
"$S" convert -d gl_input -i ml_ratings -o gl_input.nc -f features_input -s samples_input -c -q
"$S" convert -d gl_output -i ml_ratings -o gl_output.nc -f features_output -s samples_input -c -q
t1=$(date +%s.%N)
"$S" train -c config.json -i gl_input.nc -o gl_output.nc -n gl.nc -b 256 -e "$epochs" | tail -1
t2=$(date +%s.%N)
"$S" predict -b 256 -d gl -i features_input -o features_output -k 10 -n gl.nc -f ml_ratings \
  -s recs -r ml_ratings
t3=$(date +%s.%N)
before=$(ls | sort | tr '\n' ' ')
awk -F'\t' 'NR == FNR { n = split($2, e, ":"); for (i = 1; i <= n; i++) { split(e[i], f, ",");
                          seen[$1 "/" f[1]] = 1 } order[NR] = $1; users = NR; next }
  { if ($1 != order[FNR]) { print "line " FNR ": user " $1 ", expected " order[FNR]; bad = 1 }
    if (substr($2, length($2)) != ":") { print "line " FNR ": no trailing colon"; bad = 1 }
    n = split($2, e, ":"); k = 0
    for (i = 1; i <= n; i++) { if (e[i] == "") continue; k++; split(e[i], f, ",")
      if ((($1 "/" f[1]) in seen)) { print "user " $1 ": filtered item " f[1]; bad = 1 } }
    if (k != 10) { print "user " $1 ": " k " items"; bad = 1 } lines = FNR }
  END { if (lines != users) { print lines " lines for " users " users"; bad = 1 }
        if (bad) exit 1; print users " users, 10 recommendations each, none filtered, in order" }' \
  ml_ratings recs
head -2 recs
printf 'files in the run directory: %s\n' "$before"
awk -v a="$start" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {
  printf "convert x2 %.2fs, train (%s epochs) %.2fs, predict %.2fs\n", b - a, "'"$epochs"'", c - b, d - c }'
