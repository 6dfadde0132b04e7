// How `qinfer serve` serves the embedded chat page: the bytes of every file in web/, its Content-Type, the
// Content-Security-Policy, revalidation with ETag, 404 for anything else, and `/` open without the API key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, rawRequest } from '../server/node/harness.mjs';

const WEB_DIR = process.env.QINFER_WEB_DIR;
const API_KEY = 'web-assets-key';

// URL path -> the file it must serve byte for byte, and the Content-Type it must carry.
const ASSETS = [
  ['/', 'index.html', 'text/html; charset=utf-8'],
  ['/static/app.js', 'static/app.js', 'text/javascript; charset=utf-8'],
  ['/static/chat_stream.js', 'static/chat_stream.js', 'text/javascript; charset=utf-8'],
  ['/static/markdown.js', 'static/markdown.js', 'text/javascript; charset=utf-8'],
  ['/static/settings.js', 'static/settings.js', 'text/javascript; charset=utf-8'],
  ['/static/style.css', 'static/style.css', 'text/css; charset=utf-8'],
  ['/static/favicon.svg', 'static/favicon.svg', 'image/svg+xml'],
  ['/static/vendor/markdown-it.mjs', 'node_modules/markdown-it/dist/browser/markdown-it.esm.min.mjs',
    'text/javascript; charset=utf-8'],
];

let server;
before(async () => { server = await startServer(['--api-key', API_KEY]); });
after(async () => { await server?.stop(); });

test('every page file is served byte for byte with its Content-Type and security headers', async () => {
  for (const [urlPath, file, contentType] of ASSETS) {
    const res = await rawRequest(server.url, 'GET', urlPath);
    assert.equal(res.status, 200, urlPath);
    assert.equal(res.body, fs.readFileSync(path.join(WEB_DIR, file), 'utf8'), `${urlPath} differs from web/${file}`);
    assert.equal(res.headers['content-type'], contentType, urlPath);
    const csp = res.headers['content-security-policy'];
    assert.match(csp, /default-src 'self'/, urlPath);
    assert.match(csp, /script-src 'self'(;|$)/, urlPath);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/, urlPath);
    assert.equal(res.headers['x-content-type-options'], 'nosniff', urlPath);
    assert.equal(res.headers['cache-control'], 'no-cache', urlPath);
    assert.match(res.headers.etag, /^"[0-9a-f]{16}"$/, urlPath);
  }
});

test('the page references only files the server embeds, and no other origin', async () => {
  const html = (await rawRequest(server.url, 'GET', '/')).body;
  const references = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]);
  assert.ok(references.length >= 3, `references found: ${references}`);
  for (const reference of references) {
    assert.doesNotMatch(reference, /^(https?:)?\/\//, `external reference ${reference}`);
    const res = await rawRequest(server.url, 'GET', new URL(reference, server.url + '/').pathname);
    assert.equal(res.status, 200, reference);
  }
  assert.doesNotMatch(html, /<script>|<style>|\son[a-z]+=/i, 'inline script, style or event handler in the page');
});

test('a current copy is revalidated with 304 and no body', async () => {
  const first = await rawRequest(server.url, 'GET', '/static/app.js');
  const revalidate = (etag) => rawRequest(server.url, 'GET', '/static/app.js', { headers: { 'If-None-Match': etag } });
  const again = await revalidate(first.headers.etag);
  assert.equal(again.status, 304);
  assert.equal(again.body, '');
  const stale = await revalidate('"0000000000000000"');
  assert.equal(stale.status, 200);
  assert.notEqual((await rawRequest(server.url, 'GET', '/')).headers.etag, first.headers.etag);
});

test('unknown page paths are 404 with an OpenAI error body', async () => {
  for (const urlPath of ['/static/', '/static/missing.js', '/static/../index.html', '/index.html', '/static/vendor/']) {
    const res = await rawRequest(server.url, 'GET', urlPath);
    assert.equal(res.status, 404, urlPath);
    assert.equal(JSON.parse(res.body).error.type, 'invalid_request_error', urlPath);
  }
});

test('the page is open without the API key while the API still asks for it', async () => {
  assert.equal((await rawRequest(server.url, 'GET', '/')).status, 200);
  assert.equal((await rawRequest(server.url, 'GET', '/static/app.js')).status, 200);
  assert.equal((await rawRequest(server.url, 'GET', '/v1/models')).status, 401);
  const authorized =
    await rawRequest(server.url, 'GET', '/v1/models', { headers: { Authorization: `Bearer ${API_KEY}` } });
  assert.equal(authorized.status, 200);
});
