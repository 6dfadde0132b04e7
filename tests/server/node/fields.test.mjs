// Request fields vLLM users send: `priority` honoured under --scheduling-policy priority and refused otherwise, and
// model ids with a slash (the default served name of `--model ORG/NAME`) retrievable through the official SDK.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MODEL, startServer, startServerWith, loadOpenAI, postJson, rawRequest, metricValue,
  dropStreamAfterThreeChunks } from './harness.mjs';

const OpenAI = loadOpenAI();
const chat = (extra) => ({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, ...extra });

test('priority: lower first under --scheduling-policy priority', { timeout: 90000 }, async () => {
  const server = await startServer(['--scheduling-policy', 'priority', '--max-num-seqs', '1']);
  try {
    const order = [];
    const send = (name, body) => postJson(server.url, '/v1/chat/completions', body).then((res) => {
      assert.equal(res.status, 200, res.body);
      order.push(name);
    });
    // One long request holds the only sequence slot; the two short ones queue behind it, the later one better.
    const long = send('long', chat({ max_tokens: 900, ignore_eos: true }));
    await new Promise((r) => setTimeout(r, 200));
    const late = send('priority 10', chat({ priority: 10 }));
    await new Promise((r) => setTimeout(r, 100));
    const early = send('priority -5', chat({ priority: -5 }));
    await Promise.all([long, late, early]);
    assert.ok(order.indexOf('priority -5') < order.indexOf('priority 10'), order.join(', '));
    const bad = await postJson(server.url, '/v1/chat/completions', chat({ priority: 'high' }));
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'priority');
  } finally {
    await server.stop();
  }
});

test('priority: a non-zero value is a 400 naming it under fcfs, 0 is accepted', { timeout: 60000 }, async () => {
  const server = await startServer(['--allowed-origins', '["*"]']);
  try {
    const refused = await postJson(server.url, '/v1/chat/completions', chat({ priority: 3 }));
    assert.equal(refused.status, 400, refused.body);
    assert.equal(refused.json.error.param, 'priority');
    assert.match(refused.json.error.message, /--scheduling-policy priority/);
    assert.equal((await postJson(server.url, '/v1/chat/completions', chat({ priority: 0 }))).status, 200);
    // vLLM's JSON-list form of --allowed-origins is the list ["*"], not the literal origin '["*"]'.
    const cors = await postJson(server.url, '/v1/chat/completions', chat(), { Origin: 'http://any.example' });
    assert.equal(cors.headers['access-control-allow-origin'], '*');
  } finally {
    await server.stop();
  }
});

test('models.retrieve works for an id with a slash', { timeout: 60000 }, async () => {
  const server = await startServerWith(['--model', MODEL, '--port', '0', '--max-model-len', '1024', '--threads', '1',
    '--served-model-name', 'Qwen/Qwen3-4B-Instruct-2507']);
  try {
    const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none' });
    const model = await client.models.retrieve('Qwen/Qwen3-4B-Instruct-2507');
    assert.equal(model.id, 'Qwen/Qwen3-4B-Instruct-2507');
    await assert.rejects(client.models.retrieve('Qwen/other'), (err) => err.status === 404);
    const raw = await postJson(server.url, '/v1/chat/completions', chat({ model: 'Qwen/Qwen3-4B-Instruct-2507' }));
    assert.equal(raw.status, 200, raw.body);
  } finally {
    await server.stop();
  }
});

// A stream its client drops counts like any finished request: finished_reason "abort", the e2e latency histogram, the
// token counters, not only qinfer_client_disconnects_total.
test('a stream aborted by its client is in every request metric', { timeout: 60000 }, async () => {
  const server = await startServer();
  try {
    await dropStreamAfterThreeChunks(server.url);
    const deadline = Date.now() + 10000;
    while ((await metricValue(server.url, 'qinfer_client_disconnects_total')) !== 1 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    let metrics = '';
    while (Date.now() < deadline) {
      metrics = (await rawRequest(server.url, 'GET', '/metrics')).body;
      if (metrics.includes('qinfer_request_success_total{finished_reason="abort"} 1')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const value = (name) => Number((metrics.split('\n').find((l) => l.startsWith(name + ' ')) ?? 'x NaN').split(' ')[1]);
    assert.match(metrics, /^qinfer_request_success_total\{finished_reason="abort"\} 1$/m);
    assert.equal(value('qinfer_e2e_request_latency_seconds_count'), 1);
    assert.ok(value('qinfer_prompt_tokens_total') > 0, metrics);
    assert.ok(value('qinfer_generation_tokens_total') >= 2, metrics);
  } finally {
    await server.stop();
  }
});
