#!/usr/bin/env bash
# Wall time per isolated trial: elengtis against the original Python tool (PyPI elengtis 0.1.0)
# on the same image, the same campaign file and the same engine. Figures are printed, never
# asserted (docs/performance.md, "Against the original").
#
#   tests/perf/compare-original.sh [IMAGE] [TRIALS] [REPEATS]
#
# IMAGE (default: the bundled fixture image) must serve MCP over streamable HTTP on port 8000
# at /mcp when started with `--transport streamable-http BIND_FLAG 0.0.0.0 --port 8000
# --collector /tmp/c.jsonl` and list a `read_note` tool — the original runs only
# streamable-HTTP container targets. Each trial is model-free with one setup call. The
# Python image of the original's own fixture (PyPI elengtis 0.1.0, `python -m
# elengtis.server`) is built with sandbox-images/pypi/build.sh (see its README):
#
#   tests/perf/compare-original.sh elengtis/original-fixture:0.1.0 10 3
#
# The settings run in turn within each repeat (original, ours …, original, ours …), so that a
# change in the machine's load reaches every setting alike.
#
# Environment:
#   ELENGTIS   elengtis executable (default: target/x86_64-unknown-linux-gnu/release/elengtis,
#              the static release build, else target/release/elengtis, else `elengtis` on PATH)
#   ORIGINAL   the original's `elengtis` executable (default: a venv made under
#              ${XDG_CACHE_HOME:-~/.cache}/elengtis/original-0.1.0 with pip from PyPI)
#   ROUTES     `both` (default) or `direct`: only the direct route (ELENGTIS_RELAY=never), e.g.
#              when the engine's elengtis/elengtis image is not this build's relay
#   KEEP_DIR   keep every run's results (evidence with lifecycle stamps) in a new directory here
#   BIND_FLAG  the server's listen-address flag (default: --host when the image's entrypoint
#              runs `elengtis.server`, the original's fixture; else --bind, the Rust fixtures')
#   The engine gate is passed with ELENGTIS_ALLOW_VULNERABLE_ENGINE as for any run.
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { echo "compare-original.sh: error: $*" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IMAGE=${1:-elengtis/fixture:$version}
TRIALS=${2:-10}
REPEATS=${3:-3}
[[ $TRIALS =~ ^[1-9][0-9]*$ && $REPEATS =~ ^[1-9][0-9]*$ ]] || die "TRIALS and REPEATS must be positive integers"
ROUTES=${ROUTES:-both}
[[ $ROUTES == both || $ROUTES == direct ]] || die "ROUTES must be both or direct, got '$ROUTES'"

if [[ -z ${ELENGTIS:-} ]]; then
    for candidate in target/x86_64-unknown-linux-gnu/release/elengtis target/release/elengtis; do
        if [[ -x $candidate ]]; then ELENGTIS=$PWD/$candidate; break; fi
    done
    [[ -n ${ELENGTIS:-} ]] || ELENGTIS=$(command -v elengtis) || die "no elengtis: build it (cargo build --release) or set ELENGTIS"
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
entrypoint=$(docker image inspect --format '{{json .Config.Entrypoint}}' "$IMAGE" 2>/dev/null) \
    || die "image $IMAGE is not present (elengtis images build, or sandbox-images/pypi/build.sh)"
if [[ -z ${BIND_FLAG:-} ]]; then
    case $entrypoint in *'"elengtis.server"'*) BIND_FLAG=--host ;; *) BIND_FLAG=--bind ;; esac
fi
[[ $BIND_FLAG =~ ^--[a-z-]+$ ]] || die "BIND_FLAG must be a long option, got '$BIND_FLAG'"

if [[ -n ${KEEP_DIR:-} ]]; then
    mkdir -p "$KEEP_DIR" && work=$(mktemp -d "$KEEP_DIR/compare.XXXXXX")
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
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
      command: [--transport, streamable-http, $BIND_FLAG, 0.0.0.0, --port, "8000", --collector, /tmp/c.jsonl]
    bindings:
      compare: {read_note: read_note}
scenarios: [compare.yaml]
YAML
"$ORIGINAL" validate "$work/campaign.yaml" >/dev/null || die "the original refuses the campaign"
"$ELENGTIS" validate "$work/campaign.yaml" >/dev/null || die "elengtis refuses the campaign"

# One run of one setting: its wall seconds appended to $work/NAME.times; the run must record
# TRIALS complete rows.
measure_once() {
    local name=$1 r=$2; shift 2
    local out="$work/$name-$r" start end rows
    start=$(date +%s.%N)
    "$@" --config "$work/campaign.yaml" --out "$out" >"$out.log" 2>&1 \
        || { cat "$out.log" >&2; die "$name failed"; }
    end=$(date +%s.%N)
    rows=$(grep -c '"evidence_status": *"complete"' "$out/runs.jsonl" || true)
    [[ $rows -eq $TRIALS ]] || die "$name recorded $rows complete trials, not $TRIALS"
    echo "$end - $start" | bc -l >>"$work/$name.times"
}
median() {
    [[ -s $work/$1.times ]] || { echo nan; return; }
    sort -g "$work/$1.times" | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

echo "image $IMAGE ($BIND_FLAG), $TRIALS model-free trials with one setup call, median of $REPEATS runs" >&2
for r in $(seq "$REPEATS"); do
    measure_once original "$r" "$ORIGINAL" run
    ELENGTIS_RELAY=never measure_once direct1 "$r" "$ELENGTIS" run --jobs 1
    [[ $ROUTES == direct ]] || measure_once relay1 "$r" "$ELENGTIS" run --jobs 1
    ELENGTIS_RELAY=never measure_once direct4 "$r" "$ELENGTIS" run --jobs 4
    [[ $ROUTES == direct ]] || measure_once relay4 "$r" "$ELENGTIS" run --jobs 4
    if [[ $ROUTES == direct ]]; then
        ELENGTIS_RELAY=never measure_once ahead "$r" "$ELENGTIS" run --jobs 4 --prepare-ahead 2
    else
        measure_once ahead "$r" "$ELENGTIS" run --jobs 4 --prepare-ahead 2
    fi
    echo "repeat $r of $REPEATS done" >&2
done
original=$(median original)
direct1=$(median direct1)
relay1=$(median relay1)
direct4=$(median direct4)
relay4=$(median relay4)
ahead=$(median ahead)

ratio() { echo "scale=2; $1 / $2" | bc -l; }
per() { echo "scale=3; $1 / $TRIALS" | bc -l; }
printf '%-48s %8s %10s %22s\n' setting "wall s" "s/trial" "original ÷ this"
row() {
    if [[ $2 == nan ]]; then printf '%-48s %8s\n' "$1" "not measured (ROUTES=direct)"; return; fi
    printf '%-48s %8.2f %10.3f %21.2f×\n' "$1" "$2" "$(per "$2")" "$(ratio "$original" "$2")"
}
ahead_route=relay
[[ $ROUTES == both ]] || ahead_route=direct
row "original 0.1.0 (sequential; direct route)" "$original"
row "elengtis --jobs 1, direct (ELENGTIS_RELAY=never)" "$direct1"
row "elengtis --jobs 1, relay (the default)" "$relay1"
row "elengtis --jobs 4, direct" "$direct4"
row "elengtis --jobs 4, relay" "$relay4"
row "elengtis --jobs 4 --prepare-ahead 2, $ahead_route" "$ahead"
json() { [[ $1 == nan ]] && echo null || echo "$1"; }
printf '{"image":"%s","trials":%d,"repeats":%d,"original_s":%s,"jobs1_direct_s":%s,"jobs1_relay_s":%s,"jobs4_direct_s":%s,"jobs4_relay_s":%s,"jobs4_prepare_ahead2_s":%s,"prepare_ahead_route":"%s"}\n' \
    "$IMAGE" "$TRIALS" "$REPEATS" "$original" "$direct1" "$(json "$relay1")" "$direct4" "$(json "$relay4")" "$ahead" "$ahead_route"
