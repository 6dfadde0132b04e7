#!/usr/bin/env bash
# Long-context soak on the GPU machine: 20 sequential 128K-token requests over HTTP against one `qinfer serve`
# (Qwen3-4B shape, dummy weights, fp8 KV cache). Every request must succeed and device memory must stay flat.
#
#   QINFER_BIN=build/qinfer tools/long_soak.sh TOKENIZER_DIR OUT_DIR
#
# Environment: QINFER_BIN (the binary, required), PORT (default 8123), REQUESTS (20), PROMPT_TOKENS (131072),
# MAX_TOKENS (16), GROWTH_LIMIT_MIB (64: allowed growth of device memory from the first request to the last).
# Writes OUT_DIR/serve.log and OUT_DIR/soak.tsv (request, status, seconds, device MiB); prints the table; exits 1 on a
# failed request or memory growth. Uses only curl and python3's standard library.
set -euo pipefail

if [[ $# -ne 2 || -z "${QINFER_BIN:-}" ]]; then
  echo "usage: QINFER_BIN=path/to/qinfer $0 TOKENIZER_DIR OUT_DIR" >&2
  exit 2
fi
TOKENIZER_DIR=$1
OUT_DIR=$2
PORT=${PORT:-8123}
REQUESTS=${REQUESTS:-20}
PROMPT_TOKENS=${PROMPT_TOKENS:-131072}
MAX_TOKENS=${MAX_TOKENS:-16}
GROWTH_LIMIT_MIB=${GROWTH_LIMIT_MIB:-64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT_DIR"

"$QINFER_BIN" serve --load-format dummy --config "$ROOT/configs/Qwen3-4B-Instruct-2507/config.json" \
  --tokenizer "$TOKENIZER_DIR" --device cuda --kv-cache-dtype fp8 --max-model-len 140000 \
  --served-model-name soak --host 127.0.0.1 --port "$PORT" >"$OUT_DIR/serve.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT

for _ in $(seq 1 600); do
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "qinfer serve exited; see $OUT_DIR/serve.log" >&2
    exit 1
  fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "server not ready after 600 s" >&2; exit 1; }

python3 - "$PORT" "$REQUESTS" "$PROMPT_TOKENS" "$MAX_TOKENS" "$GROWTH_LIMIT_MIB" "$OUT_DIR/soak.tsv" <<'EOF'
import json, random, subprocess, sys, time, urllib.request

port, requests, prompt_tokens, max_tokens, growth_limit, table = sys.argv[1:]
requests, prompt_tokens, max_tokens, growth_limit = int(requests), int(prompt_tokens), int(max_tokens), float(growth_limit)
base = f"http://127.0.0.1:{port}"


def device_mib():
    """Device memory in use: qinfer's NVML gauge, else nvidia-smi."""
    try:
        text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
        values = [float(line.split()[-1]) for line in text.splitlines()
                  if line.startswith("qinfer_gpu_memory_used_bytes")]
        if values:
            return sum(values) / 2**20
    except OSError:
        pass
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return sum(float(v) for v in out.split())


rows, failed = [], 0
for i in range(requests):
    rng = random.Random(i)  # a different document each time: no prefix-cache hits between requests
    body = json.dumps({"model": "soak", "prompt": [rng.randrange(1000, 150000) for _ in range(prompt_tokens)],
                       "max_tokens": max_tokens, "ignore_eos": True}).encode()
    request = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            status = response.status
            usage = json.loads(response.read()).get("usage", {})
            if usage.get("prompt_tokens") != prompt_tokens or usage.get("completion_tokens") != max_tokens:
                status = f"bad usage {usage}"
    except urllib.error.HTTPError as e:
        status = f"{e.code} {e.read()[:200]!r}"
    except OSError as e:
        status = f"error {e}"
    seconds = time.monotonic() - start
    mib = device_mib()
    failed += status != 200
    rows.append((i + 1, status, seconds, mib))
    print(f"{i + 1:3d}  {status}  {seconds:7.2f} s  {mib:9.0f} MiB", flush=True)

with open(table, "w") as f:
    f.write("request\tstatus\tseconds\tdevice_mib\n")
    for row in rows:
        f.write("\t".join(str(v) for v in row) + "\n")
growth = rows[-1][3] - rows[0][3]
print(f"\n{requests} requests of {prompt_tokens} tokens: {requests - failed} ok, {failed} failed; "
      f"device memory {rows[0][3]:.0f} -> {rows[-1][3]:.0f} MiB (growth {growth:+.0f} MiB, limit {growth_limit:.0f})")
sys.exit(1 if failed or growth > growth_limit else 0)
EOF
