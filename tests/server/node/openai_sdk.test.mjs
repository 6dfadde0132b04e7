// The official OpenAI Node SDK against a real `qinfer serve` (tiny random model, real Qwen3 tokenizer).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, loadOpenAI, postJson, metricValue } from './harness.mjs';

const OpenAI = loadOpenAI();
const KEY = 'test-key-123';
let server;
let client;

before(async () => {
  server = await startServer(['--api-key', KEY, '--response-cache-size', '8']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: KEY, maxRetries: 0 });
});
after(async () => { await server.stop(); });

test('models list names the served model', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, ['tiny']);
  assert.equal(page.data[0].object, 'model');
});

test('chat completion (plain) has the OpenAI shape and usage', async () => {
  const res = await client.chat.completions.create({
    model: 'tiny', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, temperature: 0,
  });
  assert.match(res.id, /^chatcmpl-/);
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.model, 'tiny');
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.equal(typeof res.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(res.choices[0].finish_reason));
  assert.ok(res.usage.prompt_tokens > 0);
  assert.ok(res.usage.completion_tokens >= 1 && res.usage.completion_tokens <= 8);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
  assert.equal(typeof res.usage.prompt_tokens_details.cached_tokens, 'number');
  // The prompt is the chat template's render: the same count /tokenize gives for these messages.
  const tok = await postJson(server.url, '/tokenize', { messages: [{ role: 'user', content: 'Hello there' }] },
    { Authorization: `Bearer ${KEY}` });
  assert.equal(res.usage.prompt_tokens, tok.json.count);
});

test('streamed chat concatenates to the non-streamed text and ends with a usage chunk', async () => {
  const request = { model: 'tiny', messages: [{ role: 'user', content: 'Count to five' }], max_tokens: 24, seed: 7,
    temperature: 0.8 };
  const plain = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true,
    stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      text += choice.delta.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.deepEqual(usage, plain.usage);
});

test('completions endpoint', async () => {
  const res = await client.completions.create({ model: 'tiny', prompt: 'The capital of France is', max_tokens: 5,
    temperature: 0, logprobs: 2 });
  assert.equal(res.object, 'text_completion');
  assert.equal(typeof res.choices[0].text, 'string');
  assert.equal(res.choices[0].logprobs.tokens.length, res.usage.completion_tokens);
  assert.equal(res.choices[0].logprobs.top_logprobs[0] !== null, true);
  assert.equal(res.usage.completion_tokens, 5);
  assert.equal(res.choices[0].finish_reason, 'length');
});

test('tool definitions are rendered into the prompt', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [{ role: 'user', content: 'Weather in Paris?' }];
  const withTools = await client.chat.completions.create({ model: 'tiny', messages, tools, max_tokens: 4,
    temperature: 0 });
  const without = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 4, temperature: 0 });
  assert.ok(withTools.usage.prompt_tokens > without.usage.prompt_tokens + 20);
  const tok = await postJson(server.url, '/tokenize', { messages, tools }, { Authorization: `Bearer ${KEY}` });
  assert.equal(tok.json.count, withTools.usage.prompt_tokens);
  const text = await postJson(server.url, '/detokenize', { tokens: tok.json.tokens },
    { Authorization: `Bearer ${KEY}` });
  assert.match(text.json.prompt, /<tools>\n\{"type": "function", "function": \{"name": "get_weather"/);
});

test('tool_choice: required and named add nothing to the prompt (a grammar forces the call), none leaves tools out, unknown names 400',
  async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
      properties: { city: { type: 'string' } } } } }];
    const messages = [{ role: 'user', content: 'Weather in Paris?' }];
    const auth = { Authorization: `Bearer ${KEY}` };
    const base = (await postJson(server.url, '/tokenize', { messages, tools }, auth)).json.count;
    const ask = (extra) => client.chat.completions.create({ model: 'tiny', messages, tools, max_tokens: 4,
      temperature: 0, ...extra });
    const required = await ask({ tool_choice: 'required' });
    assert.equal(required.usage.prompt_tokens, base);
    const named = await ask({ tool_choice: { type: 'function', function: { name: 'get_weather' } } });
    assert.equal(named.usage.prompt_tokens, base);
    // Four tokens cannot finish the call: the output is cut, and says so.
    assert.equal(named.choices[0].finish_reason, 'length');
    const none = await ask({ tool_choice: 'none' });
    const plain = (await postJson(server.url, '/tokenize', { messages }, auth)).json.count;
    assert.equal(none.usage.prompt_tokens, plain);
    await assert.rejects(ask({ tool_choice: { type: 'function', function: { name: 'get_time' } } }),
      (err) => err.status === 400 && err.param === 'tool_choice' && /get_time/.test(err.message));
  });

test('400 names the bad field', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }),
    (err) => err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === 'temperature');
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], top_p: 3 }),
    (err) => err.status === 400 && err.param === 'top_p' && /top_p/.test(err.message));
  await assert.rejects(client.chat.completions.create({ model: 'tiny', messages: [] }),
    (err) => err.status === 400 && err.param === 'messages');
});

test('404 for an unknown model', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.code === 'model_not_found');
});

test('401 without the right key; /health stays open', async () => {
  const wrong = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'test-key-124', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (err) => err instanceof OpenAI.AuthenticationError && err.status === 401);
  const health = await fetch(server.url + '/health');
  assert.equal(health.status, 200);
});

test('prompt longer than the context gets 400 naming both numbers', async () => {
  const long = 'word '.repeat(1500);
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: long }] }),
    (err) => err.status === 400 && /1024/.test(err.message) && /\d{4} tokens/.test(err.message));
});

test('response cache answers a repeated deterministic request without the engine', async () => {
  const request = { model: 'tiny', messages: [{ role: 'user', content: 'cache me' }], max_tokens: 6, temperature: 0 };
  const hits = await metricValue(server.url, 'qinfer_response_cache_hits_total');
  const steps = await metricValue(server.url, 'qinfer_engine_steps_total');
  const first = await client.chat.completions.create(request);
  const stepsAfterFirst = await metricValue(server.url, 'qinfer_engine_steps_total');
  const second = await client.chat.completions.create(request);
  assert.ok(stepsAfterFirst > steps);
  assert.equal(await metricValue(server.url, 'qinfer_engine_steps_total'), stepsAfterFirst);
  assert.equal(await metricValue(server.url, 'qinfer_response_cache_hits_total'), hits + 1);
  assert.deepEqual(second.choices, first.choices);
  assert.deepEqual(second.usage, first.usage);
  assert.notEqual(second.id, first.id);
  // Unseeded sampling is not deterministic: never cached.
  await client.chat.completions.create({ ...request, temperature: 1 });
  await client.chat.completions.create({ ...request, temperature: 1 });
  assert.equal(await metricValue(server.url, 'qinfer_response_cache_hits_total'), hits + 1);
});
