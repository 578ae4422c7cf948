#!/usr/bin/env bash
# Smoke test of the built bundle (not part of `make test`: building takes minutes).
#   make bundle && packaging/smoke_bundle.sh [dist/easel]
# Prints `name: value` lines: bundle size, CLI cold start, GUI start offscreen, generate.
set -euo pipefail
bundle="${1:-dist/easel}"
exe="$bundle/easel"
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
export EASEL_HOME="$home" QT_QPA_PLATFORM=offscreen

echo "bundle_mb: $(du -sm "$bundle" | cut -f1)"
start=$(date +%s%N)
"$exe" --version >/dev/null
echo "cli_cold_start_ms: $(( ($(date +%s%N) - start) / 1000000 ))"

# The window opens offscreen and stays up: alive after 8 s counts as started.
"$exe" >"$home/gui.out" 2>&1 &
gui=$!
sleep 8
if kill -0 "$gui" 2>/dev/null; then
    echo "gui_started: 1"
    kill -TERM "$gui"; wait "$gui" || true
else
    echo "gui_started: 0"; cat "$home/gui.out"; exit 1
fi

start=$(date +%s%N)
image="$("$exe" generate "a red circle on a blue background" --steps 12 --out "$home/out" | tail -1)"
echo "generate_ms: $(( ($(date +%s%N) - start) / 1000000 ))"
test -s "$image" && echo "generate_image: $image"
