// The end-to-end case: an empty Hugging Face cache, the mock hub as HF_ENDPOINT, and one
// `qinfer serve --model ORG/NAME --device cpu` that downloads the model, then serves it. Environment: as
// download.test.mjs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startMockHub, readModelDir } from './mock_hub.mjs';
import { rawRequest, postJson } from '../server/node/harness.mjs';

const REPO = 'test-org/tiny-qwen3';
let hub;
let proc;

after(async () => {
  if (proc && proc.exitCode === null) proc.kill('SIGKILL');
  await hub?.close();
});

test('serve --model ORG/NAME on an empty cache downloads the model and answers', async () => {
  hub = await startMockHub({ [REPO]: { revisions: { main: readModelDir(process.env.QINFER_TEST_MODEL) } } });
  const cache = path.join(process.env.QINFER_HUB_TMP, `serve-${process.pid}`);
  fs.rmSync(cache, { recursive: true, force: true });
  proc = spawn(process.env.QINFER_BIN, ['serve', '--model', REPO, '--device', 'cpu', '--port', '0', '--threads', '1',
    '--max-model-len', '512'], { env: { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.url, HF_TOKEN: '',
    HF_HUB_OFFLINE: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${log}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60000;
  for (;;) {
    const health = await rawRequest(url, 'GET', '/health').catch(() => null);
    if (health?.status === 200) break;
    assert.ok(Date.now() < deadline, 'never healthy:\n' + log);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(log, /not in the local cache: downloading it from/);
  const models = JSON.parse((await rawRequest(url, 'GET', '/v1/models')).body);
  assert.equal(models.data[0].id, REPO);
  const reply = await postJson(url, '/v1/chat/completions',
    { model: REPO, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 });
  assert.equal(reply.status, 200, reply.body);
  assert.equal(reply.json.usage.completion_tokens, 4);
  assert.ok(fs.existsSync(path.join(cache, 'models--test-org--tiny-qwen3', 'refs', 'main')));
});
