// Talks to the server: GET v1/models and streamed POST v1/chat/completions (fetch + ReadableStream, SSE framing).
// Every failure becomes a ChatError whose message is fit to show a person; an abort by the user surfaces as the
// fetch AbortError unchanged so the caller can tell "stopped" from "failed".

export class ChatError extends Error {
  // kind: 'http' (4xx/5xx answer), 'network' (no answer), 'disconnect' (stream cut mid-reply), 'stream' (an error
  // event inside the stream).
  constructor(kind, message, { status = null, retryAfterSeconds = null } = {}) {
    super(message);
    this.name = 'ChatError';
    this.kind = kind;
    this.status = status;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export function isAbort(error) {
  return error?.name === 'AbortError';
}

function authHeaders(apiKey) {
  return apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
}

// The OpenAI error object's message when the body is one, else the status line and the start of the body.
async function errorFromResponse(response) {
  const text = await response.text().catch(() => '');
  let message = '';
  try {
    message = JSON.parse(text)?.error?.message ?? '';
  } catch {
    // not JSON: fall through to the raw text
  }
  if (!message) message = text.trim().slice(0, 300) || response.statusText || 'no details';
  const retryHeader = response.headers.get('Retry-After');
  const retryAfterSeconds = retryHeader !== null && /^\d+$/.test(retryHeader.trim()) ? Number(retryHeader) : null;
  return new ChatError('http', `HTTP ${response.status}: ${message}`, { status: response.status, retryAfterSeconds });
}

async function send(url, init) {
  try {
    return await fetch(url, init);
  } catch (error) {
    if (isAbort(error)) throw error;
    throw new ChatError('network', `Cannot reach the server (${error.message}).`);
  }
}

export async function listModels(apiKey) {
  const response = await send('v1/models', { headers: authHeaders(apiKey) });
  if (!response.ok) throw await errorFromResponse(response);
  const body = await response.json();
  return (body.data ?? []).map((model) => model.id);
}

// Splits an SSE byte stream into the payloads of its `data:` lines, one string per event.
async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';  // line ends normalised to \n
  let pendingCarriageReturn = false;  // a piece ended in \r, which may be the first half of \r\n
  try {
    while (true) {
      const { value = '', done } = await reader.read();
      let piece = pendingCarriageReturn ? `\r${value}` : value;
      pendingCarriageReturn = !done && piece.endsWith('\r');
      if (pendingCarriageReturn) piece = piece.slice(0, -1);
      buffer += piece.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split('\n').filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).replace(/^ /, '')).join('\n');
        if (data) yield data;
      }
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});  // the consumer stopped early ([DONE] or an error): release the connection
  }
}

function parseChunk(data) {
  try {
    return JSON.parse(data);
  } catch {
    throw new ChatError('stream', `The server sent an event that is not JSON: ${data.slice(0, 100)}`);
  }
}

// Streams one chat completion. `onDelta(text)` gets each piece of the reply as it arrives, `onReasoning(text)` each
// piece of the reasoning (delta.reasoning_content, sent by a server run with --reasoning-parser); the first call of
// either marks the time to first token. Resolves { finishReason, usage } once the server sends [DONE].
export async function streamChat({ body, apiKey, signal, onDelta, onReasoning = () => {} }) {
  const response = await send('v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', ...authHeaders(apiKey) },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
  if (!response.ok) throw await errorFromResponse(response);
  let finishReason = null;
  let usage = null;
  try {
    for await (const data of sseEvents(response.body)) {
      if (data === '[DONE]') return { finishReason, usage };
      const chunk = parseChunk(data);
      if (chunk.error) throw new ChatError('stream', `The server stopped the reply: ${chunk.error.message}`);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (choice?.delta?.reasoning_content) onReasoning(choice.delta.reasoning_content);
      if (choice?.delta?.content) onDelta(choice.delta.content);
      if (choice?.finish_reason) finishReason = choice.finish_reason;
    }
  } catch (error) {
    if (isAbort(error) || error instanceof ChatError) throw error;
    throw new ChatError('disconnect', `The connection was lost mid-reply (${error.message}).`);
  }
  throw new ChatError('disconnect', 'The server closed the stream before the reply finished.');
}
