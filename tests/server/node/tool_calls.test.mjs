// Tool calls under a grammar through a real `qinfer serve` (tiny random model, real Qwen3 tokenizer): with
// tool_choice "required", a named function, or strict tools under "auto" (the grammar starts at the model's
// <tool_call>), every call parses and its arguments validate against the function's schema (ajv), whatever the
// random model prefers; with --reasoning-parser qwen3 the grammar starts after </think>.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { startServer, loadOpenAI, postJson } from './harness.mjs';

const OpenAI = loadOpenAI();
const require = createRequire(import.meta.url);
const Ajv = require(process.env.QINFER_GRAMMAR_NODE_MODULES + '/ajv').default;
const ajv = new Ajv({ strict: false });
let server;
let thinking;
let client;

before(async () => {
  [server, thinking] = await Promise.all([startServer(), startServer(['--reasoning-parser', 'qwen3'])]);
  client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await Promise.all([server.stop(), thinking.stop()]); });

const weather = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 10 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 14 },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const time = {
  type: 'object', properties: { zone: { enum: ['UTC', 'CET', 'PST'] } }, required: ['zone'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', parameters: weather } },
  { type: 'function', function: { name: 'get_time', parameters: time } },
];
const validators = { get_weather: ajv.compile(weather), get_time: ajv.compile(time) };
const messages = [{ role: 'user', content: 'Weather in Paris, and the time?' }];

function checkCalls(calls, names = Object.keys(validators)) {
  assert.ok(calls.length >= 1);
  for (const call of calls) {
    assert.equal(call.type, 'function');
    assert.ok(names.includes(call.function.name), call.function.name);
    const args = JSON.parse(call.function.arguments);
    const validate = validators[call.function.name];
    assert.ok(validate(args), JSON.stringify(validate.errors) + ' ' + call.function.arguments);
  }
}

async function tokenId(url, text) {
  const res = await postJson(url, '/tokenize', { prompt: text, add_special_tokens: false });
  assert.equal(res.json.tokens.length, 1, text + ' is one token');
  return res.json.tokens[0];
}

test('named function: exactly one call to it, arguments valid, streamed and not', async () => {
  const named = { type: 'function', function: { name: 'get_weather' } };
  for (const seed of [1, 2, 3, 4]) {
    const res = await client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: named,
      max_tokens: 200, temperature: 1, seed });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    checkCalls(choice.message.tool_calls, ['get_weather']);
  }
  const stream = await client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: named,
    max_tokens: 200, temperature: 1, seed: 5, stream: true });
  let args = '', name = '', finish = '', content = '';
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta?.content ?? '';
    for (const call of choice.delta?.tool_calls ?? []) {
      name += call.function?.name ?? '';
      args += call.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(content, '');
  checkCalls([{ type: 'function', function: { name, arguments: args } }], ['get_weather']);
});

test('required with two tools: calls to either, valid; one call without parallel_tool_calls', async () => {
  const seen = new Set();
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const res = await client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: 'required',
      parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice.message));
    assert.equal(choice.message.tool_calls.length, 1);
    checkCalls(choice.message.tool_calls);
    seen.add(choice.message.tool_calls[0].function.name);
  }
  assert.ok(seen.size >= 1);
  // Parallel calls (the default): every finished call is valid; an output cut by max_tokens ends with length.
  for (const seed of [7, 8]) {
    const res = await postJson(server.url, '/v1/chat/completions', { model: 'tiny', messages, tools,
      tool_choice: 'required', max_tokens: 400, temperature: 1, seed });
    const choice = res.json.choices[0];
    assert.ok(['tool_calls', 'length'].includes(choice.finish_reason), res.body);
    if (choice.finish_reason === 'tool_calls') {
      assert.equal(choice.message.content, null);
      checkCalls(choice.message.tool_calls);
    }
  }
});

test('auto with strict tools: the grammar starts at <tool_call>; without strict the same output is garbage',
  async () => {
    const open = await tokenId(server.url, '<tool_call>');
    assert.equal(await tokenId(server.url, '</tool_call>'), open + 1);
    const strictTools = tools.map((t) => ({ ...t, function: { ...t.function, strict: true } }));
    // The bias makes the random model open a call whenever the output is free; inside a call the grammar's mask
    // (applied before the bias) decides.
    const request = (toolList, seed) => ({ model: 'tiny', messages, tools: toolList, max_tokens: 120,
      temperature: 1, seed, logit_bias: { [open]: 100 } });
    for (const seed of [1, 2, 3]) {
      const res = await postJson(server.url, '/v1/chat/completions', request(strictTools, seed));
      assert.equal(res.status, 200, res.body);
      const message = res.json.choices[0].message;
      assert.ok(message.tool_calls?.length >= 1, res.body);
      checkCalls(message.tool_calls);
    }
    const loose = await postJson(server.url, '/v1/chat/completions', request(tools, 1));
    assert.equal(loose.status, 200, loose.body);
    assert.equal(loose.json.choices[0].message.tool_calls ?? null, null, loose.body);
  });

test('tool-call grammar errors and conflicts are 400s naming the field', async () => {
  const bad = [{ type: 'function', function: { name: 'f', parameters: { type: 'object',
    properties: { a: { type: 'string', not: {} } } } } }];
  const res = await postJson(server.url, '/v1/chat/completions',
    { model: 'tiny', messages, tools: bad, tool_choice: 'required', max_tokens: 5 });
  assert.equal(res.status, 400, res.body);
  assert.equal(res.json.error.param, 'tools[0].function.parameters');
  assert.match(res.json.error.message, /\/properties\/a.*not/);
  const both = await postJson(server.url, '/v1/chat/completions', { model: 'tiny', messages, tools,
    tool_choice: 'required', response_format: { type: 'json_object' }, max_tokens: 5 });
  assert.equal(both.status, 400, both.body);
  assert.equal(both.json.error.param, 'response_format');
});

test('--reasoning-parser qwen3: the call grammar starts after </think>', async () => {
  const think = await tokenId(thinking.url, '<think>');
  const unthink = await tokenId(thinking.url, '</think>');
  // Biased to open the reasoning and close it at once: before the call only <think> of the two is allowed (the output
  // may open with a reasoning span), inside the span anything goes (</think> wins), and after </think> the grammar
  // masks both.
  const res = await postJson(thinking.url, '/v1/chat/completions', { model: 'tiny', messages, tools,
    tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed: 2,
    logit_bias: { [think]: 90, [unthink]: 100 } });
  assert.equal(res.status, 200, res.body);
  const choice = res.json.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls', res.body);
  assert.match(choice.message.reasoning_content ?? '', /^(<think>)*$/);
  checkCalls(choice.message.tool_calls);
  // json_schema after the reasoning too.
  const json = await postJson(thinking.url, '/v1/chat/completions', { model: 'tiny', messages, max_tokens: 200,
    temperature: 1, seed: 3, logit_bias: { [think]: 90, [unthink]: 100 },
    response_format: { type: 'json_schema', json_schema: { name: 'w', schema: weather } } });
  assert.equal(json.json.choices[0].finish_reason, 'stop', json.body);
  assert.match(json.json.choices[0].message.reasoning_content ?? '', /^(<think>)*$/);
  assert.ok(validators.get_weather(JSON.parse(json.json.choices[0].message.content)), json.body);
});
