// SIGTERM: the listener closes at once, queued requests are answered at once, in-flight streams finish within the
// grace period (or are aborted with an error event after it), the process exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, parseSse, rawRequest, metricValue } from './harness.mjs';

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

// One stream running in the engine (--max-num-seqs 1), two requests queued behind it in the engine and two more waiting
// for a server slot (--max-concurrent-requests 3), streamed and non-streamed alternating. Resolves once all are queued.
async function fillQueue(server, runningTokens) {
  const chat = (stream, maxTokens) => ({ messages: [{ role: 'user', content: 'x' }], max_tokens: maxTokens,
    ignore_eos: true, temperature: 0, stream });
  const timed = (promise) => promise.then((res) => ({ ...res, at: Date.now() }));
  const running = timed(postJson(server.url, '/v1/chat/completions', chat(true, runningTokens)));
  while (await metricValue(server.url, 'qinfer_requests_running') !== 1) await new Promise((r) => setTimeout(r, 20));
  const queued = [true, false, true, false].map((stream) =>
    timed(postJson(server.url, '/v1/chat/completions', chat(stream, 50))).then((res) => ({ ...res, stream })));
  while (await metricValue(server.url, 'qinfer_requests_waiting') !== 2) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 300));  // the last two reach the slot queue
  return { running, queued };
}

// A queued request is answered with 503, or, when its stream had started, an error event: no output, then [DONE].
function assertRefusedUnstarted(res) {
  const message = 'the server is shutting down; the request was not started';
  if (res.status === 503) {
    assert.equal(res.json.error.type, 'service_unavailable');
    assert.equal(res.json.error.message, message);
    return;
  }
  assert.ok(res.stream, `non-streamed queued request answered ${res.status}: ${res.body}`);
  assert.equal(res.status, 200);
  const data = parseSse(res.body);
  assert.equal(data.at(-1), '[DONE]');
  const error = JSON.parse(data.at(-2)).error;
  assert.equal(error.type, 'service_unavailable');
  assert.equal(error.message, message);
  for (const event of data.slice(0, -2)) assert.equal(JSON.parse(event).choices[0].delta.content, '');
}

test('SIGTERM answers queued requests at once while the running stream finishes, then exits 0', { timeout: 90000 },
  async () => {
    const server = await startServer(['--max-num-seqs', '1', '--max-concurrent-requests', '3', '--max-queue-len', '4',
      '--shutdown-grace-seconds', '60', '--keep-alive-timeout', '1']);
    try {
      const { running, queued } = await fillQueue(server, 600);
      const signalled = Date.now();
      server.proc.kill('SIGTERM');
      const answers = await Promise.all(queued);
      for (const res of answers) {
        assert.ok(res.at - signalled < 2000, `a queued request waited ${res.at - signalled} ms after SIGTERM`);
        assertRefusedUnstarted(res);
      }
      const first = await running;
      const data = parseSse(first.body);
      assert.equal(data.at(-1), '[DONE]');
      assert.equal(JSON.parse(data.at(-2)).choices[0].finish_reason, 'length');
      assert.ok(first.at > Math.max(...answers.map((res) => res.at)), 'the queued requests waited for the running one');
      const { code, signal } = await server.exited;
      assert.equal(signal, null);
      assert.equal(code, 0);
      assert.ok(Date.now() - first.at < 3000, `exit ${Date.now() - first.at} ms after the last stream ended`);
    } finally {
      await server.stop();
    }
  });

test('SIGTERM with a full queue and a short grace: queued answered at once, the rest aborted, exit 0 in time',
  { timeout: 90000 }, async () => {
    const grace = 1;
    const server = await startServer(['--max-num-seqs', '1', '--max-concurrent-requests', '3', '--max-queue-len', '4',
      '--shutdown-grace-seconds', String(grace), '--keep-alive-timeout', '1']);
    try {
      const { running, queued } = await fillQueue(server, 1000);
      const signalled = Date.now();
      server.proc.kill('SIGTERM');
      for (const res of await Promise.all(queued)) {
        assert.ok(res.at - signalled < 2000, `a queued request waited ${res.at - signalled} ms after SIGTERM`);
        assertRefusedUnstarted(res);
      }
      const aborted = await running;
      assert.equal(aborted.status, 200);
      const data = parseSse(aborted.body);
      assert.equal(data.at(-1), '[DONE]');
      assert.equal(JSON.parse(data.at(-2)).error.type, 'service_unavailable');
      const { code, signal } = await server.exited;
      assert.equal(signal, null);
      assert.equal(code, 0);
      // The grace period, then at most 1 s for the aborted streams' last events and 1 s to close what is left.
      const exitedAfter = Date.now() - signalled;
      assert.ok(exitedAfter < grace * 1000 + 3000, `exited ${exitedAfter} ms after SIGTERM`);
    } finally {
      await server.stop();
    }
  });
