// A Hugging Face hub and ModelScope stand-in on 127.0.0.1 for the download tests, speaking the protocol the real
// hubs speak (as huggingface_hub and modelscope's client use it):
//   GET  /api/models/ORG/NAME/revision/REV            model info: {"id", "sha", "siblings": [{"rfilename"}], "gated"}
//   HEAD|GET /ORG/NAME/resolve/REV/PATH               small files: 307 to /api/resolve-cache/... (relative), which
//        answers 200 with ETag (the git blob id) and X-Repo-Commit; LFS files: 302 to an absolute CDN URL with
//        X-Linked-Etag (sha256), X-Linked-Size, X-Repo-Commit
//   GET  /cdn-lfs/SHA256?sig=...                       the bytes, with Accept-Ranges and 206 answers to Range
//   GET  /api/v1/models/ORG/NAME/repo/files?Revision=  ModelScope's file list {"Code": 200, "Data": {"Files": [...]}}
//   GET  /api/v1/models/ORG/NAME/repo?Revision=&FilePath=   ModelScope's file bytes (ranges honoured)
// Errors as the hub sends them: 401 + X-Error-Code RepoNotFound for an unknown repo without a token (404 with one),
// 404 RevisionNotFound / EntryNotFound, 401 (no token) or 403 (token without access) + GatedRepo for a gated repo.
// Faults for a blob (by sha256): drop the connection after N bytes, answer 503, or serve corrupted bytes.
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const LFS_THRESHOLD = 1 << 20;  // files this large (and every .safetensors) are LFS files, as on the hub

function gitBlobId(bytes) {
  return crypto.createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
}

function fakeCommit(seed) { return crypto.createHash('sha1').update(seed).digest('hex'); }

// files: {relativePath: Buffer}. Returns the entries the routes serve.
function indexFiles(files) {
  const entries = new Map();
  for (const [name, bytes] of Object.entries(files)) {
    const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
    const lfs = name.endsWith('.safetensors') || bytes.length >= LFS_THRESHOLD;
    entries.set(name, { name, bytes, sha256, gitId: gitBlobId(bytes), lfs });
  }
  return entries;
}

export function readModelDir(dir, extra = {}) {
  const files = {};
  for (const name of fs.readdirSync(dir)) files[name] = fs.readFileSync(path.join(dir, name));
  return { ...files, ...extra };
}

// repos: {"org/name": {revisions: {branchOrTag: files}, gated: bool, tokens: [allowed tokens]}}
export async function startMockHub(repos) {
  const state = { repos: new Map(), blobs: new Map(), requests: [], faults: new Map() };
  for (const [id, spec] of Object.entries(repos)) {
    const revisions = new Map();  // name or commit -> {commit, entries}
    for (const [rev, files] of Object.entries(spec.revisions)) {
      const value = { commit: fakeCommit(id + '@' + rev), entries: indexFiles(files) };
      revisions.set(rev, value);
      revisions.set(value.commit, value);
      for (const entry of value.entries.values()) state.blobs.set(entry.sha256, entry);
    }
    state.repos.set(id, { ...spec, revisions });
  }

  const token = (req) => (req.headers.authorization ?? '').replace(/^Bearer /, '');
  const hubError = (res, status, code, message) => {
    res.writeHead(status, { 'X-Error-Code': code, 'X-Error-Message': message, 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ error: message }));
  };

  // Finds repo and revision for HF routes, answering the error itself when either is missing.
  const lookup = (req, res, id, rev) => {
    const repo = state.repos.get(id);
    if (!repo) {
      const status = token(req) ? 404 : 401;
      hubError(res, status, 'RepoNotFound', `Repository Not Found for url: ${req.url}.`);
      return null;
    }
    const revision = repo.revisions.get(rev);
    if (!revision) {
      hubError(res, 404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
      return null;
    }
    return { repo, revision };
  };

  const gatedRefusal = (req, res, id, repo) => {
    if (!repo.gated || (repo.tokens ?? []).includes(token(req))) return false;
    const message = `Access to model ${id} is restricted.` + (token(req) ? ' You are not in the authorized list.'
      : ' You must have access to it and be authenticated to access it. Please log in.');
    hubError(res, token(req) ? 403 : 401, 'GatedRepo', message);
    return true;
  };

  // Serves `entry` with ranges and the faults set for it.
  const sendBytes = (req, res, entry, headers) => {
    const fault = state.faults.get(entry.sha256) ?? {};
    if (fault.unavailable) { res.writeHead(503); res.end('busy'); return; }
    let bytes = entry.bytes;
    if (fault.corrupt) { bytes = Buffer.from(bytes); bytes[bytes.length >> 1] ^= 0xff; }
    let start = 0;
    let status = 200;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    if (range) {
      start = Number(range[1]);
      if (start >= bytes.length) {
        res.writeHead(416, { 'Content-Range': `bytes */${bytes.length}` });
        res.end();
        return;
      }
      status = 206;
      headers['Content-Range'] = `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
    }
    const body = bytes.subarray(start);
    res.writeHead(status, { ...headers, 'Accept-Ranges': 'bytes', 'Content-Length': body.length,
      'Content-Type': 'application/octet-stream' });
    if (req.method === 'HEAD') { res.end(); return; }
    if (fault.dropAfter !== undefined && fault.drops > 0) {
      fault.drops -= 1;
      if (fault.drops === 0 && fault.thenUnavailable) fault.unavailable = true;
      res.write(body.subarray(0, fault.dropAfter), () => res.socket.destroy());
      return;
    }
    res.end(body);
  };

  const origin = () => `http://127.0.0.1:${server.address().port}`;

  const routeHf = (req, res, url) => {
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    if (m && req.method === 'GET') {
      const id = decodeURIComponent(m[1]);
      const found = lookup(req, res, id, decodeURIComponent(m[2]));
      if (!found) return;
      const siblings = [...found.revision.entries.keys()].map((rfilename) => ({ rfilename }));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ id, modelId: id, sha: found.revision.commit, private: false,
        gated: found.repo.gated ? 'manual' : false, siblings }));
      return;
    }
    m = /^\/(?:api\/resolve-cache\/models\/)?([^/]+\/[^/]+)\/(?:resolve\/)?([^/]+)\/(.+)$/.exec(url.pathname);
    const cacheRoute = url.pathname.startsWith('/api/resolve-cache/');
    if (m && (cacheRoute || url.pathname.includes('/resolve/'))) {
      const id = decodeURIComponent(m[1]);
      const found = lookup(req, res, id, decodeURIComponent(m[2]));
      if (!found || gatedRefusal(req, res, id, found.repo)) return;
      const file = decodeURIComponent(m[3]);
      const entry = found.revision.entries.get(file);
      if (!entry) { hubError(res, 404, 'EntryNotFound', `${file} does not exist on "${m[2]}"`); return; }
      const commit = found.revision.commit;
      if (entry.lfs) {
        res.writeHead(302, { Location: `${origin()}/cdn-lfs/${entry.sha256}?sig=mock`, 'X-Repo-Commit': commit,
          'X-Linked-Etag': `"${entry.sha256}"`, 'X-Linked-Size': entry.bytes.length, ETag: `"${entry.gitId}"` });
        res.end();
      } else if (!cacheRoute) {
        res.writeHead(307, { Location: `/api/resolve-cache/models/${id}/${commit}/${m[3]}`, 'X-Repo-Commit': commit });
        res.end();
      } else {
        sendBytes(req, res, entry, { ETag: `"${entry.gitId}"`, 'X-Repo-Commit': commit });
      }
      return;
    }
    m = /^\/cdn-lfs\/([0-9a-f]{64})$/.exec(url.pathname);
    if (m && state.blobs.has(m[1])) { sendBytes(req, res, state.blobs.get(m[1]), { ETag: `"${m[1]}"` }); return; }
    res.writeHead(404);
    res.end('not found');
  };

  const routeModelScope = (req, res, url) => {
    const m = /^\/api\/v1\/models\/([^/]+\/[^/]+)\/repo(\/files)?$/.exec(url.pathname);
    const repo = m && state.repos.get(decodeURIComponent(m[1]));
    const revision = repo?.revisions.get(url.searchParams.get('Revision') ?? 'master');
    if (!repo || !revision) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ Code: 404, Message: `model ${m?.[1]} or its revision does not exist`, Success: false }));
      return;
    }
    if (m[2]) {
      const Files = [...revision.entries.values()].map((e) => ({ Name: path.basename(e.name), Path: e.name,
        Type: 'blob', Size: e.bytes.length, Sha256: e.sha256, Revision: revision.commit, IsLFS: e.lfs }));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ Code: 200, Data: { Files }, Message: 'success', Success: true }));
      return;
    }
    const entry = revision.entries.get(url.searchParams.get('FilePath') ?? '');
    if (!entry) { res.writeHead(404); res.end(JSON.stringify({ Code: 404, Message: 'file not found' })); return; }
    sendBytes(req, res, entry, {});
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    state.requests.push({ method: req.method, path: url.pathname + url.search, range: req.headers.range,
      authorization: req.headers.authorization });
    if (url.pathname.startsWith('/api/v1/')) routeModelScope(req, res, url);
    else routeHf(req, res, url);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: origin(),
    requests: state.requests,
    commit: (id, rev) => state.repos.get(id).revisions.get(rev).commit,
    entry: (id, rev, file) => state.repos.get(id).revisions.get(rev).entries.get(file),
    // fault: {dropAfter: bytes, drops: count, thenUnavailable: bool} | {unavailable: true} | {corrupt: true}
    setFault: (sha256, fault) => state.faults.set(sha256, fault),
    clearFaults: () => state.faults.clear(),
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}
