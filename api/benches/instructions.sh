#!/usr/bin/env bash
# Instructions per object of each throughput phase, counted by callgrind (deterministic, unlike
# wall-clock time on a shared machine). Builds the benchmark, runs each phase once on
# $RAYGATE_BENCH_OBJECTS objects (default 1000) under `valgrind --tool=callgrind`, collecting
# only the phase's never-inlined function, and prints the total and the total per object.
# The callgrind files stay in $OUT (default a new temporary directory) for callgrind_annotate.
#
#   api/benches/instructions.sh [path/to/throughput-binary]
set -euo pipefail

objects=${RAYGATE_BENCH_OBJECTS:-1000}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
bench=${1:-}
if [[ -z $bench ]]; then
    bench=$(cargo bench -p raygate-api --bench throughput --no-run --message-format json 2>/dev/null |
        sed -n 's/.*"executable":"\([^"]*throughput[^"]*\)".*/\1/p' | tail -n 1)
fi

# phase (a unique part of its name), function collected, label
phases=(
    "check + sizing (parsed|throughput::check_and_size|check+sizing"
    "parse JSON|throughput::parse|parse JSON"
    "parse YAML|throughput::parse|parse YAML"
    "JSON file|throughput::whole_file|JSON file end to end"
    "YAML file|throughput::whole_file|YAML file end to end"
)
printf '%-24s %15s %12s\n' phase instructions per-object
for phase in "${phases[@]}"; do
    IFS='|' read -r only function label <<<"$phase"
    file=$out/${label// /-}.callgrind
    RAYGATE_BENCH_RUNS=1 RAYGATE_BENCH_OBJECTS=$objects RAYGATE_BENCH_ONLY=$only \
        valgrind --tool=callgrind --toggle-collect="$function" --callgrind-out-file="$file" \
        "$bench" --bench >/dev/null 2>&1
    total=$(sed -n 's/^summary: \([0-9]*\).*/\1/p; s/^totals: \([0-9]*\).*/\1/p' "$file" | head -n 1)
    printf '%-24s %15d %12d\n' "$label" "$total" $((total / objects))
done
echo "callgrind files: $out"
