// Every 400 names the offending request field in the OpenAI error's `param`, whether the HTTP layer refuses the field
// while parsing or the engine refuses it at submit (sampling ranges, stop strings, logit_bias, logprobs, n,
// max_tokens against the context), and whatever the endpoint calls it (a chat's prompt is `messages`, a
// completion's top-logprob count is `logprobs`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson } from './harness.mjs';

const CHAT = '/v1/chat/completions';
const COMPLETIONS = '/v1/completions';
const chat = (extra) => ({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, ...extra });
const completion = (extra) => ({ prompt: 'Hi', max_tokens: 4, ...extra });
const manyStops = Array.from({ length: 17 }, (_, i) => `stop${i}`);

// [what is wrong, endpoint, body, the param the error must name]. The server runs with --max-model-len 1024 and
// --max-logprobs 3; the tiny model's vocabulary has 151 936 ids.
const BAD_REQUESTS = [
  ['negative temperature', CHAT, chat({ temperature: -1 }), 'temperature'],
  ['temperature over 100', COMPLETIONS, completion({ temperature: 101 }), 'temperature'],
  ['top_p of 0', CHAT, chat({ top_p: 0 }), 'top_p'],
  ['top_k beyond the vocabulary', CHAT, chat({ top_k: 1000000 }), 'top_k'],
  ['top_k below -1', COMPLETIONS, completion({ top_k: -5 }), 'top_k'],
  ['min_p over 1', CHAT, chat({ min_p: 1.5 }), 'min_p'],
  ['repetition_penalty of 0', COMPLETIONS, completion({ repetition_penalty: 0 }), 'repetition_penalty'],
  ['presence_penalty over 2', CHAT, chat({ presence_penalty: 3 }), 'presence_penalty'],
  ['frequency_penalty under -2', COMPLETIONS, completion({ frequency_penalty: -3 }), 'frequency_penalty'],
  ['17 stop strings', CHAT, chat({ stop: manyStops }), 'stop'],
  ['17 stop strings (completions)', COMPLETIONS, completion({ stop: manyStops }), 'stop'],
  ['a 300-byte stop string', CHAT, chat({ stop: ['x'.repeat(300)] }), 'stop'],
  ['an empty stop string', COMPLETIONS, completion({ stop: [''] }), 'stop'],
  ['a stop that is not a string', CHAT, chat({ stop: [7] }), 'stop'],
  ['stop_token_ids beyond the vocabulary', CHAT, chat({ stop_token_ids: [99999999] }), 'stop_token_ids'],
  ['a logit_bias key that is not a token id', CHAT, chat({ logit_bias: { abc: 1 } }), 'logit_bias'],
  ['a logit_bias value over 100', COMPLETIONS, completion({ logit_bias: { 5: 200 } }), 'logit_bias'],
  ['a logit_bias token beyond the vocabulary', CHAT, chat({ logit_bias: { 99999999: 1 } }), 'logit_bias'],
  ['top_logprobs without logprobs', CHAT, chat({ top_logprobs: 2 }), 'top_logprobs'],
  ['top_logprobs over 20', CHAT, chat({ logprobs: true, top_logprobs: 21 }), 'top_logprobs'],
  ['top_logprobs over --max-logprobs', CHAT, chat({ logprobs: true, top_logprobs: 5 }), 'top_logprobs'],
  ['logprobs over 20 (completions)', COMPLETIONS, completion({ logprobs: 21 }), 'logprobs'],
  ['logprobs over --max-logprobs (completions)', COMPLETIONS, completion({ logprobs: 5 }), 'logprobs'],
  ['n of 0', CHAT, chat({ n: 0 }), 'n'],
  ['n over 64', COMPLETIONS, completion({ n: 65 }), 'n'],
  ['max_tokens past the context', CHAT, chat({ max_tokens: 5000 }), 'max_tokens'],
  ['max_completion_tokens past the context', CHAT,
    { messages: [{ role: 'user', content: 'Hi' }], max_completion_tokens: 5000 }, 'max_completion_tokens'],
  ['max_tokens past the context (completions)', COMPLETIONS, completion({ max_tokens: 5000 }), 'max_tokens'],
  ['max_tokens of 0', COMPLETIONS, completion({ max_tokens: 0 }), 'max_tokens'],
  ['a priority under fcfs', COMPLETIONS, completion({ priority: 3 }), 'priority'],
  ['a seed that is not an integer', CHAT, chat({ seed: 'x' }), 'seed'],
  ['an unknown response_format type', CHAT, chat({ response_format: { type: 'bogus' } }), 'response_format.type'],
  ['a json_schema without a schema', CHAT,
    chat({ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }), 'response_format.json_schema.schema'],
  ['a regex constraint that does not compile', COMPLETIONS, completion({ guided_regex: '(' }), 'guided_regex'],
  ['an empty choice list', CHAT, chat({ structured_outputs: { choice: [] } }), 'structured_outputs.choice'],
  ['no messages', CHAT, { messages: [], max_tokens: 4 }, 'messages'],
  ['an unknown role', CHAT, chat({ messages: [{ role: 'wizard', content: 'x' }] }), 'messages[0].role'],
  ['tool_choice required without tools', CHAT, chat({ tool_choice: 'required' }), 'tool_choice'],
  ['a prompt token beyond the vocabulary', COMPLETIONS, completion({ prompt: [1, 99999999] }), 'prompt'],
  ['a prompt longer than the context', COMPLETIONS, completion({ prompt: Array(1100).fill(1) }), 'prompt'],
  ['a chat prompt longer than the context', CHAT,
    chat({ messages: [{ role: 'user', content: 'word '.repeat(1100) }] }), 'messages'],
  ['echo', COMPLETIONS, completion({ echo: true }), 'echo'],
  ['best_of other than n', COMPLETIONS, completion({ best_of: 2 }), 'best_of'],
  ['suffix', COMPLETIONS, completion({ suffix: 'x' }), 'suffix'],
];

test('every 400 names the offending field in param', { timeout: 90000 }, async () => {
  const server = await startServer(['--max-logprobs', '3']);
  try {
    for (const [what, path, body, param] of BAD_REQUESTS) {
      const res = await postJson(server.url, path, body);
      assert.equal(res.status, 400, `${what}: ${res.body}`);
      assert.equal(res.json?.error?.type, 'invalid_request_error', `${what}: ${res.body}`);
      assert.equal(res.json.error.param, param, `${what}: ${res.body}`);
      assert.ok(res.json.error.message.length > 0, what);
    }
    // The same bodies without the fault are served, so each 400 above is about the field it names.
    assert.equal((await postJson(server.url, CHAT, chat({ stop: manyStops.slice(0, 16) }))).status, 200);
    assert.equal((await postJson(server.url, COMPLETIONS, completion({ logprobs: 3 }))).status, 200);
    assert.equal((await postJson(server.url, CHAT, chat({ logprobs: true, top_logprobs: 3 }))).status, 200);
  } finally {
    await server.stop();
  }
});
