// The settings panel: system prompt, sampling values, model choice and API key, kept in localStorage so a reload
// keeps them. The API key lives under its own key so clearing it is one field.

const SETTINGS_KEY = 'qinfer.chat.settings';
const API_KEY_KEY = 'qinfer.chat.apiKey';

function readStorage(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;  // storage disabled (private mode, policy): settings just do not persist
  }
}

function writeStorage(key, value) {
  try {
    if (value) localStorage.setItem(key, value);
    else localStorage.removeItem(key);
  } catch {
    // storage disabled: nothing to keep
  }
}

// A number field's value, or null when empty/invalid so the server's default applies.
function numberValue(input) {
  const value = input.valueAsNumber;
  return Number.isFinite(value) ? value : null;
}

export class Settings {
  constructor(doc) {
    this.systemPrompt = doc.getElementById('system-prompt');
    this.temperature = doc.getElementById('temperature');
    this.topP = doc.getElementById('top-p');
    this.maxTokens = doc.getElementById('max-tokens');
    this.apiKeyInput = doc.getElementById('api-key');
    this.model = doc.getElementById('model');
    this.savedModel = null;
    this.restore();
    for (const input of [this.systemPrompt, this.temperature, this.topP, this.maxTokens, this.model])
      input.addEventListener('change', () => this.save());
    this.apiKeyInput.addEventListener('change', () => writeStorage(API_KEY_KEY, this.apiKeyInput.value.trim()));
  }

  restore() {
    this.apiKeyInput.value = readStorage(API_KEY_KEY) ?? '';
    let saved = {};
    try {
      saved = JSON.parse(readStorage(SETTINGS_KEY) ?? '{}') ?? {};
    } catch {
      saved = {};
    }
    if (typeof saved.systemPrompt === 'string') this.systemPrompt.value = saved.systemPrompt;
    for (const [input, name] of [[this.temperature, 'temperature'], [this.topP, 'topP'], [this.maxTokens, 'maxTokens']])
      if (typeof saved[name] === 'number') input.value = String(saved[name]);
    if (typeof saved.model === 'string') this.savedModel = saved.model;
  }

  save() {
    writeStorage(SETTINGS_KEY, JSON.stringify({
      systemPrompt: this.systemPrompt.value,
      temperature: numberValue(this.temperature),
      topP: numberValue(this.topP),
      maxTokens: numberValue(this.maxTokens),
      model: this.model.value || this.savedModel,
    }));
  }

  get apiKey() {
    return this.apiKeyInput.value.trim();
  }

  // Fills the model list, keeping the saved choice when the server still offers it.
  setModels(ids) {
    const wanted = this.model.value || this.savedModel;
    this.model.replaceChildren(...ids.map((id) => new Option(id, id)));
    if (ids.includes(wanted)) this.model.value = wanted;
  }

  // The request fields these settings control; empty fields are left out so the server's defaults apply.
  requestFields() {
    const fields = {};
    if (this.model.value) fields.model = this.model.value;
    const temperature = numberValue(this.temperature);
    const topP = numberValue(this.topP);
    const maxTokens = numberValue(this.maxTokens);
    if (temperature !== null) fields.temperature = temperature;
    if (topP !== null) fields.top_p = topP;
    if (maxTokens !== null) fields.max_tokens = Math.round(maxTokens);
    return fields;
  }

  systemMessage() {
    const text = this.systemPrompt.value.trim();
    return text ? [{ role: 'system', content: text }] : [];
  }
}
