// `qinfer download` against the mock hub (mock_hub.mjs): the Hugging Face cache layout, revisions, gated repos,
// resume after a dropped connection, checksum and disk errors, offline mode and ModelScope. Each case starts from an
// empty cache. Environment: QINFER_BIN, QINFER_TEST_MODEL (the tiny model the mock serves), QINFER_HUB_TMP.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startMockHub, readModelDir } from './mock_hub.mjs';

const BIN = process.env.QINFER_BIN;
const TMP = process.env.QINFER_HUB_TMP;
const REPO = 'test-org/tiny-qwen3';
const GATED = 'test-org/gated-qwen3';
const DOTTED = 'test-org/Tiny-0.1B';
const TOKEN = 'hf_good_token';
let hub;
let model;
let cache;
let caseNo = 0;

function run(args, env = {}) {
  return new Promise((resolve) => {
    const proc = spawn(BIN, args, { env: { ...process.env, HF_TOKEN: '', HF_HUB_OFFLINE: '', VLLM_USE_MODELSCOPE: '',
      HF_HUB_CACHE: cache, HF_HOME: path.join(cache, 'home'), HF_ENDPOINT: hub.url, ...env },
    stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c) => { stdout += c; });
    proc.stderr.on('data', (c) => { stderr += c; });
    proc.on('exit', (code) => resolve({ code, stdout: stdout.trim(), stderr }));
  });
}

const repoDir = (id) => path.join(cache, 'models--' + id.replace('/', '--'));
const cdnGets = () => hub.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/cdn-lfs/'));

before(async () => {
  model = readModelDir(process.env.QINFER_TEST_MODEL);
  const extra = { 'README.md': Buffer.from('# tiny\n'), 'original/consolidated.safetensors': Buffer.alloc(64, 7) };
  const v1 = { ...model, 'config.json': Buffer.from(model['config.json'].toString().replace('{', '{"_v": 1, ')) };
  hub = await startMockHub({
    [REPO]: { revisions: { main: { ...model, ...extra }, v1 } },
    [GATED]: { revisions: { main: model }, gated: true, tokens: [TOKEN] },
    [DOTTED]: { revisions: { master: model } },
  });
});

after(async () => { await hub?.close(); });

beforeEach(() => {
  cache = path.join(TMP, `case-${process.pid}-${++caseNo}`);
  fs.rmSync(cache, { recursive: true, force: true });
  fs.mkdirSync(cache, { recursive: true });
  hub.clearFaults();
  hub.requests.length = 0;
});

test('downloads the files a Qwen3 model needs into the HF cache layout', async () => {
  const r = await run(['download', REPO]);
  assert.equal(r.code, 0, r.stderr);
  const commit = hub.commit(REPO, 'main');
  assert.equal(r.stdout, path.join(repoDir(REPO), 'snapshots', commit));
  assert.equal(fs.readFileSync(path.join(repoDir(REPO), 'refs', 'main'), 'utf8'), commit);
  const snapshot = fs.readdirSync(r.stdout).sort();
  assert.deepEqual(snapshot, Object.keys(model).sort(), 'README.md and original/ are not fetched');
  for (const name of snapshot) {
    const link = path.join(r.stdout, name);
    const entry = hub.entry(REPO, 'main', name);
    assert.equal(fs.readlinkSync(link), `../../blobs/${entry.lfs ? entry.sha256 : entry.gitId}`, name);
    assert.ok(fs.readFileSync(link).equals(model[name]), `${name} differs from the hub's bytes`);
  }
  assert.deepEqual(fs.readdirSync(path.join(repoDir(REPO), 'blobs')).filter((f) => f.endsWith('.incomplete')), []);
  assert.ok(cdnGets().length >= 1, 'LFS files came through the CDN redirect');

  hub.requests.length = 0;
  const again = await run(['download', REPO]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, r.stdout);
  assert.equal(cdnGets().length, 0, 'a cached model is not fetched again');
});

test('--revision: a branch gets its refs/ entry, a commit id none; --include selects files', async () => {
  const r = await run(['download', REPO, '--revision', 'v1', '--include', 'config.json']);
  assert.equal(r.code, 0, r.stderr);
  const commit = hub.commit(REPO, 'v1');
  assert.equal(fs.readFileSync(path.join(repoDir(REPO), 'refs', 'v1'), 'utf8'), commit);
  assert.deepEqual(fs.readdirSync(r.stdout), ['config.json']);
  assert.match(fs.readFileSync(path.join(r.stdout, 'config.json'), 'utf8'), /"_v": 1/);

  const byCommit = await run(['download', REPO, '--revision', hub.commit(REPO, 'main'), '--include', '*.json']);
  assert.equal(byCommit.code, 0, byCommit.stderr);
  assert.ok(!fs.existsSync(path.join(repoDir(REPO), 'refs', 'main')));
  assert.ok(fs.readdirSync(byCommit.stdout).every((f) => f.endsWith('.json')));
});

test('missing repo, revision and file are exit 3 naming what is missing', async () => {
  const repo = await run(['download', 'test-org/no-such-model']);
  assert.equal(repo.code, 3, repo.stderr);
  assert.match(repo.stderr, /repository 'test-org\/no-such-model' not found/);
  const rev = await run(['download', REPO, '--revision', 'no-such-branch']);
  assert.equal(rev.code, 3, rev.stderr);
  assert.match(rev.stderr, /revision 'no-such-branch' not found/);
  const file = await run(['download', REPO, '--include', 'nothing-*.bin']);
  assert.equal(file.code, 3, file.stderr);
  assert.match(file.stderr, /matches --include/);
});

test('a gated repo needs a token: exit 2 without, refused token exit 2, HF_TOKEN or --hf-token works', async () => {
  const none = await run(['download', GATED]);
  assert.equal(none.code, 2, none.stderr);
  assert.match(none.stderr, /gated or private; set a token with --hf-token or HF_TOKEN/);
  const wrong = await run(['download', GATED, '--hf-token', 'hf_wrong']);
  assert.equal(wrong.code, 2, wrong.stderr);
  assert.match(wrong.stderr, /HTTP 403.*has no access/);
  const env = await run(['download', GATED], { HF_TOKEN: TOKEN });
  assert.equal(env.code, 0, env.stderr);
  assert.ok(hub.requests.some((q) => q.authorization === `Bearer ${TOKEN}`));
  fs.rmSync(cache, { recursive: true });
  const flag = await run(['download', GATED, '--hf-token', TOKEN]);
  assert.equal(flag.code, 0, flag.stderr);
  fs.rmSync(cache, { recursive: true });
  fs.mkdirSync(path.join(cache, 'home'), { recursive: true });
  fs.writeFileSync(path.join(cache, 'home', 'token'), TOKEN + '\n');  // what `hf auth login` saves
  const saved = await run(['download', GATED]);
  assert.equal(saved.code, 0, saved.stderr);
});

test('a connection dropped mid-file resumes with a Range request and the sha256 still verifies', async () => {
  const weights = hub.entry(REPO, 'main', 'model.safetensors');
  hub.setFault(weights.sha256, { dropAfter: weights.bytes.length >> 2, drops: 1 });
  const r = await run(['download', REPO]);
  assert.equal(r.code, 0, r.stderr);
  const gets = cdnGets().filter((q) => q.path.includes(weights.sha256));
  assert.equal(gets.length, 2, JSON.stringify(gets));
  assert.equal(gets[1].range, `bytes=${weights.bytes.length >> 2}-`);
  assert.ok(fs.readFileSync(path.join(r.stdout, 'model.safetensors')).equals(weights.bytes));
});

test('when the hub stays down the partial file is kept (exit 7) and the next run resumes it', async () => {
  const weights = hub.entry(REPO, 'main', 'model.safetensors');
  const cut = weights.bytes.length >> 1;
  hub.setFault(weights.sha256, { dropAfter: cut, drops: 1, thenUnavailable: true });
  const r = await run(['download', REPO]);
  assert.equal(r.code, 7, r.stderr);
  assert.match(r.stderr, /run again to resume/);
  const partial = path.join(repoDir(REPO), 'blobs', weights.sha256 + '.incomplete');
  assert.equal(fs.statSync(partial).size, cut);
  assert.ok(!fs.existsSync(path.join(repoDir(REPO), 'blobs', weights.sha256)), 'no complete-looking blob');
  hub.clearFaults();
  hub.requests.length = 0;
  const resumed = await run(['download', REPO]);
  assert.equal(resumed.code, 0, resumed.stderr);
  const gets = cdnGets().filter((q) => q.path.includes(weights.sha256));
  assert.deepEqual(gets.map((q) => q.range), [`bytes=${cut}-`]);
  assert.ok(!fs.existsSync(partial));
});

test('a checksum mismatch is exit 4 and leaves neither blob nor partial file', async () => {
  const weights = hub.entry(REPO, 'main', 'model.safetensors');
  hub.setFault(weights.sha256, { corrupt: true });
  const r = await run(['download', REPO]);
  assert.equal(r.code, 4, r.stderr);
  assert.match(r.stderr, new RegExp(`model.safetensors.*checksum mismatch.*${weights.sha256}`));
  const blobs = fs.readdirSync(path.join(repoDir(REPO), 'blobs'));
  assert.ok(!blobs.some((f) => f.startsWith(weights.sha256)), blobs.join(' '));
});

test('a full disk is exit 6 and keeps the partial file', async () => {
  const weights = hub.entry(REPO, 'main', 'model.safetensors');
  const blobs = path.join(repoDir(REPO), 'blobs');
  fs.mkdirSync(blobs, { recursive: true });
  fs.symlinkSync('/dev/full', path.join(blobs, weights.sha256 + '.incomplete'));  // every write fails with ENOSPC
  const r = await run(['download', REPO]);
  assert.equal(r.code, 6, r.stderr);
  assert.match(r.stderr, /disk full writing .*model.safetensors.*partial file is kept/);
});

test('network down is exit 7; HF_HUB_OFFLINE=1 never touches the network', async () => {
  const down = await run(['download', REPO], { HF_ENDPOINT: 'http://127.0.0.1:9' });
  assert.equal(down.code, 7, down.stderr);
  assert.match(down.stderr, /cannot reach the Hugging Face hub \(http:\/\/127.0.0.1:9\)/);
  const offlineEmpty = await run(['download', REPO], { HF_HUB_OFFLINE: '1' });
  assert.equal(offlineEmpty.code, 3, offlineEmpty.stderr);
  assert.match(offlineEmpty.stderr, /HF_HUB_OFFLINE/);
  assert.equal((await run(['download', REPO])).code, 0);
  hub.requests.length = 0;
  const offline = await run(['download', REPO], { HF_HUB_OFFLINE: '1' });
  assert.equal(offline.code, 0, offline.stderr);
  assert.equal(offline.stdout, path.join(repoDir(REPO), 'snapshots', hub.commit(REPO, 'main')));
  assert.equal(hub.requests.length, 0);
});

test('ModelScope: --model-source modelscope or VLLM_USE_MODELSCOPE=true, into its cache layout', async () => {
  const env = { MODELSCOPE_DOMAIN: hub.url, MODELSCOPE_CACHE: path.join(cache, 'ms') };
  const r = await run(['download', DOTTED, '--model-source', 'modelscope'], env);
  assert.equal(r.code, 0, r.stderr);
  const dir = path.join(cache, 'ms', 'models', 'test-org', 'Tiny-0___1B');
  assert.equal(r.stdout, dir);
  for (const name of Object.keys(model)) assert.ok(fs.readFileSync(path.join(dir, name)).equals(model[name]), name);
  assert.equal(fs.readFileSync(path.join(dir, '.mv'), 'utf8'), 'Revision:master');
  assert.ok(hub.requests.some((q) => q.path.startsWith('/api/v1/models/test-org/Tiny-0.1B/repo/files?Revision=master')));
  hub.requests.length = 0;
  const viaVllm = await run(['download', DOTTED], { ...env, VLLM_USE_MODELSCOPE: 'true' });
  assert.equal(viaVllm.code, 0, viaVllm.stderr);
  assert.equal(viaVllm.stdout, dir);
  assert.ok(!hub.requests.some((q) => q.path.startsWith('/api/v1/models/test-org/Tiny-0.1B/repo?')), 'cached');
  const missing = await run(['download', 'test-org/none', '--model-source', 'modelscope'], env);
  assert.equal(missing.code, 3, missing.stderr);
});
