#!/usr/bin/env bash
# The before/after deployment experiment in one command: starts `qinfer serve` twice on free ports — naive
# (--max-num-seqs 1 --no-enable-prefix-caching --enforce-eager: one request at a time, no prefix caching, no CUDA
# graphs) and default — runs the same `qinfer bench serve` sweep against each, and prints the before/after table.
#
# Usage: tools/bench-before-after.sh MODEL_ARGS...
#   e.g. tools/bench-before-after.sh --model Qwen/Qwen3-4B-Instruct-2507
#        tools/bench-before-after.sh --load-format dummy --config configs/qwen3-4b.json --tokenizer .assets/qwen3-tokenizer
# MODEL_ARGS go to both `qinfer serve` runs. Environment:
#   QINFER_BIN   the qinfer binary (default: build/src/cli/qinfer)
#   OUT_DIR      where logs and reports go (default: bench-before-after-<UTC time>)
#   BENCH_ARGS   the sweep (default: --concurrency 1,8,64 --num-prompts 128 --input-len 1024 --output-len 128)
#   TOKENIZER    a tokenizer directory for exact-length prompts (default: the --tokenizer in MODEL_ARGS, if any)
# Writes OUT_DIR/{naive,default}.{json,log}, OUT_DIR/before-after.md and OUT_DIR/before-after.svg.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
qinfer=${QINFER_BIN:-$repo/build/src/cli/qinfer}
out=${OUT_DIR:-bench-before-after-$(date -u +%Y%m%dT%H%M%SZ)}
read -r -a sweep <<<"${BENCH_ARGS:---concurrency 1,8,64 --num-prompts 128 --input-len 1024 --output-len 128}"
[[ $# -gt 0 ]] || { sed -n '2,14p' "$0"; exit 2; }
[[ -x $qinfer ]] || { echo "bench-before-after: no qinfer binary at $qinfer (set QINFER_BIN)" >&2; exit 2; }
tokenizer=${TOKENIZER:-}
for ((i = 1; i < $#; i++)); do
  [[ ${!i} == --tokenizer && -z $tokenizer ]] && { j=$((i + 1)); tokenizer=${!j}; }
done
tokenizer_args=()
[[ -n $tokenizer ]] && tokenizer_args=(--tokenizer "$tokenizer")
mkdir -p "$out"

server_pid=
stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  server_pid=
}
trap stop_server EXIT

# start_server LABEL EXTRA_FLAGS...: starts qinfer serve on a free port, sets $url once /health answers 200.
start_server() {
  local label=$1 log="$out/$1.log" port=
  shift
  "$qinfer" serve "${model_args[@]}" --host 127.0.0.1 --port 0 "$@" >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1200); do
    port=$(grep -oE 'listening on http://[^:]+:[0-9]+' "$log" | head -1 | grep -oE '[0-9]+$' || true)
    [[ -n $port ]] && break
    kill -0 "$server_pid" 2>/dev/null || { echo "bench-before-after: $label server exited:" >&2; tail -20 "$log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n $port ]] || { echo "bench-before-after: $label server reported no port" >&2; exit 1; }
  url=http://127.0.0.1:$port
  for _ in $(seq 3000); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || { echo "bench-before-after: $label server exited:" >&2; tail -20 "$log" >&2; exit 1; }
    sleep 0.2
  done
  echo "bench-before-after: $label server never became healthy" >&2
  exit 1
}

model_args=("$@")
start_server naive --max-num-seqs 1 --no-enable-prefix-caching --enforce-eager
"$qinfer" bench serve --url "$url" "${sweep[@]}" "${tokenizer_args[@]}" --label naive --json "$out/naive.json" \
  >/dev/null
stop_server

start_server default
"$qinfer" bench serve --url "$url" "${sweep[@]}" "${tokenizer_args[@]}" --label default --json "$out/default.json" \
  --compare "$out/naive.json" --markdown "$out/before-after.md" --plot "$out/before-after.svg" >/dev/null
stop_server

cat "$out/before-after.md"
echo "reports in $out/"
