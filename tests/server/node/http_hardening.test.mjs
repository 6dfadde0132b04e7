// The HTTP layer under attack: limits enforced while reading (chunked bodies, endless header lines, header counts),
// Range on the chat page files, pipelining, slowloris against a one-thread IO pool, SIGTERM with a trickling client,
// SIGHUP, and a second server on a port in use. Raw sockets: these are the bytes on the wire.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { startServer, rawRequest, BIN, MODEL } from './harness.mjs';

let server;

before(async () => {
  server = await startServer(['--max-body-bytes', '65536', '--max-header-bytes', '4096', '--max-header-count', '20',
    '--header-timeout', '3', '--read-timeout', '3', '--http-threads', '1']);
});
after(async () => { await server.stop(); });

// Sends `chunks` (written one after another) and collects what comes back until the server closes or `waitMs`.
function exchange(port, chunks, { waitMs = 10000 } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    let error = null;
    const timer = setTimeout(() => { socket.destroy(); resolve({ text: received.toString('latin1'), closed: false }); },
      waitMs);
    socket.on('data', (d) => { received = Buffer.concat([received, d]); });
    socket.on('error', (e) => { error = e; });
    socket.on('close', () => { clearTimeout(timer); resolve({ text: received.toString('latin1'), closed: true, error }); });
    socket.on('connect', async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) break;
        socket.write(chunk);
        await new Promise((r) => setImmediate(r));
      }
    });
  });
}

const statusOf = (text) => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);

test('a chunked body over --max-body-bytes gets 413 and the connection closes', async () => {
  const head = 'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n';
  const chunk = (n) => `${n.toString(16)}\r\n${'a'.repeat(n)}\r\n`;
  // 4 MiB offered in 16 KiB chunks; the server must refuse after 64 KiB, not read it all.
  const chunks = [head, ...Array.from({ length: 256 }, () => chunk(16384))];
  const { text, closed } = await exchange(server.port, chunks);
  assert.equal(statusOf(text), 413, text.slice(0, 200));
  assert.match(text, /max-body-bytes/);
  assert.ok(closed);
});

test('a Content-Length over --max-body-bytes is refused before the body is sent', async () => {
  const { text } = await exchange(server.port,
    ['POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n']);
  assert.equal(statusOf(text), 413);
});

test('a header line with no newline past --max-header-bytes gets 431, a long request line 414', async () => {
  const header = await exchange(server.port, ['GET /health HTTP/1.1\r\nX-Long: ' + 'a'.repeat(1 << 20)]);
  assert.equal(statusOf(header.text), 431, header.text.slice(0, 200));
  assert.ok(header.closed);
  const line = await exchange(server.port, ['GET /' + 'a'.repeat(1 << 20)]);
  assert.equal(statusOf(line.text), 414, line.text.slice(0, 200));
});

test('more header lines than --max-header-count get 431', async () => {
  const headers = Array.from({ length: 25 }, (_, i) => `X-H${i}: v\r\n`).join('');
  const { text } = await exchange(server.port, [`GET /health HTTP/1.1\r\nHost: x\r\n${headers}\r\n`]);
  assert.equal(statusOf(text), 431);
  assert.match(text, /max-header-count/);
  const ok = await exchange(server.port, ['GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-A: 1\r\n\r\n']);
  assert.equal(statusOf(ok.text), 200);
});

test('Range with many ranges on /static is not amplified: 200 with the whole file once', async () => {
  const plain = await rawRequest(server.url, 'GET', '/static/vendor/markdown-it.mjs');
  assert.equal(plain.status, 200);
  const ranges = 'bytes=' + Array.from({ length: 300 }, () => '0-').join(',');
  const ranged = await rawRequest(server.url, 'GET', '/static/vendor/markdown-it.mjs', { headers: { Range: ranges } });
  assert.equal(ranged.status, 200);
  assert.equal(ranged.headers['content-range'], undefined);
  assert.equal(ranged.body.length, plain.body.length);
});

test('three pipelined requests in one write get three replies, in order', async () => {
  const one = (path) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;
  const { text } = await exchange(server.port,
    [one('/health') + one('/nope') + one('/health').replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')]);
  const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  assert.deepEqual(statuses, [200, 404, 200]);
});

test('slowloris: 200 connections trickling one byte a second do not stop /health on one IO thread', async () => {
  const sockets = [];
  for (let i = 0; i < 200; i++) {
    const s = net.connect(server.port, '127.0.0.1');
    s.on('error', () => {});
    sockets.push(s);
  }
  const request = 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ';
  let sent = 0;
  const drip = setInterval(() => { for (const s of sockets) if (!s.destroyed) s.write(request[sent % request.length]); sent++; }, 1000);
  try {
    await new Promise((r) => setTimeout(r, 1500));
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      const res = await rawRequest(server.url, 'GET', '/health');
      assert.equal(res.status, 200);
      assert.ok(Date.now() - started < 1000, `/health took ${Date.now() - started} ms`);
      await new Promise((r) => setTimeout(r, 300));
    }
    // The header deadline (3 s, not per read) closes the tricklers.
    await new Promise((r) => setTimeout(r, 3500));
    assert.ok(sockets.every((s) => s.destroyed || s.readableEnded), 'trickling connections outlived --header-timeout');
  } finally {
    clearInterval(drip);
    for (const s of sockets) s.destroy();
  }
});

test('SIGHUP is ignored and logged; SIGTERM with a trickling client exits within the grace period', { timeout: 30000 },
  async () => {
    const own = await startServer(['--shutdown-grace-seconds', '2', '--header-timeout', '60', '--read-timeout', '60']);
    try {
      own.proc.kill('SIGHUP');
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await rawRequest(own.url, 'GET', '/health')).status, 200);
      assert.match(own.log(), /SIGHUP: ignored/);
      const slow = net.connect(own.port, '127.0.0.1');
      slow.on('error', () => {});
      await new Promise((r) => slow.on('connect', r));
      slow.write('POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{');
      const drip = setInterval(() => slow.write(' '), 200);
      const started = Date.now();
      own.proc.kill('SIGTERM');
      const { code } = await own.exited;
      clearInterval(drip);
      slow.destroy();
      assert.equal(code, 0);
      assert.ok(Date.now() - started < 4000, `exit took ${Date.now() - started} ms`);
    } finally {
      await own.stop();
    }
  });

test('a second server on a port in use exits 7 naming the address and port', { timeout: 30000 }, async () => {
  const proc = spawn(BIN, ['serve', '--model', MODEL, '--port', String(server.port), '--threads', '1'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (d) => { log += d; });
  proc.stdout.on('data', (d) => { log += d; });
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  assert.equal(code, 7, log);
  assert.match(log, new RegExp(`127\\.0\\.0\\.1:${server.port}`));
  assert.match(log, /in use/);
});
