// The chat page: a multi-turn conversation streamed from /v1/chat/completions, rendered as Markdown, with a stop
// button, settings, and the time to first token and generation speed under every reply.
import { ChatError, isAbort, listModels, streamChat } from './chat_stream.js';
import { renderMarkdown } from './markdown.js';
import { Settings } from './settings.js';

const byId = (id) => document.getElementById(id);
const settings = new Settings(document);
const messagesView = byId('messages');
const emptyState = byId('empty-state');
const composer = byId('composer');
const promptInput = byId('prompt');
const sendButton = byId('send');
const stopButton = byId('stop');
const banner = byId('banner');
const settingsToggle = byId('toggle-settings');

// Finished turns, sent back to the server as the conversation so far. Failed turns are shown but not kept.
let history = [];
let conversation = 0;  // bumped by "New chat" so a reply still finishing cannot land in the new conversation
let inFlight = null;  // the AbortController of the reply being streamed

function showBanner(message) {
  banner.textContent = message;
  banner.hidden = false;
}

function setSettingsOpen(open) {
  document.body.dataset.settings = open ? 'open' : 'closed';
  settingsToggle.setAttribute('aria-expanded', String(open));
}

async function refreshModels() {
  try {
    settings.setModels(await listModels(settings.apiKey));
    banner.hidden = true;
  } catch (error) {
    const message = `Cannot list the models: ${error.message}`;
    const unauthorized = error instanceof ChatError && error.status === 401;
    showBanner(unauthorized ? withHint(message, 'Enter the API key in Settings.') : message);
    if (unauthorized) setSettingsOpen(true);
    if (error.status === 503) setTimeout(refreshModels, 2000);  // still loading the model: try again shortly
  }
}

function isNearBottom() {
  return messagesView.scrollHeight - messagesView.scrollTop - messagesView.clientHeight < 80;
}

function appendMessage(role) {
  emptyState.hidden = true;
  const article = document.createElement('article');
  article.className = `message ${role}`;
  const label = document.createElement('div');
  label.className = 'role';
  label.textContent = role === 'user' ? 'You' : 'Assistant';
  const content = document.createElement('div');
  content.className = role === 'user' ? 'content plain' : 'content markdown';
  article.append(label, content);
  messagesView.append(article);
  messagesView.scrollTop = messagesView.scrollHeight;
  return { article, content };
}

// The reply's reasoning (reasoning_content), folded in a <details> above the answer; created on its first piece.
// Shown as plain text: it is the model's scratch work, not formatted for reading.
function reasoningView(article, content) {
  let details = null;
  let body = null;
  return {
    append(piece) {
      if (!details) {
        details = document.createElement('details');
        details.className = 'reasoning';
        const summary = document.createElement('summary');
        summary.textContent = 'Thinking…';
        body = document.createElement('div');
        body.className = 'reasoning-text';
        details.append(summary, body);
        article.insertBefore(details, content);
      }
      body.textContent += piece;
    },
    finish() {
      if (details) details.querySelector('summary').textContent = 'Reasoning';
    },
  };
}

// Re-renders the growing reply at most once per animation frame.
function replyRenderer(content) {
  let text = '';
  let pending = false;
  const render = () => {
    pending = false;
    const follow = isNearBottom();
    content.innerHTML = renderMarkdown(text);  // safe: html:false escapes model-written tags (see markdown.js)
    if (follow) messagesView.scrollTop = messagesView.scrollHeight;
  };
  return {
    append(piece) {
      text += piece;
      if (!pending) {
        pending = true;
        requestAnimationFrame(render);
      }
    },
    finish(hasReasoning = false) {
      render();
      if (!text && !hasReasoning) content.innerHTML = '<p class="muted">(empty reply)</p>';
      return text;
    },
  };
}

function formatStats({ startedAt, firstTokenAt, endedAt, usage, chunks, finishReason }) {
  const parts = [];
  if (firstTokenAt !== null) parts.push(`TTFT ${Math.round(firstTokenAt - startedAt)} ms`);
  const tokens = usage?.completion_tokens ?? chunks;
  const approx = usage ? '' : '~';
  // Generation speed after the first token: what a reader sees the text grow at.
  if (firstTokenAt !== null && tokens > 1 && endedAt > firstTokenAt)
    parts.push(`${approx}${((tokens - 1) / ((endedAt - firstTokenAt) / 1000)).toFixed(1)} tok/s`);
  parts.push(`${approx}${tokens} token${tokens === 1 ? '' : 's'}`);
  if (finishReason) parts.push(finishReason === 'length' ? 'stopped at max_tokens' : `finish: ${finishReason}`);
  return parts.join(' · ');
}

function appendMeta(article, text) {
  const meta = document.createElement('div');
  meta.className = 'meta';
  meta.textContent = text;
  article.append(meta);
}

// Server messages may or may not end a sentence; a hint appended after one must read as a new sentence.
function withHint(message, hint) {
  return `${message}${/[.!?]$/.test(message) ? '' : '.'} ${hint}`;
}

function appendError(article, error) {
  const box = document.createElement('div');
  box.className = 'error';
  box.setAttribute('role', 'alert');
  let message = error instanceof ChatError ? error.message : `Unexpected error: ${error.message}`;
  if (error.status === 429) {
    const retry = error.retryAfterSeconds !== null ? `Retry after ${error.retryAfterSeconds} s.` : 'Retry later.';
    message = withHint(message, retry);
  }
  if (error.status === 401) {
    message = withHint(message, 'Enter the API key in Settings.');
    setSettingsOpen(true);
  }
  box.textContent = message;
  article.append(box);
}

function setBusy(busy) {
  sendButton.hidden = busy;
  stopButton.hidden = !busy;
  if (!busy) promptInput.focus();
}

async function sendMessage(userText) {
  const userTurn = { role: 'user', content: userText };
  appendMessage('user').content.textContent = userText;
  const reply = appendMessage('assistant');
  reply.article.dataset.state = 'streaming';
  reply.article.setAttribute('aria-busy', 'true');  // screen readers read the reply once, when it is complete
  const renderer = replyRenderer(reply.content);
  const reasoning = reasoningView(reply.article, reply.content);
  let reasoned = false;
  const controller = new AbortController();
  inFlight = controller;
  setBusy(true);
  const turnConversation = conversation;
  const remember = (assistantText) => {
    if (turnConversation === conversation) history.push(userTurn, { role: 'assistant', content: assistantText });
  };
  const timing = { startedAt: performance.now(), firstTokenAt: null, endedAt: null, usage: null, chunks: 0 };
  try {
    const result = await streamChat({
      body: { ...settings.requestFields(), messages: [...settings.systemMessage(), ...history, userTurn] },
      apiKey: settings.apiKey,
      signal: controller.signal,
      onDelta(piece) {
        timing.firstTokenAt ??= performance.now();
        timing.chunks += 1;
        renderer.append(piece);
      },
      onReasoning(piece) {
        timing.firstTokenAt ??= performance.now();
        timing.chunks += 1;
        reasoned = true;
        reasoning.append(piece);
      },
    });
    timing.endedAt = performance.now();
    reasoning.finish();
    remember(renderer.finish(reasoned));  // the reasoning is not sent back (Qwen3's template drops it anyway)
    reply.article.dataset.state = 'done';
    appendMeta(reply.article, formatStats({ ...timing, ...result }));
  } catch (error) {
    timing.endedAt = performance.now();
    reasoning.finish();
    const partial = renderer.finish(reasoned);
    if (isAbort(error)) {
      if (partial) remember(partial);
      reply.article.dataset.state = 'stopped';
      appendMeta(reply.article, `Stopped · ${formatStats(timing)}`);
    } else {
      reply.article.dataset.state = 'error';
      if (!partial) reply.content.replaceChildren();
      appendError(reply.article, error);
      if (!promptInput.value) promptInput.value = userText;  // easy to retry
    }
  } finally {
    reply.article.removeAttribute('aria-busy');
    if (inFlight === controller) {
      inFlight = null;
      setBusy(false);
    }
  }
}

composer.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = promptInput.value.trim();
  if (!text || inFlight) return;
  promptInput.value = '';
  sendMessage(text);
});

promptInput.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

stopButton.addEventListener('click', () => inFlight?.abort());

byId('new-chat').addEventListener('click', () => {
  inFlight?.abort();
  conversation += 1;
  history = [];
  messagesView.replaceChildren(emptyState);
  emptyState.hidden = false;
  promptInput.focus();
});

settingsToggle.addEventListener('click', () => setSettingsOpen(document.body.dataset.settings !== 'open'));
settings.apiKeyInput.addEventListener('change', refreshModels);

messagesView.addEventListener('click', async (event) => {
  const button = event.target.closest('.copy-code');
  if (!button) return;
  const code = button.closest('.code-block')?.querySelector('code');
  try {
    await navigator.clipboard.writeText(code?.textContent ?? '');
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed';  // the clipboard needs a secure context (https or localhost)
  }
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
});

setSettingsOpen(window.matchMedia('(min-width: 960px)').matches);
refreshModels();
promptInput.focus();
