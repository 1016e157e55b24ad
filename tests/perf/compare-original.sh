#!/usr/bin/env bash
# Wall time per isolated trial: elengtis against the original Python tool (PyPI elengtis 0.1.0)
# on the same image, the same campaign file and the same engine. Figures are printed, never
# asserted (docs/performance.md, "Against the original").
#
#   tests/perf/compare-original.sh [IMAGE] [TRIALS] [REPEATS]
#
# IMAGE (default: the bundled fixture image) must serve MCP over streamable HTTP on port 8000
# at /mcp when started with `--transport streamable-http --bind 0.0.0.0 --port 8000
# --collector /tmp/c.jsonl` and list a `read_note` tool — the original runs only
# streamable-HTTP container targets. Each trial is model-free with one setup call.
#
# Environment:
#   ELENGTIS   elengtis executable (default: target/release/elengtis, else `elengtis` on PATH)
#   ORIGINAL   the original's `elengtis` executable (default: a venv made under
#              ${XDG_CACHE_HOME:-~/.cache}/elengtis/original-0.1.0 with pip from PyPI)
#   The engine gate is passed with ELENGTIS_ALLOW_VULNERABLE_ENGINE as for any run.
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { echo "compare-original.sh: error: $*" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IMAGE=${1:-elengtis/fixture:$version}
TRIALS=${2:-10}
REPEATS=${3:-3}
[[ $TRIALS =~ ^[1-9][0-9]*$ && $REPEATS =~ ^[1-9][0-9]*$ ]] || die "TRIALS and REPEATS must be positive integers"

if [[ -z ${ELENGTIS:-} ]]; then
    if [[ -x target/release/elengtis ]]; then ELENGTIS=$PWD/target/release/elengtis; else ELENGTIS=$(command -v elengtis) || die "no elengtis: build it (cargo build --release) or set ELENGTIS"; fi
fi
if [[ -z ${ORIGINAL:-} ]]; then
    venv=${XDG_CACHE_HOME:-$HOME/.cache}/elengtis/original-0.1.0
    if [[ ! -x $venv/bin/elengtis ]]; then
        echo "installing the original (PyPI elengtis==0.1.0) into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --ignore-requires-python elengtis==0.1.0
    fi
    ORIGINAL=$venv/bin/elengtis
    # The original starts its own fixture as `python -m elengtis.server`: its venv first.
    export PATH="$venv/bin:$PATH"
fi
command -v docker >/dev/null || die "the original drives Docker through the docker CLI, which is not on PATH"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "image $IMAGE is not present (elengtis images build)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/compare.yaml" <<'YAML'
schema_version: 1
id: compare
title: One setup call, model-free
description: Reads the support note once in setup; nothing else.
bindings: [read_note]
setup:
  - id: read
    type: mcp_tool
    tool: {binding: read_note}
    arguments: {}
exercise:
  system: You are a support assistant.
  user: Please read the latest support note.
  tools: [{binding: read_note}]
proposal_rules: []
verify:
  checks: []
YAML
cat >"$work/campaign.yaml" <<YAML
schema_version: 1
trials: $TRIALS
model_free: true
targets:
  - id: target
    transport:
      type: isolated_container
      image: $IMAGE
      container_port: 8000
      uid: 65534
      gid: 65534
      command: [--transport, streamable-http, --bind, 0.0.0.0, --port, "8000", --collector, /tmp/c.jsonl]
    bindings:
      compare: {read_note: read_note}
scenarios: [compare.yaml]
YAML
"$ORIGINAL" validate "$work/campaign.yaml" >/dev/null || die "the original refuses the campaign"
"$ELENGTIS" validate "$work/campaign.yaml" >/dev/null || die "elengtis refuses the campaign"

# Median wall seconds of REPEATS runs of one setting; every run must record TRIALS complete rows.
measure() {
    local name=$1; shift
    local times=()
    for r in $(seq "$REPEATS"); do
        local out="$work/$name-$r"
        local start end
        start=$(date +%s.%N)
        "$@" --config "$work/campaign.yaml" --out "$out" >"$work/$name-$r.log" 2>&1 \
            || { cat "$work/$name-$r.log" >&2; die "$name failed"; }
        end=$(date +%s.%N)
        local rows
        rows=$(grep -c '"evidence_status": *"complete"' "$out/runs.jsonl" || true)
        [[ $rows -eq $TRIALS ]] || die "$name recorded $rows complete trials, not $TRIALS"
        times+=("$(echo "$end - $start" | bc -l)")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

echo "image $IMAGE, $TRIALS model-free trials with one setup call, median of $REPEATS runs" >&2
original=$(measure original "$ORIGINAL" run)
direct1=$(ELENGTIS_RELAY=never measure direct1 "$ELENGTIS" run --jobs 1)
relay1=$(measure relay1 "$ELENGTIS" run --jobs 1)
direct4=$(ELENGTIS_RELAY=never measure direct4 "$ELENGTIS" run --jobs 4)
relay4=$(measure relay4 "$ELENGTIS" run --jobs 4)
ahead=$(measure ahead "$ELENGTIS" run --jobs 4 --prepare-ahead 2)

ratio() { echo "scale=2; $1 / $2" | bc -l; }
per() { echo "scale=3; $1 / $TRIALS" | bc -l; }
printf '%-44s %8s %10s %22s\n' setting "wall s" "s/trial" "original ÷ this"
row() { printf '%-44s %8.2f %10.3f %21.2f×\n' "$1" "$2" "$(per "$2")" "$(ratio "$original" "$2")"; }
row "original 0.1.0 (sequential; direct route)" "$original"
row "elengtis --jobs 1, direct (ELENGTIS_RELAY=never)" "$direct1"
row "elengtis --jobs 1, relay (the default)" "$relay1"
row "elengtis --jobs 4, direct" "$direct4"
row "elengtis --jobs 4, relay" "$relay4"
row "elengtis --jobs 4 --prepare-ahead 2, relay" "$ahead"
printf '{"image":"%s","trials":%d,"repeats":%d,"original_s":%s,"jobs1_direct_s":%s,"jobs1_relay_s":%s,"jobs4_direct_s":%s,"jobs4_relay_s":%s,"jobs4_prepare_ahead2_relay_s":%s}\n' \
    "$IMAGE" "$TRIALS" "$REPEATS" "$original" "$direct1" "$relay1" "$direct4" "$relay4" "$ahead"
