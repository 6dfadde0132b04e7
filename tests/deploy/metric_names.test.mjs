// Every qinfer_ metric the deployment files use (Prometheus alert rules, Grafana dashboards under deploy/) exists in
// a running `qinfer serve`'s /metrics. The GPU gauges appear only on a machine with a GPU: those may be absent here
// but must be names the server registers (src/server/server_metrics.cpp). Environment: as tests/server's Node tests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, rawRequest, postJson } from '../server/node/harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let server;

function deployFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return deployFiles(full);
    return /\.(ya?ml|json)$/.test(e.name) ? [full] : [];
  });
}

before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

test('metric names in deploy/ exist in /metrics', async () => {
  // One request so that every per-request series has been observed once.
  const reply = await postJson(server.url, '/v1/completions', { model: 'tiny', prompt: 'Hi', max_tokens: 2 });
  assert.equal(reply.status, 200, reply.body);
  const exposition = (await rawRequest(server.url, 'GET', '/metrics')).body;
  // Series names, and the family names of `# TYPE` lines (a histogram's family has only _bucket/_sum/_count series).
  const lines = exposition.split('\n');
  const exported = new Set([
    ...lines.filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]),
    ...lines.filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]),
  ]);
  const registered = fs.readFileSync(path.join(ROOT, 'src/server/server_metrics.cpp'), 'utf8');
  const used = new Map();
  for (const file of deployFiles(path.join(ROOT, 'deploy'))) {
    for (const name of fs.readFileSync(file, 'utf8').match(/\bqinfer_[a-z0-9_]+/g) ?? [])
      used.set(name, path.relative(ROOT, file));
  }
  assert.ok(used.size >= 5, `deploy/ uses only ${used.size} qinfer metrics`);
  for (const [name, file] of used) {
    if (exported.has(name)) continue;
    const gpuGauge = /^qinfer_gpu_/.test(name) && registered.includes(`"${name}"`);
    assert.ok(gpuGauge, `${file} uses ${name}, which /metrics does not export`);
  }
});
