// SIGTERM: the listener closes at once, in-flight streams finish, the process exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, parseSse, rawRequest } from './harness.mjs';

test('SIGTERM drains in-flight streams and exits 0', { timeout: 60000 }, async () => {
  const server = await startServer(['--shutdown-grace-seconds', '30', '--keep-alive-timeout', '1']);
  try {
    const inflight = postJson(server.url, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }],
      max_tokens: 60, ignore_eos: true, temperature: 0, stream: true });
    await new Promise((r) => setTimeout(r, 300));
    server.proc.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const refused = await rawRequest(server.url, 'GET', '/health').then((res) => res.status, (e) => e.code);
    assert.ok(refused === 'ECONNREFUSED' || refused === 503, `new request after SIGTERM: ${refused}`);
    const res = await inflight;
    assert.equal(res.status, 200);
    const data = parseSse(res.body);
    assert.equal(data.at(-1), '[DONE]');
    assert.equal(JSON.parse(data.at(-2)).choices[0].finish_reason, 'length');
    const { code, signal } = await server.exited;
    assert.equal(signal, null);
    assert.equal(code, 0);
  } finally {
    await server.stop();
  }
});

test('SIGTERM with a short grace aborts what is left and still exits 0', { timeout: 60000 }, async () => {
  const server = await startServer(['--shutdown-grace-seconds', '0.5', '--keep-alive-timeout', '1']);
  try {
    const inflight = postJson(server.url, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1000, ignore_eos: true, temperature: 0, stream: true });
    await new Promise((r) => setTimeout(r, 300));
    server.proc.kill('SIGTERM');
    const res = await inflight;
    assert.equal(res.status, 200);
    const data = parseSse(res.body);
    assert.equal(data.at(-1), '[DONE]');
    const { code } = await server.exited;
    assert.equal(code, 0);
  } finally {
    await server.stop();
  }
});
