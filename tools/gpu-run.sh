#!/usr/bin/env bash
# Runs every GPU test and benchmark of the CUDA backend on the GPU machine in one go and prints a short table last.
# Usage: tools/gpu-run.sh LOG_DIR [BIN_DIR | FLAVOUR=BIN_DIR ...]   (carry .assets/qwen3-tokenizer too, for serve)
#   Each FLAVOUR=BIN_DIR is one build of the binaries (tools/gpu-build.sh makes them: `native` for 80;89;90a, `ptx89`
#   and `ptx80` whose CUDA code is PTX for compute_89 / compute_80 only, which the driver compiles for the GPU at load,
#   so the H200 runs the sm_80/sm_89 kernels and their dispatch). The first flavour also runs the kernel bench, the
#   throughput runs and the serve smoke test; every flavour runs the GPU tests and the latency cases. A plain BIN_DIR
#   is the flavour `native`. BIN_DIR holds prebuilt binaries looked up by name (cuda_backend_tests, cuda_kernel_bench,
#   qinfer) and the shared libraries they need beside them (their rpath is $ORIGIN).
#   QUICK=1: tests, kernel bench and latency only (no serve smoke, no throughput runs); PROFILE=1: also Nsight
#   Compute's per-kernel durations (ncu, clocks left alone) of batch-1 decode steps at 1 K with each KV cache dtype,
#   and an Nsight Systems kernel summary of a batch-1 1 K run where nsys is installed; PARITY=1: tools/hf_parity_4b.py (the full-size
#   random 4B against transformers, per flavour; PARITY_WORK: where its 8 GB checkpoint goes, default /tmp/parity4b).
#   LONG=1: the long-context cases of the first flavour (decode at 32 K and 128 K, both caches; one 128 K prompt
#   beside 32 chats through serve with --target-itl-ms 50 and 0; a 128 K document asked three times); SOAK=1: also
#   tools/long_soak.sh (20 sequential 128 K requests); SPEC=1: speculative decoding at batch 1 (n-gram on a periodic
#   and a random prompt, a 0.6B-shape draft, the 4B as its own draft, the draft's cost curve at fixed k); TP=1 (on a
#   machine with 2+ GPUs): tensor parallelism over NCCL (the communicator tests, greedy tokens of -tp 2 against -tp 1,
#   batch-1 decode of the 8B, 14B and 32B shapes at TP = 1 and 2).
#   The latency cases include AWQ and FP8 weights (--quantization on the dummy 4B). Full logs go to LOG_DIR/FLAVOUR: tests.log/tests.json, kernel_bench.log, latency_*.json/.log, and LOG_DIR/system.log
#   (GPU, driver, clocks, ldd). The last lines printed are the kernel table and a summary table.
set -uo pipefail
log_root=${1:?usage: tools/gpu-run.sh LOG_DIR [BIN_DIR | FLAVOUR=BIN_DIR ...]}
shift
flavours=("$@")
[[ ${#flavours[@]} -eq 0 ]] && flavours=(build-cuda)
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$log_root"
summary=()

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,power.limit --format=csv
  uname -a
} >"$log_root/system.log" 2>&1

first_flavour=1
base_library_path=${LD_LIBRARY_PATH:-}
for spec in "${flavours[@]}"; do
if [[ $spec == *=* ]]; then flavour=${spec%%=*} bin_dir=${spec#*=}; else flavour=native bin_dir=$spec; fi
log_dir="$log_root/$flavour"
mkdir -p "$log_dir"
export LD_LIBRARY_PATH="$bin_dir${base_library_path:+:$base_library_path}"
find_bin() { find "$bin_dir" -type f -name "$1" -perm -u+x 2>/dev/null | head -1; }

tests=$(find_bin cuda_backend_tests)
# The tests that run `qinfer` itself take this flavour's binary, not the path of the build it came from.
export QINFER_BIN=$(find_bin qinfer)
if [[ -n $tests ]]; then
  { echo "== $flavour: ldd $tests"; ldd "$tests"; } >>"$log_root/system.log" 2>&1
  "$tests" --gtest_output="json:$log_dir/tests.json" >"$log_dir/tests.log" 2>&1
  status=$?
  passed=$(grep -c '^\[       OK \]' "$log_dir/tests.log")
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log_dir/tests.log")
  skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]' "$log_dir/tests.log")
  summary+=("| $flavour GPU tests | exit $status: $passed passed, $failed failed, $skipped skipped |")
  grep -E '^\[  FAILED  \]|Failure|error' "$log_dir/tests.log" | head -20 | sed "s/^/$flavour: /"
else
  summary+=("| $flavour GPU tests | cuda_backend_tests not found in $bin_dir |")
fi

bench=$(find_bin cuda_kernel_bench)
if [[ $first_flavour -eq 0 ]]; then
  :
elif [[ -n $bench ]]; then
  "$bench" >"$log_dir/kernel_bench.log" 2>&1
  summary+=("| kernel bench | exit $? (table in kernel_bench.log) |")
else
  summary+=("| kernel bench | cuda_kernel_bench not found in $bin_dir |")
fi

qinfer=$(find_bin qinfer_bench)
[[ -z $qinfer ]] && qinfer=$(find_bin qinfer)
config="$repo/configs/Qwen3-4B-Instruct-2507/config.json"
run_latency() {  # name batch input output, then extra flags for qinfer bench latency
  local out="$log_dir/latency_$1.json"
  "$qinfer" bench latency --load-format dummy --config "$config" --device cuda --batch "$2" --input-len "$3" \
    --output-len "$4" --max-model-len "${max_model_len:-16384}" --json "${@:5}" >"$out" 2>"$log_dir/latency_$1.log"
  local status=$?
  if [[ $status -ne 0 ]]; then
    summary+=("| $flavour latency $1 | exit $status, see $flavour/latency_$1.log |")
    return
  fi
  summary+=("$(python3 - "$out" "$1" "$flavour" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[3]} latency {sys.argv[2]} | prefill {r['prefill_tokens_per_second']/1e3:.1f} K tok/s, TTFT {r['ttft_seconds']*1e3:.1f} ms, "
      f"decode {r['decode_tokens_per_second']:.0f} tok/s ({r['decode_step_seconds_median']*1e3:.2f} ms/step, "
      f"{r['decode_bandwidth_bytes_per_second']/1e12:.2f} TB/s = {100*r['decode_fraction_of_copy_bandwidth']:.1f} %), "
      f"mem {r['gpu_memory_in_use_bytes']/2**30:.1f} GiB"
      + ("" if "speculative" not in r else
         f"; speculative {r['speculative']['decode_tokens_per_second']:.0f} tok/s, "
         f"{r['speculative']['tokens_per_sequence_step']:.2f} tokens per step, acceptance "
         f"{100 * r['speculative'].get('acceptance_rate', 0):.0f} %"
         + ("" if "draft" not in r['speculative'] else
            f", draft {r['speculative']['draft']['seconds_per_proposed_token'] * 1e3:.2f} ms per token"))
      + ("" if "tensor_parallel" not in r else
         f"; TP {r['tensor_parallel']['size']}: all-reduce {r['tensor_parallel']['all_reduce_seconds'] * 1e6:.1f} us, "
         f"{r['tensor_parallel']['all_reduce_seconds_per_step'] * 1e3:.2f} ms per step") + " |")
PY
)")
}
run_throughput() {  # name, then extra flags for qinfer bench throughput
  local name=$1 out="$log_dir/throughput_$1.json"
  shift
  "$qinfer" bench throughput --load-format dummy --config "$config" --device cuda --json "$@" >"$out" \
    2>"$log_dir/throughput_$name.log"
  local status=$?
  if [[ $status -ne 0 ]]; then
    summary+=("| throughput $name | exit $status, see throughput_$name.log |")
    return
  fi
  summary+=("$(python3 - "$out" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| throughput {sys.argv[2]} | {r['requests']} requests, {r['output_tokens_per_s']:.0f} output tok/s, "
      f"{r['total_tokens_per_s']:.0f} total tok/s, mean batch {r.get('mean_batch_size', 0):.1f}, "
      f"engine host {r.get('host_overhead_per_step_s', 0) * 1e6:.0f} us/step, in backend {100 * r.get('backend_fraction', 0):.1f} %, "
      f"prefix hit {100 * r.get('prefix_cache_hit_rate', 0):.1f} %, median TTFT {r.get('median_ttft_s', 0) * 1e3:.0f} ms |")
PY
)")
}
serve_mixed() {  # name, then serve flags: one 128 K prompt after another beside 32 chats, then a document asked 3 times
  local name=$1 port=18124 log="$log_dir/serve_$1.log" tokenizer="$repo/.assets/qwen3-tokenizer"
  shift
  "$qinfer" serve --load-format dummy --config "$config" --device cuda --port "$port" --max-model-len 140000 \
    --tokenizer "$tokenizer" "$@" >"$log" 2>&1 &
  local pid=$! ok=0
  for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && ok=1 && break
    sleep 0.5
  done
  if [[ $ok -eq 1 ]]; then
    "$qinfer" bench serve --url "http://127.0.0.1:$port" --concurrency 32 --num-prompts 160 --input-len 1024 \
      --output-len 128 --long-requests 2 --long-input-len 131072 --tokenizer "$tokenizer" \
      --json "$log_dir/mixed_$name.json" >"$log_dir/mixed_$name.log" 2>&1
    "$qinfer" bench serve --url "http://127.0.0.1:$port" --concurrency 1 --num-prompts 2 --input-len 64 \
      --output-len 16 --long-requests 1 --long-input-len 131072 --long-questions 3 --long-output-len 16 \
      --tokenizer "$tokenizer" --json "$log_dir/questions_$name.json" >"$log_dir/questions_$name.log" 2>&1
  fi
  kill -TERM "$pid"
  wait "$pid"
  summary+=("$(python3 - "$log_dir" "$name" "$ok" <<'PY'
import json, os, sys
log_dir, name, ok = sys.argv[1:]
def classes(file):
    try:
        return json.load(open(os.path.join(log_dir, file)))["levels"][0]["classes"]
    except (OSError, ValueError, KeyError, IndexError):
        return None
mixed, questions = classes(f"mixed_{name}.json"), classes(f"questions_{name}.json")
text = f"| serve {name} | healthy={ok}"
if mixed:
    short, long = mixed["short"], mixed["long"]
    text += (f"; chats ITL P50 {short['itl_ms']['p50']:.1f} / P99 {short['itl_ms']['p99']:.1f} ms, TTFT P50 "
             f"{short['ttft_ms']['p50']:.0f} ms; 128 K TTFT P50 {long['ttft_ms']['p50'] / 1e3:.2f} s")
if questions and "long_repeat" in questions:
    text += f"; second question TTFT P50 {questions['long_repeat']['ttft_ms']['p50']:.0f} ms"
print(text + " |")
PY
)")
}
serve_smoke() {  # the HTTP server on the GPU: health, one streamed chat, GPU metrics through NVML, SIGTERM exit code
  local port=18123 log="$log_dir/serve.log"
  "$qinfer" serve --load-format dummy --config "$config" --device cuda --port "$port" --max-model-len 8192 \
    --served-model-name smoke \
    --tokenizer "$repo/.assets/qwen3-tokenizer" >"$log" 2>&1 &
  local pid=$! ok=0
  for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && ok=1 && break
    sleep 0.5
  done
  if [[ $ok -eq 1 ]]; then
    curl -sN "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
      -d '{"model":"smoke","stream":true,"max_tokens":32,"messages":[{"role":"user","content":"Hello"}],
           "stream_options":{"include_usage":true}}' >"$log_dir/serve_chat.txt" 2>&1
    curl -s "http://127.0.0.1:$port/metrics" >"$log_dir/serve_metrics.txt" 2>&1
  fi
  kill -TERM "$pid"
  wait "$pid"
  local status=$?
  local chunks gpu_metrics
  chunks=$(grep -c '^data: {' "$log_dir/serve_chat.txt" 2>/dev/null)
  gpu_metrics=$(grep -c '^qinfer_gpu_' "$log_dir/serve_metrics.txt" 2>/dev/null)
  summary+=("| serve smoke | healthy=$ok, $chunks SSE chunks, [DONE]=$(grep -c '^data: \[DONE\]' "$log_dir/serve_chat.txt" 2>/dev/null), $gpu_metrics GPU metric lines, exit after SIGTERM $status |")
}
if [[ -n $qinfer ]]; then
  [[ -z ${QUICK:-} && $first_flavour -eq 1 ]] && serve_smoke
  # Every flavour: batch 1 at 1 K, 64 x (512 + 128) both caches, 8 K prefill; the native one the rest too.
  run_latency b1_1k 1 1024 128
  run_latency b1_8k 1 8192 16
  run_latency b64_512 64 512 128
  run_latency b64_512_fp8kv 64 512 128 --kv-cache-dtype fp8
  # Quantized weights (dummy 4B weights quantized at load: AWQ int4 groups of 128, FP8 blocks of 128).
  for method in awq fp8; do
    run_latency "${method}_b1_1k" 1 1024 128 --quantization "$method"
    [[ $first_flavour -eq 1 ]] || continue
    run_latency "${method}_b1_8k" 1 8192 16 --quantization "$method"
    run_latency "${method}_b64_512" 64 512 128 --quantization "$method"
  done
  if [[ $first_flavour -eq 1 ]]; then
    run_latency b1_512 1 512 16
    run_latency b4_1k 4 1024 128
    run_latency b4_8k 4 8192 128
    run_latency b8_512 8 512 128
  fi
fi
if [[ -n $qinfer && -n ${LONG:-} && $first_flavour -eq 1 ]]; then
  for kv in bf16 fp8; do
    max_model_len=40000 run_latency "b1_32k_$kv" 1 32768 64 --kv-cache-dtype "$kv"
    max_model_len=140000 run_latency "b1_128k_$kv" 1 131072 64 --kv-cache-dtype "$kv"
  done
  max_model_len=40000 run_latency b8_32k_fp8 8 32768 64 --kv-cache-dtype fp8
  run_latency b1_1k_fp8 1 1024 128 --kv-cache-dtype fp8
  serve_mixed itl50 --target-itl-ms 50
  serve_mixed itl0 --target-itl-ms 0
  if [[ -n ${SOAK:-} ]]; then
    QINFER_BIN=$qinfer "$repo/tools/long_soak.sh" "$repo/.assets/qwen3-tokenizer" "$log_dir/soak" >"$log_dir/soak.log" 2>&1
    summary+=("| long soak | exit $?: $(tail -1 "$log_dir/soak.log") |")
  fi
fi
if [[ -n $qinfer && -n ${SPEC:-} && $first_flavour -eq 1 ]]; then
  ngram='{"method": "ngram", "num_speculative_tokens": 4}'
  run_latency spec_ngram_periodic 1 1024 128 --prompt-period 8 --speculative-config "$ngram"
  run_latency spec_ngram_random 1 1024 128 --speculative-config "$ngram"
  for draft in Qwen3-0.6B Qwen3-4B-Instruct-2507; do
    run_latency "spec_draft_$draft" 1 1024 128 --speculative-config \
      "{\"method\": \"draft_model\", \"model\": \"$repo/configs/$draft\", \"num_speculative_tokens\": 4, \"disable_by_batch_size\": 0}"
  done
  # The cost curve of the 0.6B-shape draft at k = 4 whatever is accepted (random weights never agree).
  run_latency spec_draft_fixed_k4 1 1024 128 --fixed-speculative-tokens --speculative-config \
    "{\"method\": \"draft_model\", \"model\": \"$repo/configs/Qwen3-0.6B\", \"num_speculative_tokens\": 4, \"disable_by_batch_size\": 0}"
fi
if [[ -n $qinfer && -n ${TP:-} && $first_flavour -eq 1 ]]; then
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
  nccl_tests=$(find_bin nccl_communicator_tests)
  if [[ -n $nccl_tests ]]; then
    "$nccl_tests" >"$log_dir/nccl_tests.log" 2>&1
    summary+=("| NCCL communicator tests over $gpus GPUs | exit $? |")
  fi
  # Greedy tokens of the tiny untied model through NCCL ranks against one GPU.
  for tp in 1 2; do
    "$qinfer" generate --device cuda --load-format dummy --preset tiny-untied --max-model-len 256 \
      --prompt-ids 11,2024,7,150000,42,9 --max-tokens 12 --ignore-eos --temperature 0 --json -tp "$tp" \
      >"$log_dir/generate_tp$tp.json" 2>"$log_dir/generate_tp$tp.log"
  done
  summary+=("| generate -tp 2 against -tp 1 | $(cmp -s <(grep -o '"token_ids":[^]]*' "$log_dir/generate_tp1.json") \
    <(grep -o '"token_ids":[^]]*' "$log_dir/generate_tp2.json") && echo equal tokens || echo DIFFERENT or failed, see generate_tp*.log) |")
  # Batch-1 decode of the larger Qwen3 shapes at TP = 1 and 2 (issue #40's targets: 8B TP = 2 >= 1.7 x TP = 1; 32B
  # TP = 2 >= 75 % of the two GPUs' copy bandwidth).
  for model in Qwen3-8B Qwen3-14B Qwen3-32B; do
    for tp in 1 2; do
      [[ $tp -gt $gpus ]] && continue
      config="$repo/configs/$model/config.json" run_latency "tp${tp}_${model}_b1_1k" 1 1024 128 --tensor-parallel-size "$tp"
    done
  done
fi
if [[ -n $qinfer && -z ${QUICK:-} && $first_flavour -eq 1 ]]; then
  run_throughput 1k_1k_256 --num-prompts 512 --input-len 1024 --output-len 1024 --max-num-seqs 256 --max-model-len 4096
  run_throughput 1k_1k_256_fp8kv --num-prompts 512 --input-len 1024 --output-len 1024 --max-num-seqs 256 \
    --max-model-len 4096 --kv-cache-dtype fp8
  run_throughput prefix2k_cached --num-prompts 64 --input-len 2100 --shared-prefix-len 2048 --output-len 16 \
    --max-model-len 4096
  run_throughput prefix2k_uncached --num-prompts 64 --input-len 2100 --shared-prefix-len 2048 --output-len 16 \
    --max-model-len 4096 --no-enable-prefix-caching
elif [[ -z $qinfer ]]; then
  summary+=("| latency | no qinfer binary with 'bench' in $bin_dir |")
fi
# Full-size parity against transformers when asked.
if [[ -n $qinfer && -n ${PARITY:-} ]]; then
  python3 "$repo/tools/hf_parity_4b.py" --qinfer "$qinfer" --work "${PARITY_WORK:-/tmp/parity4b}" \
    --out "$log_dir/parity4b.json" >"$log_dir/parity4b.log" 2>&1
  summary+=("| $flavour 4B parity vs transformers | exit $?: $(grep -c ': ok' "$log_dir/parity4b.log") of 6 cases ok |")
fi
# Kernel-level timeline of one batch-1 run (prefill of 1 K, then decode) when Nsight Systems is installed.
# The decode step's kernels one by one (serialised by the profiler, so without the overlap of programmatic launch).
if [[ -n $qinfer && -n ${PROFILE:-} && $first_flavour -eq 1 ]] && command -v ncu >/dev/null; then
  for kv in bf16 fp8; do
    ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      --kernel-name 'regex:decode_attention|gemv|rmsnorm|qk_norm|swiglu|embedding|sampl' --launch-count 800 \
      "$qinfer" bench latency --load-format dummy --config "$config" --device cuda --batch 1 --input-len 1024 \
      --output-len 4 --max-model-len 4096 --kv-cache-dtype "$kv" >"$log_dir/ncu_decode_b1_1k_$kv.txt" 2>&1
    summary+=("| ncu decode b1 1k $kv | exit $? (per-kernel durations in ncu_decode_b1_1k_$kv.txt) |")
  done
fi
if [[ -n $qinfer && -n ${PROFILE:-} && $first_flavour -eq 1 ]] && command -v nsys >/dev/null; then
  nsys profile -o "$log_dir/b1_1k" --force-overwrite true "$qinfer" bench latency --load-format dummy \
    --config "$config" --device cuda --batch 1 --input-len 1024 --output-len 32 --max-model-len 4096 \
    >"$log_dir/nsys.log" 2>&1
  nsys stats --report cuda_gpu_kern_sum --format csv "$log_dir/b1_1k.nsys-rep" >"$log_dir/kernels_b1_1k.csv" 2>>"$log_dir/nsys.log"
  summary+=("| nsys | kernels_b1_1k.csv ($(wc -l <"$log_dir/kernels_b1_1k.csv") lines) |")
fi

first_flavour=0
done

echo
echo "## kernel bench"
sed -n '/^| kernel/,$p' "$log_root"/*/kernel_bench.log 2>/dev/null
echo
echo "## summary ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
echo "| what | result |"
echo "|---|---|"
printf '%s\n' "${summary[@]}"
