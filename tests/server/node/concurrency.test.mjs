// Many concurrent streams give exactly their solo (greedy) outputs; a client that disconnects mid-stream frees its
// request (the engine's running gauge returns to 0), also when it hangs up while its stream is queued and silent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startServer, rawRequest, postJson, parseSse, metricValue, dropStreamAfterThreeChunks } from './harness.mjs';

const NUM_STREAMS = Number(process.env.QINFER_TEST_STREAMS ?? 64);
let server;

before(async () => { server = await startServer(['--max-num-seqs', '64']); });
after(async () => { await server.stop(); });

// Polls a metric until it has `value` (or 10 s pass); returns the last value read.
async function waitForMetric(name, value, intervalMs) {
  const deadline = Date.now() + 10000;
  let current;
  do {
    await new Promise((r) => setTimeout(r, intervalMs));
    current = await metricValue(server.url, name);
  } while (current !== value && Date.now() < deadline);
  return current;
}

function streamedText(body) {
  return parseSse(body).slice(0, -1).map((d) => JSON.parse(d))
    .map((c) => c.choices.map((x) => x.delta.content ?? '').join('')).join('');
}

test(`${NUM_STREAMS} concurrent streams equal their solo outputs`, { timeout: 120000 }, async () => {
  // Sixteen distinct requests, each repeated: every concurrent stream has a solo reference.
  const requests = Array.from({ length: NUM_STREAMS }, (_, i) => ({
    messages: [{ role: 'user', content: `Request number ${i % 16}: tell me something` }],
    max_tokens: 12 + (i % 16) % 5, temperature: 0, ignore_eos: true, stream: true }));
  const solo = new Map();
  for (const r of requests.slice(0, 16))
    solo.set(JSON.stringify(r), streamedText((await postJson(server.url, '/v1/chat/completions', r)).body));
  const results = await Promise.all(requests.map((r) => postJson(server.url, '/v1/chat/completions', r)));
  results.forEach((res, i) => {
    assert.equal(res.status, 200);
    assert.equal(streamedText(res.body), solo.get(JSON.stringify(requests[i])), `stream ${i}`);
    const last = parseSse(res.body).at(-2);
    assert.equal(JSON.parse(last).choices[0].finish_reason, 'length');
  });
});

test('disconnect mid-stream aborts the request', { timeout: 30000 }, async () => {
  await dropStreamAfterThreeChunks(server.url, { temperature: 0 });
  const deadline = Date.now() + 10000;
  let running;
  do {
    await new Promise((r) => setTimeout(r, 100));
    running = await metricValue(server.url, 'qinfer_requests_running');
  } while (running !== 0 && Date.now() < deadline);
  assert.equal(running, 0);
  assert.ok((await metricValue(server.url, 'qinfer_client_disconnects_total')) >= 1);
  const usage = await metricValue(server.url, 'qinfer_kv_cache_usage_ratio');
  assert.ok(usage < 0.5, `KV usage ${usage} after the abort`);
});

test('disconnect while waiting for a non-streamed answer aborts the request', { timeout: 30000 }, async () => {
  const disconnectsBefore = await metricValue(server.url, 'qinfer_client_disconnects_total');
  const req = http.request(server.url + '/v1/chat/completions',
    { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json' } }, () => {});
  req.on('error', () => {});
  req.end(JSON.stringify({ messages: [{ role: 'user', content: 'long' }], max_tokens: 1000, ignore_eos: true,
    temperature: 0 }));
  // Once the engine runs it, the client goes away; without disconnect detection it would run all 1000 tokens.
  assert.equal(await waitForMetric('qinfer_requests_running', 1, 20), 1);
  req.destroy();
  assert.equal(await waitForMetric('qinfer_requests_running', 0, 50), 0);
  assert.equal(await metricValue(server.url, 'qinfer_client_disconnects_total'), disconnectsBefore + 1);
  const aborted = (await rawRequest(server.url, 'GET', '/metrics')).body
    .split('\n').find((l) => l.startsWith('qinfer_request_success_total{finished_reason="abort"}'));
  assert.ok(aborted && Number(aborted.split(' ').pop()) >= 1, 'the request finished as aborted');
});

test('a stream queued in the engine whose client hangs up (nothing written since) is aborted', { timeout: 60000 },
  async () => {
    // One sequence per batch: a long non-streamed request holds it, the stream waits in the engine's queue and
    // produces no output, so only the hang-up itself can reveal the gone client.
    const busy = await startServer(['--max-num-seqs', '1']);
    try {
      const metric = (name) => metricValue(busy.url, name);
      const holder = postJson(busy.url, '/v1/completions', { prompt: 'x', max_tokens: 300, ignore_eos: true,
        temperature: 0 }).catch((e) => ({ status: e.message }));
      while ((await metric('qinfer_requests_running')) !== 1) await new Promise((r) => setTimeout(r, 20));
      const disconnectsBefore = await metric('qinfer_client_disconnects_total');
      const req = http.request(busy.url + '/v1/chat/completions',
        { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json' } });
      req.on('error', () => {});
      const headers = new Promise((resolve) => req.on('response', resolve));
      req.end(JSON.stringify({ messages: [{ role: 'user', content: 'q' }], max_tokens: 5, stream: true }));
      await headers;  // the stream is handed to the writer once its headers are out
      let deadline = Date.now() + 10000;
      while ((await metric('qinfer_requests_waiting')) !== 1 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      assert.equal(await metric('qinfer_requests_waiting'), 1);
      req.destroy();
      const hungUp = Date.now();
      deadline = hungUp + 10000;
      let waiting;
      do {
        await new Promise((r) => setTimeout(r, 20));
        waiting = await metric('qinfer_requests_waiting');
      } while (waiting !== 0 && Date.now() < deadline);
      assert.equal(waiting, 0);
      // Seen from the hang-up itself: a write-only server learns it from the second keep-alive comment (>= 2 s).
      assert.ok(Date.now() - hungUp < 1500, `noticed after ${Date.now() - hungUp} ms`);
      assert.equal(await metric('qinfer_client_disconnects_total'), disconnectsBefore + 1);
      assert.equal(await metric('qinfer_requests_running'), 1, 'the holder is still generating');
      assert.equal((await holder).status, 200);
    } finally {
      await busy.stop();
    }
  });
