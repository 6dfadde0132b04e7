// A fast mock of an OpenAI-compatible streaming server, to measure the load generator itself (`qinfer bench serve`)
// without a model: every completion streams max_tokens one-token SSE events, then a usage chunk and [DONE].
//   node bench/loadgen/mock_openai_server.mjs [--port 0] [--token-interval-ms 0]
// --token-interval-ms: pause between a stream's tokens (0: as fast as the event loop goes). Prints
// "listening on http://127.0.0.1:PORT" on stderr. Single-threaded, so it uses at most one core.
import http from 'node:http';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const port = option('--port', 0);
const intervalMs = option('--token-interval-ms', 0);

function stream(req, res, body) {
  const chat = req.url.startsWith('/v1/chat/');
  const total = Number.isInteger(body.max_tokens) ? body.max_tokens : 16;
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  const choice = chat ? '{"index":0,"delta":{"content":" tok"},"finish_reason":null}'
    : '{"index":0,"text":" tok","finish_reason":null}';
  const event = `data: {"id":"x","object":"${chat ? 'chat.completion.chunk' : 'text_completion'}","choices":[${choice}]}\n\n`;
  let sent = 0;
  let closed = false;
  res.on('close', () => { closed = true; });
  const next = () => {
    if (closed) return;
    if (sent === total) {
      res.end(`data: {"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":${total},` +
        `"total_tokens":${total + 1}}}\n\ndata: [DONE]\n\n`);
      return;
    }
    sent++;
    res.write(event);
    if (sent === total) next();
    else if (intervalMs > 0) setTimeout(next, intervalMs);
    else setImmediate(next);
  };
  next();
}

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/v1/models') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"object":"list","data":[{"id":"mock","object":"model"}]}');
    return;
  }
  if (req.method === 'POST' && (req.url === '/v1/completions' || req.url === '/v1/chat/completions')) {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      let body;
      try { body = JSON.parse(raw); } catch { res.writeHead(400).end('{"error":{"message":"bad JSON"}}'); return; }
      stream(req, res, body);
    });
    return;
  }
  res.writeHead(404).end();
});
server.keepAliveTimeout = 60000;
server.listen(port, '127.0.0.1', () => {
  process.stderr.write(`listening on http://127.0.0.1:${server.address().port}\n`);
});
