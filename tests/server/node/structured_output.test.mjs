// Structured output through a real `qinfer serve` (tiny random model, real Qwen3 tokenizer) with the official OpenAI
// Node SDK: whatever the random model prefers, json_schema output parses (the SDK's parse() helper accepts it) and
// validates against its schema (ajv); vLLM's guided fields constrain too; bad constraints are 400s naming the field;
// --reasoning-parser qwen3 splits <think>...</think> off (the output forced by a regex).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer, loadOpenAI, postJson } from './harness.mjs';

const OpenAI = loadOpenAI();
const require = createRequire(import.meta.url);
const Ajv = require(process.env.QINFER_GRAMMAR_NODE_MODULES + '/ajv').default;
const ajv = new Ajv({ strict: false });
let server;
let client;

before(async () => {
  server = await startServer(['--reasoning-parser', 'qwen3']);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server.stop(); });

const schema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 12 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 14 },
    alerts: { type: 'array', items: { type: 'boolean' }, maxItems: 3 },
    note: { anyOf: [{ type: 'string', maxLength: 6 }, { type: 'null' }] },
  },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};

test('json_schema: parse() accepts the output and it validates, at several seeds, streamed too', async () => {
  const validate = ajv.compile(schema);
  for (const seed of [1, 2, 3]) {
    const res = await client.chat.completions.parse({
      model: 'tiny', messages: [{ role: 'user', content: 'Weather as JSON' }], max_tokens: 300, temperature: 1,
      seed, response_format: { type: 'json_schema', json_schema: { name: 'weather', schema, strict: true } },
    });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'stop', choice.message.content);
    assert.ok(validate(choice.message.parsed), JSON.stringify(validate.errors) + ' ' + choice.message.content);
    // Key order is the schema's.
    const keys = Object.keys(choice.message.parsed);
    assert.deepEqual(keys, Object.keys(schema.properties).filter((k) => keys.includes(k)));
  }
  const stream = await client.chat.completions.create({
    model: 'tiny', messages: [{ role: 'user', content: 'Weather as JSON' }], max_tokens: 300, temperature: 1, seed: 9,
    stream: true, response_format: { type: 'json_schema', json_schema: { name: 'weather', schema } },
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.ok(validate(JSON.parse(text)), text);
});

test('json_object, guided_regex, guided_choice and structured_outputs on chat and completions', async () => {
  const object = await client.chat.completions.create({
    model: 'tiny', messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 200, temperature: 0.8, seed: 4,
    response_format: { type: 'json_object' },
  });
  if (object.choices[0].finish_reason === 'stop') {
    assert.equal(typeof JSON.parse(object.choices[0].message.content), 'object');
  }
  const regex = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Code:', max_tokens: 20, temperature: 1, seed: 5, guided_regex: '[A-Z]{3}-\\d{2}',
  });
  assert.equal(regex.status, 200);
  assert.match(regex.json.choices[0].text, /^[A-Z]{3}-\d{2}$/);
  const choice = await postJson(server.url, '/v1/chat/completions', {
    model: 'tiny', messages: [{ role: 'user', content: 'yes or no?' }], max_tokens: 10, temperature: 1, seed: 6,
    structured_outputs: { choice: ['yes', 'no', 'maybe not'] },
  });
  assert.ok(['yes', 'no', 'maybe not'].includes(choice.json.choices[0].message.content));
  const legacy = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Pick:', max_tokens: 10, temperature: 1, seed: 7, guided_choice: ['left', 'right'],
  });
  assert.ok(['left', 'right'].includes(legacy.json.choices[0].text));
  const grammar = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Expr:', max_tokens: 30, temperature: 1, seed: 8,
    guided_grammar: 'root ::= num (" + " num)*\nnum ::= [1-9] [0-9]?',
  });
  assert.match(grammar.json.choices[0].text, /^[1-9][0-9]?( \+ [1-9][0-9]?)*$/);
});

test('a constraint that cannot finish within max_tokens ends with length', async () => {
  const res = await postJson(server.url, '/v1/chat/completions', {
    model: 'tiny', messages: [{ role: 'user', content: 'list' }], max_tokens: 3, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'l', schema: { type: 'array', minItems: 4,
      items: { type: 'string' } } } },
  });
  assert.equal(res.json.choices[0].finish_reason, 'length');
});

test('logit_bias: -100 bans a token, 100 forces it', async () => {
  const plain = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Hello', max_tokens: 1, temperature: 0, logprobs: 1 });
  const first = plain.json.choices[0].text;
  const tok = await postJson(server.url, '/tokenize', { prompt: first, add_special_tokens: false });
  const banned = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Hello', max_tokens: 1, temperature: 0, logit_bias: { [tok.json.tokens[0]]: -100 } });
  assert.notEqual(banned.json.choices[0].text, first);
  const forced = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Hello', max_tokens: 3, temperature: 0, logit_bias: { 40: 100 } });
  assert.equal(forced.json.choices[0].text, 'III');
  const bad = await postJson(server.url, '/v1/completions', {
    model: 'tiny', prompt: 'Hello', max_tokens: 3, logit_bias: { 999999: 1 } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'logit_bias');
});

test('bad constraints are 400 with the field and the place', async () => {
  const cases = [
    [{ response_format: { type: 'xml_please' } }, 'response_format.type', /json_schema/],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object',
      properties: { a: { type: 'string', uniqueItems: true } } } } } },
    'response_format.json_schema.schema', /\/properties\/a.*uniqueItems/],
    [{ guided_regex: 'a(?=b)' }, 'guided_regex', /position 3.*lookaround/],
    [{ guided_grammar: 'root ::= "a" missing' }, 'guided_grammar', /line 1, column 14.*'missing'/],
  ];
  for (const [fields, param, message] of cases) {
    const res = await postJson(server.url, '/v1/chat/completions', {
      model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 5, ...fields });
    assert.equal(res.status, 400, JSON.stringify(res.json));
    assert.equal(res.json.error.param, param);
    assert.match(res.json.error.message, message);
  }
});

test('reasoning parser: <think>...</think> becomes reasoning_content, streamed and not', async () => {
  const request = { model: 'tiny', messages: [{ role: 'user', content: 'think' }], max_tokens: 40, temperature: 1,
    seed: 3, guided_regex: '<think>[a-z]{2,8}( [a-z]{2,8}){0,2}</think>\n\n[A-Z]{2,4}' };
  const plain = await postJson(server.url, '/v1/chat/completions', request);
  const message = plain.json.choices[0].message;
  assert.match(message.reasoning_content, /^[a-z]{2,8}( [a-z]{2,8}){0,2}$/);
  assert.match(message.content, /^[A-Z]{2,4}$/);
  const stream = await client.chat.completions.create({ ...request, stream: true });
  let reasoning = '', content = '';
  for await (const chunk of stream) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    content += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(reasoning, message.reasoning_content);
  assert.equal(content, message.content);
  const none = await postJson(server.url, '/v1/chat/completions', { ...request, guided_regex: '[A-Z]{3}' });
  assert.equal(none.json.choices[0].message.reasoning_content, null);
});
