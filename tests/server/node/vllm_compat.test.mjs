// A drop-in for vLLM users: the deployment guides' launch lines start qinfer unchanged (on a test model that has the
// context they ask for), every accepted vLLM flag does what docs/CLI.md says, --metrics-compat vllm exports vLLM's
// names, the Grafana dashboard names only exported metrics, and the start-up and request logs say what they should.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, MODEL, startServer, startServerWith, postJson, rawRequest } from './harness.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const DASHBOARD = path.join(REPO, 'deploy/grafana/qinfer.json');
const chat = (content, extra = {}) => ({ messages: [{ role: 'user', content }], max_tokens: 4, ...extra });

// The tiny test model with a 262144-token context, as the guides' `--max-model-len 262144` needs.
let longModel;
let scratch;
before(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'qinfer-vllm-compat-'));
  const config = JSON.parse(fs.readFileSync(path.join(MODEL, 'config.json'), 'utf8'));
  config.max_position_embeddings = 262144;
  fs.writeFileSync(path.join(scratch, 'config.json'), JSON.stringify(config));
  longModel = path.join(scratch, 'long-model');
  const made = spawnSync(BIN, ['make-test-model', '--out', longModel, '--config', path.join(scratch, 'config.json'),
    '--seed', '1', '--tokenizer-dir', MODEL], { encoding: 'utf8' });
  assert.equal(made.status, 0, made.stderr);
});
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

const count = (log, text) => log.split('\n').filter((line) => line.includes(text)).length;

// Runs `qinfer serve ARGS` to its end (a start-up that fails); resolves {code, log}.
function serveToExit(args) {
  return new Promise((resolve) => {
    const proc = spawn(BIN, ['serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    proc.stderr.on('data', (chunk) => { log += chunk; });
    proc.on('exit', (code) => resolve({ code, log }));
  });
}

test('the vLLM guide line starts unchanged on a model with the context it asks for', { timeout: 90000 }, async () => {
  // Only --port differs from the guide (8000 -> 0: any free port).
  const server = await startServerWith(['--model', longModel, '--tensor-parallel-size', '1', '--dtype', 'half',
    '--enable-prefix-caching', '--max-model-len', '262144', '--gpu-memory-utilization', '0.9', '--max-num-seqs', '256',
    '--port', '0', '--threads', '1']);
  try {
    const res = await postJson(server.url, '/v1/chat/completions', chat('Hello'));
    assert.equal(res.status, 200, res.body);
    const log = server.log();
    assert.equal(count(log, '--dtype half: not applied'), 1, log);
    assert.match(log, /engine: cpu, context 262144, max-num-seqs 256, .*prefix caching on/);
    assert.match(log, /memory plan: weights [\d.]+ [KMG]iB, activations [\d.]+ [KMG]iB, graphs n\/a, KV cache /);
    assert.match(log, /ready in [\d.]+ s \(tokenizer [\d.]+ s, weights [\d.]+ s, backend [\d.]+ s, warm-up [\d.]+ s\)/);
  } finally {
    await server.stop();
  }
});

test('the other guides\' flags: positional model, vLLM spellings, TGI and SGLang aliases', { timeout: 90000 }, async () => {
  const template = path.join(scratch, 'plain.jinja');
  fs.writeFileSync(template, '{% for m in messages %}{{ m.content }}{% endfor %}');
  const server = await startServerWith([MODEL, '--port', '0', '--threads', '1', '--tokenizer_mode', 'auto',
    '--trust-remote-code', '--enforce-eager', '--scheduler-policy', 'lpm',
    '--enable-auto-tool-choice', '--tool-call-parser', 'hermes', '--seed', '7', '--max-logprobs', '3',
    '--disable-log-requests', '--chat-template', template, '--generation-config', 'vllm', '--uvicorn-log-level',
    'info', '--allowed-origins', '["http://a.example"]', '--max-batch-size', '8', '--max-input-length', '40',
    '--max-total-tokens', '1024', '--num-shard', '1', '--kv_cache_memory_bytes', '16MiB', '--log-level', 'info']);
  try {
    const log = server.log();
    assert.equal(count(log, '--trust-remote-code: nothing remote ever runs'), 1, log);
    assert.equal(count(log, '--uvicorn-log-level info: not applied'), 1, log);
    assert.match(log, /engine: cpu, context 1024, max-num-seqs 8, .*scheduling lpm, KV fp32 in blocks of 16$/m);
    assert.match(log, /chat template from .*plain\.jinja/);
    assert.match(log, /KV cache 16\.0 MiB/);
    // The file template renders only the contents: "Hello" is one token, no chat markup around it.
    const tokenized = await postJson(server.url, '/tokenize', { messages: [{ role: 'user', content: 'Hello' }] });
    assert.equal(tokenized.json.count, 1, tokenized.body);
    // --max-logprobs 3
    assert.equal((await postJson(server.url, '/v1/chat/completions', chat('x', { logprobs: true, top_logprobs: 3 }))).status, 200);
    const tooMany = await postJson(server.url, '/v1/chat/completions', chat('x', { logprobs: true, top_logprobs: 4 }));
    assert.equal(tooMany.status, 400, tooMany.body);
    assert.match(tooMany.json.error.message, /at most 3 \(max_logprobs\)/);
    // --max-input-length 40 (TGI)
    const long = await postJson(server.url, '/v1/chat/completions', chat('word '.repeat(60)));
    assert.equal(long.status, 400, long.body);
    assert.match(long.json.error.message, /at most 40 \(max_input_tokens\)/);
    // --allowed-origins in vLLM's JSON-list form
    const cors = await rawRequest(server.url, 'GET', '/v1/models', { headers: { Origin: 'http://a.example' } });
    assert.equal(cors.headers['access-control-allow-origin'], 'http://a.example');
    // --disable-log-requests: no per-request line
    assert.equal(count(server.log(), 'request '), 0, server.log());
    // --tool-call-parser hermes: a tool call in the output is parsed (the parser is always on with tools).
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
    const forced = await postJson(server.url, '/v1/chat/completions',
      chat('x', { tools, tool_choice: { type: 'function', function: { name: 'f' } }, max_tokens: 8 }));
    assert.equal(forced.status, 200, forced.body);
  } finally {
    await server.stop();
  }
});

test('--seed makes sampled output repeat across server runs', { timeout: 90000 }, async () => {
  const sample = async () => {
    const server = await startServer(['--seed', '11', '--schedule-policy', 'lpm']);
    try {
      const res = await postJson(server.url, '/v1/completions',
        { prompt: 'Once', max_tokens: 12, temperature: 1, ignore_eos: true });
      assert.equal(res.status, 200, res.body);
      return res.json.choices[0].text;
    } finally {
      await server.stop();
    }
  };
  assert.equal(await sample(), await sample());
});

test('refused values exit with the documented codes and name what to use', { timeout: 60000 }, async () => {
  const tp = await serveToExit(['--model', MODEL, '--port', '0', '--device', 'cpu', '--tensor-parallel-size', '3']);
  assert.equal(tp.code, 2, tp.log);
  assert.match(tp.log, /--tensor-parallel-size 3 does not divide the model's num_key_value_heads/);
  const parser = await serveToExit(['--model', MODEL, '--port', '0', '--tool-call-parser', 'mistral']);
  assert.equal(parser.code, 5, parser.log);
  assert.match(parser.log, /--tool-call-parser hermes/);
  const typo = await serveToExit(['--model', MODEL, '--port', '0', '--max-num-seq', '4']);
  assert.equal(typo.code, 2, typo.log);
  assert.match(typo.log, /qinfer: error: qinfer serve: unknown flag '--max-num-seq' \(did you mean '--max-num-seqs'\?\)/);
  const small = await serveToExit(['--model', MODEL, '--port', '0', '--threads', '1', '--max-model-len', '1024',
    '--kv-cache-memory-bytes', '1MiB']);
  assert.equal(small.code, 2, small.log);
  assert.match(small.log, /lower --max-model-len or give the KV cache more memory \(--kv-cache-memory-bytes/);
});

test('a failed load reports its error before anything about shutting down', { timeout: 60000 }, async () => {
  const { code, log } = await serveToExit(['--model', path.join(scratch, 'missing'), '--port', '0']);
  assert.equal(code, 3, log);
  const failed = log.indexOf('loading failed:');
  assert.ok(failed >= 0, log);
  const shutdown = log.indexOf('shutting down');
  assert.ok(shutdown === -1 || failed < shutdown, log);
});

// The metric names a PromQL expression reads: identifiers outside label matchers, ranges, strings and by/without
// lists that are not functions, keywords or numbers.
function metricNames(expr) {
  const stripped = expr.replace(/"[^"]*"/g, '').replace(/\{[^}]*\}/g, ' ').replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const keywords = new Set(['by', 'without', 'on', 'ignoring', 'bool', 'offset', 'and', 'or', 'unless', 'inf', 'nan']);
  return [...stripped.matchAll(/(?<![\w:.$])[A-Za-z_:][\w:]*(?![\w:(]|\s*\()/g)].map((m) => m[0])
    .filter((name) => !keywords.has(name.toLowerCase()));
}

// Sample names and declared families (# TYPE) of a /metrics body.
function exported(body) {
  const names = new Set();
  for (const line of body.split('\n')) {
    const type = /^# TYPE (\S+) /.exec(line);
    if (type) names.add(type[1]);
    else if (line && !line.startsWith('#')) names.add(line.split(/[{ ]/)[0]);
  }
  return names;
}

test('default server: request log lines, qinfer_batch_size, dashboard queries name exported metrics, no vllm: names',
  { timeout: 60000 }, async () => {
    const server = await startServer();
    try {
      const res = await postJson(server.url, '/v1/chat/completions', chat('Hello', { max_tokens: 3, ignore_eos: true }));
      assert.equal(res.status, 200, res.body);
      await new Promise((r) => setTimeout(r, 100));
      assert.match(server.log(), new RegExp(`request \\d+ ${res.json.id}: prompt \\d+ tokens \\(\\d+ cached\\), ` +
        'output 3 tokens, queue [\\d.]+ s, TTFT [\\d.]+ s, duration [\\d.]+ s, finish length'));
      const body = (await rawRequest(server.url, 'GET', '/metrics')).body;
      const names = exported(body);
      assert.ok(names.has('qinfer_batch_size'), body);
      assert.ok(![...names].some((name) => name.startsWith('vllm:')), body);
      const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
      const queries = dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr));
      // label_values(METRIC, LABEL): only the first argument is a metric.
      queries.push(...dashboard.templating.list.filter((v) => v.type === 'query')
        .map((v) => /^label_values\(([^,]+),/.exec(v.query)[1]));
      assert.ok(queries.length >= 10);
      for (const query of queries) {
        const used = metricNames(query);
        assert.ok(used.length > 0, `no metric in ${query}`);
        for (const name of used) assert.ok(names.has(name), `${name} (in ${query}) is not exported`);
      }
    } finally {
      await server.stop();
    }
  });

test('--metrics-compat vllm exports vLLM\'s names with model_name', { timeout: 60000 }, async () => {
  const server = await startServer(['--metrics-compat', 'vllm']);
  try {
    const res = await postJson(server.url, '/v1/chat/completions', chat('Hello', { max_tokens: 3, ignore_eos: true }));
    assert.equal(res.status, 200, res.body);
    const body = (await rawRequest(server.url, 'GET', '/metrics')).body;
    const labels = '{model_name="tiny",engine="0"}';
    for (const gauge of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc'])
      assert.ok(body.includes(`${gauge}${labels} `), `${gauge}:\n${body}`);
    for (const counter of ['vllm:prefix_cache_queries_total', 'vllm:prefix_cache_hits_total', 'vllm:num_preemptions_total'])
      assert.ok(body.includes(`${counter}${labels} `), `${counter}:\n${body}`);
    assert.match(body, /^vllm:prompt_tokens_total\{model_name="tiny",engine="0"\} [1-9]/m);
    assert.match(body, /^vllm:generation_tokens_total\{model_name="tiny",engine="0"\} 3$/m);
    assert.match(body, /^vllm:request_success_total\{model_name="tiny",engine="0",finished_reason="length"\} 1$/m);
    for (const histogram of ['vllm:time_to_first_token_seconds', 'vllm:inter_token_latency_seconds',
      'vllm:time_per_output_token_seconds', 'vllm:e2e_request_latency_seconds', 'vllm:request_queue_time_seconds'])
      assert.match(body, new RegExp(`^${histogram}_count\\{model_name="tiny",engine="0"\\} [1-9]`, 'm'), histogram);
    // vLLM's buckets, not qinfer's: the TTFT histogram's first bound is 1 ms, then 5 ms.
    assert.ok(body.includes('vllm:time_to_first_token_seconds_bucket{model_name="tiny",engine="0",le="0.005"}'));
    assert.ok(body.includes('qinfer_time_to_first_token_seconds_count 1'));
  } finally {
    await server.stop();
  }
});
