// Overload: with one slot and no queue, a second request while a stream runs gets 429 + Retry-After (the SDK sees a
// RateLimitError), and the running stream is not disturbed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, loadOpenAI, postJson } from './harness.mjs';

const OpenAI = loadOpenAI();
let server;

before(async () => { server = await startServer(['--max-concurrent-requests', '1', '--max-queue-len', '0']); });
after(async () => { await server.stop(); });

test('429 with Retry-After when full; nothing lost', async () => {
  const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'none', maxRetries: 0 });
  const stream = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'go' }],
    max_tokens: 150, ignore_eos: true, temperature: 0, stream: true });
  const iterator = stream[Symbol.asyncIterator]();
  await iterator.next();  // the stream holds the only slot now
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
    (err) => err instanceof OpenAI.RateLimitError && err.status === 429);
  const raw = await postJson(server.url, '/v1/completions', { prompt: 'x', max_tokens: 2 });
  assert.equal(raw.status, 429);
  assert.equal(raw.headers['retry-after'], '1');
  assert.equal(raw.json.error.type, 'rate_limit_exceeded');
  let tokens = 0;
  let finish = null;
  for (let r = await iterator.next(); !r.done; r = await iterator.next())
    for (const c of r.value.choices) { if (c.finish_reason) finish = c.finish_reason; tokens += 1; }
  assert.equal(finish, 'length');
  // After the stream, the slot is free again.
  const after = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }],
    max_tokens: 2 });
  assert.equal(after.usage.completion_tokens, 2);
});
