// The page's API client (web/static/chat_stream.js) in Node, against scripted responses: SSE events split at every
// byte (multi-byte UTF-8 included), keep-alive comments, CRLF framing, error events, cut streams and HTTP errors.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const { streamChat, listModels, ChatError } =
  await import(pathToFileURL(path.join(process.env.QINFER_WEB_DIR, 'static/chat_stream.js')).href);

const realFetch = globalThis.fetch;
afterEach(() => { globalThis.fetch = realFetch; });

// Replaces fetch with one answering `status`, `headers` and `body` delivered in pieces of `chunkBytes` bytes.
function scriptFetch({ status = 200, headers = {}, body = '', chunkBytes = 1 }) {
  const requests = [];
  globalThis.fetch = async (url, init) => {
    requests.push({ url, init });
    const bytes = new TextEncoder().encode(body);
    let offset = 0;
    const stream = new ReadableStream({
      pull(controller) {
        if (offset >= bytes.length) return controller.close();
        controller.enqueue(bytes.slice(offset, offset + chunkBytes));
        offset += chunkBytes;
      },
    });
    return new Response(stream, { status, headers });
  };
  return requests;
}

const chunk = (delta, finishReason = null) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finishReason }], usage: null })}\n\n`;
const usageChunk = `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } })}\n\n`;

async function collect(options = {}) {
  const pieces = [];
  const result = await streamChat({ body: { messages: [] }, apiKey: 'k', onDelta: (p) => pieces.push(p), ...options });
  return { pieces, result };
}

test('streams deltas split at every byte, with comments, and returns usage and finish reason', async () => {
  const text = ['héllo ', '世界 ', '🚀 done'];
  const body = chunk({ role: 'assistant', content: '' }) + ': keep-alive\n\n' +
    text.map((piece) => chunk({ content: piece })).join('') + chunk({}, 'length') + usageChunk + 'data: [DONE]\n\n';
  const requests = scriptFetch({ body });
  const { pieces, result } = await collect();
  assert.deepEqual(pieces, text);
  assert.deepEqual(result, { finishReason: 'length', usage: { prompt_tokens: 5, completion_tokens: 3 } });
  const sent = JSON.parse(requests[0].init.body);
  assert.equal(sent.stream, true);
  assert.deepEqual(sent.stream_options, { include_usage: true });
  assert.equal(requests[0].init.headers.Authorization, 'Bearer k');
});

test('reasoning_content deltas go to onReasoning, content to onDelta', async () => {
  const body = chunk({ role: 'assistant', content: '' }) + chunk({ reasoning_content: 'let me ' }) +
    chunk({ reasoning_content: 'think' }) + chunk({ content: 'Yes.' }) + chunk({}, 'stop') + 'data: [DONE]\n\n';
  scriptFetch({ body, chunkBytes: 7 });
  const reasoning = [];
  const { pieces } = await collect({ onReasoning: (p) => reasoning.push(p) });
  assert.deepEqual(reasoning, ['let me ', 'think']);
  assert.deepEqual(pieces, ['Yes.']);
});

test('CRLF and CR framing is accepted wherever the pieces split', async () => {
  const events = chunk({ content: 'a' }) + chunk({ content: 'b' }) + 'data: [DONE]\n\n';
  for (const lineEnd of ['\r\n', '\r']) {
    for (const chunkBytes of [1, 2, 3, 5, 1000]) {
      scriptFetch({ body: events.replaceAll('\n', lineEnd), chunkBytes });
      const where = `line end ${JSON.stringify(lineEnd)}, ${chunkBytes} bytes`;
      assert.deepEqual((await collect()).pieces, ['a', 'b'], where);
    }
  }
});

test('an error event mid-stream becomes a ChatError of kind stream', async () => {
  scriptFetch({ body: chunk({ content: 'partial' }) +
    `data: ${JSON.stringify({ error: { message: 'engine failed', type: 'internal_error' } })}\n\ndata: [DONE]\n\n` });
  await assert.rejects(collect(), (error) =>
    error instanceof ChatError && error.kind === 'stream' && /engine failed/.test(error.message));
});

test('a stream that ends before [DONE] is a disconnect', async () => {
  scriptFetch({ body: chunk({ content: 'partial' }) });
  await assert.rejects(collect(), (error) => error instanceof ChatError && error.kind === 'disconnect');
});

test('HTTP errors carry the OpenAI error message, the status and Retry-After', async () => {
  scriptFetch({ status: 429, headers: { 'Retry-After': '3', 'Content-Type': 'application/json' },
    body: JSON.stringify({ error: { message: 'queue full', type: 'rate_limit_error' } }), chunkBytes: 1000 });
  await assert.rejects(collect(), (error) => error instanceof ChatError && error.kind === 'http' &&
    error.status === 429 && error.retryAfterSeconds === 3 && error.message === 'HTTP 429: queue full');
  scriptFetch({ status: 502, body: 'Bad gateway from the proxy', chunkBytes: 1000 });
  await assert.rejects(listModels(''), (error) =>
    error.status === 502 && error.retryAfterSeconds === null &&
    error.message === 'HTTP 502: Bad gateway from the proxy');
});

test('no answer at all is a network error; an abort stays an AbortError', async () => {
  globalThis.fetch = async () => { throw new TypeError('fetch failed'); };
  await assert.rejects(collect(), (error) => error instanceof ChatError && error.kind === 'network');
  const controller = new AbortController();
  globalThis.fetch = async (url, init) => {
    init.signal.throwIfAborted();
    return new Response('');
  };
  controller.abort();
  await assert.rejects(collect({ signal: controller.signal }), (error) => error.name === 'AbortError');
});
