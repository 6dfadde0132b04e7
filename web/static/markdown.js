// Markdown -> HTML for model replies with markdown-it (bundled from npm into the binary, see web/web_assets.cmake).
// Safety: `html: false` escapes every tag the model writes, markdown-it's link validator drops javascript:/vbscript:/
// file:/data: URLs, images are off (a model-written image URL would be a request to another host), and links open in
// a new tab without access to this page. The page's Content-Security-Policy forbids inline script on top of that.
import MarkdownIt from './vendor/markdown-it.mjs';

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false, breaks: false });
markdown.disable('image');

const renderToken = (tokens, index, options, env, self) => self.renderToken(tokens, index, options);
const renderLinkOpen = markdown.renderer.rules.link_open ?? renderToken;
markdown.renderer.rules.link_open = (tokens, index, options, env, self) => {
  tokens[index].attrSet('target', '_blank');
  tokens[index].attrSet('rel', 'noopener noreferrer nofollow');
  return renderLinkOpen(tokens, index, options, env, self);
};

// Code blocks get a header with the language and a copy button (wired up by the page through event delegation).
const renderFence = markdown.renderer.rules.fence;
markdown.renderer.rules.fence = (tokens, index, options, env, self) => {
  const language = tokens[index].info.trim().split(/\s+/)[0] ?? '';
  const label = markdown.utils.escapeHtml(language || 'text');
  const code = renderFence(tokens, index, options, env, self);
  return `<div class="code-block"><div class="code-head"><span>${label}</span>` +
    `<button type="button" class="copy-code">Copy</button></div>${code}</div>`;
};

export function renderMarkdown(text) {
  return markdown.render(text);
}
