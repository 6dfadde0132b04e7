// Starts a real `qinfer serve` on a free loopback port for the Node tests, and small HTTP helpers.
// Environment (set by tests/server/CMakeLists.txt): QINFER_BIN, QINFER_TEST_MODEL (a generated tiny model with the
// real Qwen3 tokenizer), QINFER_OPENAI_MODULE (the installed `openai` package directory).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import http from 'node:http';

export const BIN = process.env.QINFER_BIN;
export const MODEL = process.env.QINFER_TEST_MODEL;

export function loadOpenAI() {
  const require = createRequire(import.meta.url);
  const mod = require(process.env.QINFER_OPENAI_MODULE);
  return mod.default ?? mod.OpenAI ?? mod;
}

// Starts the server on the test model; resolves once /health answers 200. `args` are extra flags.
export async function startServer(args = [], options = {}) {
  return startServerWith(['--model', MODEL, '--port', '0', '--max-model-len', '1024', '--threads', '1',
    '--served-model-name', 'tiny', ...args], options);
}

// Starts `qinfer serve` with exactly `args` (they must include `--port 0`); resolves once /health answers 200.
export async function startServerWith(args, { env = {} } = {}) {
  const proc = spawn(BIN, ['serve', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not report its port:\n' + log)), 30000);
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const match = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (match) { clearTimeout(timer); resolve(Number(match[1])); }
    });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60000;
  while (true) {
    const res = await rawRequest(url, 'GET', '/health').catch(() => null);
    if (res && res.status === 200) break;
    if (Date.now() > deadline) throw new Error('server never became healthy:\n' + log);
    await new Promise((r) => setTimeout(r, 100));
  }
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    url, port, proc, exited,
    log: () => log,
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

// One HTTP request with a fresh connection (no keep-alive). Resolves {status, headers, body}.
export function rawRequest(url, method, path, { body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url + path, { method, headers, agent: false }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { data += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

export async function postJson(url, path, payload, headers = {}) {
  const res = await rawRequest(url, 'POST', path,
    { body: JSON.stringify(payload), headers: { 'Content-Type': 'application/json', ...headers } });
  let json = null;
  try { json = JSON.parse(res.body); } catch { /* left null for non-JSON bodies */ }
  return { ...res, json };
}

// Parses an SSE body into its data payloads; checks the framing of every event.
export function parseSse(body) {
  const events = body.split('\n\n');
  const last = events.pop();
  if (last !== '') throw new Error('SSE body does not end with a blank line: ' + JSON.stringify(last));
  const data = [];
  for (const event of events) {
    if (event.startsWith(':')) continue;  // comment (keep-alive)
    if (!event.startsWith('data: ') || event.includes('\n')) throw new Error('bad SSE event: ' + JSON.stringify(event));
    data.push(event.slice('data: '.length));
  }
  return data;
}

export async function metricValue(url, name) {
  const res = await rawRequest(url, 'GET', '/metrics');
  const line = res.body.split('\n').find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

// Starts a long streamed chat completion and drops the connection after its third chunk of data (a client that goes
// away mid-stream). Rejects when no data arrives within 20 s.
export function dropStreamAfterThreeChunks(url, extra = {}) {
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'long' }], max_tokens: 900, ignore_eos: true,
    stream: true, ...extra });
  let timer;
  return new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error('no stream data')), 20000);
    const req = http.request(url + '/v1/chat/completions',
      { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json' } }, (res) => {
        let seen = 0;
        res.on('data', () => { seen += 1; if (seen === 3) { req.destroy(); resolve(); } });
      });
    req.on('error', () => {});
    req.on('close', resolve);
    req.end(body);
  }).finally(() => clearTimeout(timer));
}
