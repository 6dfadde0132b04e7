// `qinfer bench serve` against a real `qinfer serve` on the tiny model: a small concurrency sweep over
// /v1/completions, then /v1/chat/completions compared with the first run; checks every JSON field, the Markdown rows
// and the SVG lines; then a mixed workload (long prompts beside short ones) and its per-class numbers. Environment: see tests/loadgen/CMakeLists.txt (QINFER_BIN, QINFER_TEST_MODEL,
// QINFER_TOKENIZER_DIR, QINFER_BENCH_OUT).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, startServer } from '../server/node/harness.mjs';

const OUT = process.env.QINFER_BENCH_OUT;
const INPUT_LEN = 16;
const OUTPUT_LEN = 8;
const NUM_PROMPTS = 8;
let server;

function runBench(args) {
  return new Promise((resolve) => {
    const proc = spawn(BIN, ['bench', 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c) => { stdout += c; });
    proc.stderr.on('data', (c) => { stderr += c; });
    proc.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

function checkDistribution(d, where) {
  assert.ok(d !== null && typeof d === 'object', `${where} is null`);
  for (const key of ['count', 'mean', 'p50', 'p90', 'p99']) assert.equal(typeof d[key], 'number', `${where}.${key}`);
  assert.ok(d.count > 0 && d.mean > 0, `${where} empty`);
  assert.ok(d.p50 <= d.p90 && d.p90 <= d.p99, `${where} percentiles out of order`);
}

function checkReport(report, label, endpoint) {
  assert.equal(report.schema, 'qinfer.bench_serve.v1');
  assert.equal(report.label, label);
  assert.equal(report.endpoint, endpoint);
  assert.equal(report.model, 'tiny');
  assert.equal(report.dataset, 'random');
  assert.equal(report.input_len, INPUT_LEN);
  assert.equal(report.output_len, OUTPUT_LEN);
  assert.equal(report.num_prompts, NUM_PROMPTS);
  assert.match(report.started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.deepEqual(report.levels.map((l) => l.concurrency), [1, 4]);
  for (const level of report.levels) {
    const where = `${label} ${level.name}`;
    assert.equal(level.request_rate, null);
    assert.equal(level.num_requests, NUM_PROMPTS);
    assert.equal(level.completed, NUM_PROMPTS, `${where}: ${JSON.stringify(level.error_samples)}`);
    assert.equal(level.failed, 0);
    assert.deepEqual(level.errors, {});
    // ignore_eos + max_tokens: every request produced exactly OUTPUT_LEN tokens (the server's usage).
    assert.equal(level.total_output_tokens, NUM_PROMPTS * OUTPUT_LEN, where);
    if (endpoint === '/v1/completions') assert.equal(level.total_input_tokens, NUM_PROMPTS * INPUT_LEN, where);
    else assert.ok(level.total_input_tokens > NUM_PROMPTS * INPUT_LEN, `${where}: chat template tokens`);
    for (const key of ['duration_s', 'request_throughput', 'output_throughput', 'total_token_throughput'])
      assert.ok(level[key] > 0, `${where}.${key}`);
    assert.ok(Math.abs(level.request_throughput * level.duration_s - NUM_PROMPTS) < 1e-6);
    for (const key of ['ttft_ms', 'tpot_ms', 'itl_ms', 'e2e_ms']) checkDistribution(level[key], `${where}.${key}`);
    assert.ok(level.ttft_ms.p50 <= level.e2e_ms.p50);
    assert.ok(level.peak_in_flight >= 1 && level.peak_in_flight <= level.concurrency);
    assert.ok(level.client_cpu_seconds >= 0);
    assert.ok(level.gpu.samples >= 1, `${where}: /metrics was never read`);
    // Without a GPU qinfer exports no GPU gauges: nulls, not errors.
    for (const key of ['utilization_mean', 'utilization_max', 'memory_used_peak_bytes', 'memory_used_mean_bytes',
      'memory_total_bytes'])
      assert.ok(level.gpu[key] === null || typeof level.gpu[key] === 'number', `${where}.gpu.${key}`);
  }
}

before(async () => {
  fs.mkdirSync(OUT, { recursive: true });
  server = await startServer();
});

after(async () => { await server?.stop(); });

const common = () => ['--url', server.url, '--concurrency', '1,4', '--num-prompts', String(NUM_PROMPTS),
  '--input-len', String(INPUT_LEN), '--output-len', String(OUTPUT_LEN), '--tokenizer', process.env.QINFER_TOKENIZER_DIR,
  '--metrics-interval', '0.1'];

test('completions sweep writes JSON, Markdown and SVG with every field', async () => {
  const files = ['first.json', 'first.md', 'first.svg'].map((f) => path.join(OUT, f));
  const res = await runBench([...common(), '--label', 'first', '--json', files[0], '--markdown', files[1],
    '--plot', files[2]]);
  assert.equal(res.code, 0, res.stderr);
  checkReport(JSON.parse(fs.readFileSync(files[0], 'utf8')), 'first', '/v1/completions');
  const markdown = fs.readFileSync(files[1], 'utf8');
  assert.match(markdown, /^\| c=1 \| 8\/8 \| 0 \|/m);
  assert.match(markdown, /^\| c=4 \| 8\/8 \| 0 \|/m);
  assert.equal(res.stdout, markdown);
  assert.match(res.stderr, /bench serve c=4: 8\/8 ok/);  // plain progress lines: stderr is not a terminal here
  const svg = fs.readFileSync(files[2], 'utf8');
  assert.ok(svg.startsWith('<?xml') && svg.trimEnd().endsWith('</svg>'));
  assert.equal(svg.match(/<polyline /g).length, 2);
});

test('chat sweep compared with the first run', async () => {
  const files = ['chat.json', 'chat.md', 'compare.svg'].map((f) => path.join(OUT, f));
  const res = await runBench([...common(), '--chat', '--label', 'chat', '--json', files[0], '--markdown', files[1],
    '--plot', files[2], '--compare', path.join(OUT, 'first.json')]);
  assert.equal(res.code, 0, res.stderr);
  checkReport(JSON.parse(fs.readFileSync(files[0], 'utf8')), 'chat', '/v1/chat/completions');
  const markdown = fs.readFileSync(files[1], 'utf8');
  assert.match(markdown, /### first vs chat/);
  for (const label of ['first', 'chat'])
    for (const level of ['c=1', 'c=4']) assert.match(markdown, new RegExp(`^\\| ${level} \\| ${label} \\|`, 'm'));
  assert.match(markdown, /^\| chat \| 4 \|/m);  // max concurrency without errors
  assert.equal(fs.readFileSync(files[2], 'utf8').match(/<polyline /g).length, 4);
});

test('a mixed workload reports the short and the long requests apart', async () => {
  const LONG_LEN = 400;
  const LONG_OUT = 4;
  const file = path.join(OUT, 'mixed.json');
  const res = await runBench([...common().map((a) => (a === '1,4' ? '4' : a)), '--long-requests', '2',
    '--long-input-len', String(LONG_LEN), '--long-output-len', String(LONG_OUT), '--label', 'mixed', '--json', file]);
  assert.equal(res.code, 0, res.stderr);
  const report = JSON.parse(fs.readFileSync(file, 'utf8'));
  assert.equal(report.long_requests, 2);
  assert.equal(report.long_input_len, LONG_LEN);
  assert.equal(report.long_output_len, LONG_OUT);
  assert.equal(report.long_concurrency, 1);
  assert.equal(report.levels.length, 1);
  const level = report.levels[0];
  assert.equal(level.num_requests, NUM_PROMPTS + 2);
  assert.equal(level.completed, NUM_PROMPTS + 2, JSON.stringify(level.error_samples));
  assert.ok(level.peak_in_flight >= 2 && level.peak_in_flight <= 5, `peak ${level.peak_in_flight}`);
  assert.deepEqual(Object.keys(level.classes).sort(), ['long', 'short']);
  const expected = { short: [NUM_PROMPTS, INPUT_LEN, OUTPUT_LEN], long: [2, LONG_LEN, LONG_OUT] };
  for (const [name, [count, inputLen, outputLen]] of Object.entries(expected)) {
    const c = level.classes[name];
    const where = `class ${name}`;
    assert.equal(c.num_requests, count, where);
    assert.equal(c.completed, count, where);
    assert.equal(c.failed, 0, where);
    assert.equal(c.total_input_tokens, count * inputLen, where);
    assert.equal(c.total_output_tokens, count * outputLen, where);
    assert.ok(c.output_throughput > 0, where);
    for (const key of ['ttft_ms', 'tpot_ms', 'itl_ms', 'e2e_ms']) checkDistribution(c[key], `${where}.${key}`);
  }
  assert.equal(level.total_output_tokens, NUM_PROMPTS * OUTPUT_LEN + 2 * LONG_OUT);
  assert.ok(Math.abs(level.classes.short.output_throughput + level.classes.long.output_throughput -
    level.output_throughput) < 1e-6);
  assert.match(res.stdout, /^\| c=4 \| long \| 2\/2 \|/m);
  assert.match(res.stdout, /^\| c=4 \| short \| 8\/8 \|/m);
});

test('bad mixed-workload flags are clear errors with exit code 2', async () => {
  const base = ['--url', 'http://127.0.0.1:9', '--concurrency', '1', '--num-prompts', '1'];
  const cases = [
    [['--long-requests', '2'], /--long-requests 2 needs --long-input-len/],
    [['--long-input-len', '512'], /--long-input-len 512 needs --long-requests/],
    [['--long-requests', '1', '--long-input-len', '512', '--long-concurrency', '0'], /--long-concurrency must be/],
    [['--long-requests', '-1'], /--long-requests must be at least 0/],
    [['--long-requests', 'many'], /--long-requests/],
  ];
  for (const [flags, message] of cases) {
    const res = await runBench([...base, ...flags]);
    assert.equal(res.code, 2, `${flags.join(' ')}: ${res.stderr}`);
    assert.match(res.stderr, message, flags.join(' '));
  }
});

test('an unreachable server is a clear error with exit code 7', async () => {
  const res = await runBench(['--url', 'http://127.0.0.1:9', '--concurrency', '1', '--num-prompts', '1']);
  assert.equal(res.code, 7);
  assert.match(res.stderr, /GET http:\/\/127\.0\.0\.1:9\/v1\/models/);
});
