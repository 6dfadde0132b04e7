// The chat page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core from web/node_modules;
// no browser is downloaded) against a real `qinfer serve --reasoning-parser qwen3` on the tiny test model. Exits 77 (CTest: skipped) only when
// Chromium is not installed. Screenshots go to $QINFER_WEB_ARTIFACT_DIR.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { startServer, metricValue } from '../server/node/harness.mjs';

const CHROMIUM = process.env.QINFER_CHROMIUM ?? '/usr/bin/chromium';
if (!fs.existsSync(CHROMIUM)) {
  console.log(`SKIP: ${CHROMIUM} is not installed (Debian package chromium)`);
  process.exit(77);
}
const { chromium } = createRequire(import.meta.url)(process.env.QINFER_PLAYWRIGHT_MODULE);
const ARTIFACT_DIR = process.env.QINFER_WEB_ARTIFACT_DIR;
const API_KEY = 'chat-page-key';
const REPLY_TIMEOUT_MS = 60000;

let server;
let browser;

before(async () => {
  server = await startServer(['--api-key', API_KEY, '--reasoning-parser', 'qwen3']);
  // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

// Opens the page with `apiKey` already in localStorage. `problems` collects console errors, uncaught exceptions and
// any request that leaves the server's origin.
async function openPage({ apiKey = API_KEY, colorScheme = 'light', viewport = { width: 1280, height: 860 } }) {
  const context = await browser.newContext({ colorScheme, viewport });
  await context.addInitScript((key) => localStorage.setItem('qinfer.chat.apiKey', key), apiKey);
  const page = await context.newPage();
  const problems = [];
  const chatBodies = [];
  page.on('console', (message) => { if (message.type() === 'error') problems.push(`console: ${message.text()}`); });
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  page.on('request', (request) => {
    if (!request.url().startsWith(server.url + '/')) problems.push(`external request: ${request.url()}`);
    if (request.url().endsWith('/v1/chat/completions')) chatBodies.push(JSON.parse(request.postData()));
  });
  const response = await page.goto(server.url + '/');
  return { page, context, problems, chatBodies, response };
}

// Runs `body` with a fresh page (see openPage) and closes it afterwards.
async function withPage(options, body) {
  const session = await openPage(options);
  try {
    await body(session);
  } finally {
    await session.context.close();
  }
}

async function waitForModelList(page) {
  await page.waitForFunction(() => document.querySelector('#model')?.value === 'tiny');
}

// Asks for a long reply and resolves once more than `minChars` of it are on screen.
async function startLongReply(page, minChars) {
  await waitForModelList(page);
  await setField(page, '#max-tokens', 900);
  await send(page, 'Write a very long essay.');
  await page.waitForFunction(
    (min) => document.querySelector('article.assistant[data-state="streaming"] .content')?.textContent.length > min,
    minChars, { timeout: REPLY_TIMEOUT_MS });
}

// Sets a settings field as a person would, opening the settings drawer (narrow screens) for it and closing it again.
async function setField(page, selector, value) {
  const wasHidden = !(await page.isVisible('#settings'));
  if (wasHidden) await page.click('#toggle-settings');
  await page.fill(selector, String(value));
  await page.dispatchEvent(selector, 'change');
  if (wasHidden) await page.click('#toggle-settings');
}

async function send(page, text) {
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
}

function lastReply(page) {
  return page.locator('article.assistant').last();
}

async function waitForMetric(name, predicate, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  let value;
  while (Date.now() < deadline) {
    value = await metricValue(server.url, name);
    if (predicate(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`${name} stayed at ${value}`);
}

function saveScreenshot(name) {
  const file = path.join(ARTIFACT_DIR, name);
  console.log(`screenshot: ${file}`);
  return file;
}

// A reply served by a stub instead of the model (the Markdown test needs exact text).
function sseBody(text) {
  const chunk = (delta, finish = null) => JSON.stringify({ id: 'stub', object: 'chat.completion.chunk', created: 0,
    model: 'tiny', choices: [{ index: 0, delta, finish_reason: finish }] });
  const pieces = text.match(/[\s\S]{1,12}/g);
  return [chunk({ role: 'assistant', content: '' }), ...pieces.map((piece) => chunk({ content: piece })),
    chunk({}, 'stop'), '[DONE]'].map((data) => `data: ${data}\n\n`).join('');
}

const UNSAFE_MARKDOWN = [
  'Here is **bold**, `inline code` and a list:',
  '',
  '- one',
  '- two',
  '',
  '```python',
  'print("hello")',
  '```',
  '',
  '<script>window.__pwned = "script"</script>',
  '<img src="x" onerror="window.__pwned = \'img\'">',
  '[a link](javascript:window.__pwned=\'link\') and ![an image](http://example.com/x.png)',
].join('\n');

test('loads cleanly, lists the model and streams a multi-turn conversation', { timeout: 120000 }, () =>
  withPage({}, async ({ page, problems, chatBodies, response }) => {
    assert.match(response.headers()['content-security-policy'], /default-src 'self'/);
    await waitForModelList(page);
    await setField(page, '#max-tokens', 60);
    await setField(page, '#system-prompt', 'You are terse.');

    // Record the reply's text length at every DOM change: a streamed reply grows in several steps.
    await page.evaluate(() => {
      window.replyLengths = [];
      new MutationObserver(() => {
        const reply = [...document.querySelectorAll('article.assistant .content')].at(-1);
        if (reply && reply.textContent.length !== window.replyLengths.at(-1))
          window.replyLengths.push(reply.textContent.length);
      }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
    });
    await send(page, 'Tell me a story about a lighthouse.');
    await page.waitForSelector('article.assistant[data-state="done"]', { timeout: REPLY_TIMEOUT_MS });
    const lengths = (await page.evaluate(() => window.replyLengths)).filter((length) => length > 0);
    assert.ok(lengths.length >= 3, `the reply did not grow over time: lengths ${lengths}`);
    assert.deepEqual(lengths, [...lengths].sort((a, b) => a - b), 'the streamed reply shrank');
    const meta = await lastReply(page).locator('.meta').textContent();
    assert.match(meta, /^TTFT \d+ ms · [\d.]+ tok\/s · \d+ tokens/);

    await send(page, 'And then?');
    await page.waitForSelector('article.assistant:nth-of-type(4)[data-state="done"]', { timeout: REPLY_TIMEOUT_MS });
    assert.equal(chatBodies.length, 2);
    const [first, second] = chatBodies;
    assert.equal(first.stream, true);
    assert.deepEqual(first.stream_options, { include_usage: true });
    assert.equal(first.model, 'tiny');
    assert.equal(first.max_tokens, 60);
    assert.deepEqual(second.messages.map((message) => message.role), ['system', 'user', 'assistant', 'user']);
    assert.equal(second.messages[0].content, 'You are terse.');
    assert.ok(second.messages[2].content.length > 0, 'the first reply is sent back as the assistant turn');
    await page.screenshot({ path: saveScreenshot('chat_page.png') });
    assert.deepEqual(problems, []);
  }));

test('Markdown renders, and HTML in a reply shows as text and never runs', { timeout: 60000 }, () =>
  withPage({}, async ({ page, problems }) => {
    // The renderer alone, on a fixed string, in the page's context.
    const html = await page.evaluate(
      async (text) => (await import('./static/markdown.js')).renderMarkdown(text), UNSAFE_MARKDOWN);
    assert.match(html, /&lt;script&gt;window.__pwned/);
    assert.match(html, /&lt;img src=&quot;x&quot; onerror=/);
    assert.doesNotMatch(html, /<script|<img|href="javascript:/i);

    // The same text as a streamed reply through the page.
    await page.route('**/v1/chat/completions', (route) =>
      route.fulfill({ status: 200, contentType: 'text/event-stream', body: sseBody(UNSAFE_MARKDOWN) }));
    await send(page, 'Show me some Markdown.');
    await page.waitForSelector('article.assistant[data-state="done"]', { timeout: REPLY_TIMEOUT_MS });
    const reply = lastReply(page).locator('.content');
    assert.equal(await reply.locator('strong').textContent(), 'bold');
    assert.equal(await reply.locator('li').count(), 2);
    assert.equal(await reply.locator('pre code.language-python').textContent(), 'print("hello")\n');
    assert.equal(await reply.locator('.code-head span').textContent(), 'python');
    assert.equal(await reply.locator('script, img, iframe, [onerror]').count(), 0);
    assert.equal(await reply.locator('a[href^="javascript"]').count(), 0);
    const text = await reply.textContent();
    assert.ok(text.includes('<script>window.__pwned = "script"</script>'), text);
    assert.ok(text.includes('<img src="x" onerror='), text);
    await page.waitForTimeout(200);  // time for an image error handler to fire, were there one
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    await page.screenshot({ path: saveScreenshot('chat_page_markdown.png') });
    assert.deepEqual(problems, []);
  }));

test('stop aborts the request and the server stops generating', { timeout: 120000 }, () =>
  withPage({}, async ({ page, problems }) => {
    const disconnectsBefore = (await metricValue(server.url, 'qinfer_client_disconnects_total')) ?? 0;
    await startLongReply(page, 0);
    await waitForMetric('qinfer_requests_running', (value) => value === 1);
    await page.click('#stop');
    await page.waitForSelector('article.assistant[data-state="stopped"]');
    assert.match(await lastReply(page).locator('.meta').textContent(), /^Stopped · TTFT \d+ ms/);
    assert.ok(await page.isVisible('#send'));
    await waitForMetric('qinfer_requests_running', (value) => value === 0);
    await waitForMetric('qinfer_client_disconnects_total', (value) => value === disconnectsBefore + 1);
    assert.deepEqual(problems, []);
  }));

test('errors are shown: wrong API key (401), too many requests (429), unreachable server', { timeout: 60000 }, () =>
  withPage({ apiKey: 'wrong-key' }, async ({ page }) => {
    await page.waitForSelector('#banner:not([hidden])');
    assert.match(await page.textContent('#banner'), /HTTP 401: Incorrect API key provided/);
    await send(page, 'Hello?');
    await page.waitForSelector('article.assistant[data-state="error"]');
    assert.match(await lastReply(page).locator('.error').textContent(),
      /HTTP 401: Incorrect API key provided\. Enter the API key in Settings\./);
    assert.equal(await page.inputValue('#prompt'), 'Hello?', 'the failed message is kept for a retry');
    assert.ok(await page.isVisible('#settings'), 'the settings open so the key can be entered');

    await setField(page, '#api-key', API_KEY);
    await page.waitForSelector('#banner', { state: 'hidden' });
    assert.equal(await page.inputValue('#model'), 'tiny');

    await page.route('**/v1/chat/completions', (route) => route.fulfill({
      status: 429, headers: { 'Retry-After': '7' }, contentType: 'application/json',
      body: JSON.stringify({ error: { message: 'too many requests in flight', type: 'rate_limit_error',
        param: null, code: null } }) }));
    await send(page, 'Hello again');
    await page.waitForSelector('article.assistant:nth-of-type(4)[data-state="error"]');
    assert.match(await lastReply(page).locator('.error').textContent(),
      /HTTP 429: too many requests in flight\. Retry after 7 s\./);

    await page.unroute('**/v1/chat/completions');
    await page.route('**/v1/chat/completions', (route) => route.abort('connectionrefused'));
    await send(page, 'Anyone there?');
    await page.waitForSelector('article.assistant:nth-of-type(6)[data-state="error"]');
    assert.match(await lastReply(page).locator('.error').textContent(), /Cannot reach the server/);
  }));

// The random model is steered into reasoning by a regex added to the page's request on its way out (the server's
// output and its streamed reasoning_content deltas are real).
const REASONING_REGEX = '<think>[a-z]{2,8}( [a-z]{2,8}){2,5}</think>\n\n[A-Z][a-z]{2,8}( [a-z]{2,8}){2,5}';

test('reasoning streams into a folded <details> above the answer and is not sent back', { timeout: 120000 }, () =>
  withPage({}, async ({ page, problems, chatBodies }) => {
    await waitForModelList(page);
    await setField(page, '#max-tokens', 80);
    await page.route('**/v1/chat/completions', (route) => {
      const body = JSON.parse(route.request().postData());
      route.continue({ postData: JSON.stringify({ ...body, guided_regex: REASONING_REGEX, temperature: 1 }) });
    });
    // What the reasoning element looks like at each DOM change while the reply streams.
    await page.evaluate(() => {
      window.reasoningStates = [];
      new MutationObserver(() => {
        const article = [...document.querySelectorAll('article.assistant')].at(-1);
        const details = article?.querySelector('details.reasoning');
        if (article?.dataset.state === 'streaming' && details)
          window.reasoningStates.push({ open: details.open, summary: details.querySelector('summary').textContent,
            length: details.querySelector('.reasoning-text').textContent.length,
            answer: article.querySelector('.content').textContent.length });
      }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
    });
    await send(page, 'Think first.');
    await page.waitForSelector('article.assistant[data-state="done"]', { timeout: REPLY_TIMEOUT_MS });
    const states = await page.evaluate(() => window.reasoningStates);
    assert.ok(states.length >= 2, `the reasoning did not stream: ${JSON.stringify(states)}`);
    assert.ok(states.every((state) => !state.open && state.summary === 'Thinking…'), JSON.stringify(states));
    assert.ok(states.at(-1).length > states[0].length, 'the reasoning grew while streaming');

    const reply = lastReply(page);
    const details = reply.locator('details.reasoning');
    assert.equal(await details.count(), 1);
    assert.equal(await details.evaluate((el) => el.open), false, 'folded');
    assert.equal(await details.locator('summary').textContent(), 'Reasoning');
    assert.equal(await details.evaluate((el) => el.nextElementSibling.classList.contains('content')), true,
      'above the answer');
    assert.equal(await reply.locator('.reasoning-text').isVisible(), false);
    const reasoning = await reply.locator('.reasoning-text').textContent();
    assert.match(reasoning, /^[a-z]{2,8}( [a-z]{2,8}){2,5}$/);
    const answer = (await reply.locator('.content').textContent()).trim();
    assert.match(answer, /^[A-Z][a-z]{2,8}( [a-z]{2,8}){2,5}$/);
    await details.locator('summary').click();
    assert.equal(await reply.locator('.reasoning-text').isVisible(), true, 'unfolds on click');
    await page.screenshot({ path: saveScreenshot('chat_page_reasoning.png') });

    await send(page, 'And now?');
    await page.waitForSelector('article.assistant:nth-of-type(4)[data-state="done"]', { timeout: REPLY_TIMEOUT_MS });
    assert.equal(chatBodies[1].messages.at(-2).content, answer, 'only the answer goes back as the assistant turn');
    assert.deepEqual(problems, []);
  }));

test('a server that dies mid-reply is reported as a lost connection (runs last: kills the server)', { timeout: 120000 },
  () => withPage({ colorScheme: 'dark', viewport: { width: 760, height: 900 } }, async ({ page }) => {
    await startLongReply(page, 20);
    server.proc.kill('SIGKILL');
    await page.waitForSelector('article.assistant[data-state="error"]', { timeout: REPLY_TIMEOUT_MS });
    assert.match(await lastReply(page).locator('.error').textContent(),
      /The connection was lost mid-reply|The server closed the stream before the reply finished/);
    assert.ok((await lastReply(page).locator('.content').textContent()).length > 20, 'the partial reply is kept');
    await page.screenshot({ path: saveScreenshot('chat_page_dark_narrow.png') });
  }));
