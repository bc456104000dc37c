// The settings renderers: the Settings form, the composer's provider/model
// picker (providers a check found unable to answer left out), and the
// header's model badge.
import { $, h, notify } from './dom.js';
import { api } from './http.js';
import { app, firstUnreachable, setPrefs, setProviders } from './state.js';
import { cleanPrefs, writePrefs } from './prefs.js';

/** The picker's value for a provider and model. */
const pickValue = (provider, model) => JSON.stringify([provider, model]);

/**
 * The composer's picker: each provider's models, providers that a check
 * found unable to answer left out (a chosen one stays, marked, so the
 * choice is visible).
 */
function fillPicker() {
  const sel = $('composer-provider');
  if (!sel) return;
  const { provider, model } = answering();
  const options = [];
  let chosen = false;
  for (const p of app.providers.providers || []) {
    const models = [...new Set([p.default_model, ...(p.models || [])].filter(Boolean))];
    if (!models.length) models.push('');
    const usable = p.reachable !== false;
    for (const m of models) {
      const isChoice = p.name === provider && m === model;
      if (!usable && !isChoice) continue;
      chosen = chosen || isChoice;
      options.push(h('option', { value: pickValue(p.name, m), disabled: !usable, 'data-provider': p.name },
        `${p.name}${m && m !== p.name ? ` · ${m}` : ''}${usable ? '' : ' (cannot answer)'}`));
    }
  }
  if (!chosen && provider) {
    options.unshift(h('option', { value: pickValue(provider, model) }, `${provider}${model ? ` · ${model}` : ''}`));
  }
  if (!options.length) options.push(h('option', { value: '' }, 'the server default model'));
  sel.replaceChildren(...options);
  sel.value = provider ? pickValue(provider, model) : '';
}

function pickProvider(value) {
  let pair;
  try {
    pair = JSON.parse(value);
  } catch {
    return;
  }
  if (!Array.isArray(pair)) return;
  const [provider, model] = pair;
  showProviderNote(''); // a "cannot answer" about the previous choice no longer applies
  const prov = (app.providers.providers || []).find((x) => x.name === provider);
  // The provider's default model is not pinned: a later change of the
  // server's default model is then followed.
  savePrefs({ ...app.prefs, provider, model: prov && model === prov.default_model ? undefined : model || undefined });
  fillSettings();
  fillPicker();
  notify(`Answers now come from ${modelLabel()}.`);
  reportUnreachable();
}

/** Says once (per provider and page) why the chosen provider cannot answer. */
function reportUnreachable() {
  const { provider } = answering();
  const p = (app.providers.providers || []).find((x) => x.name === provider);
  if (!p || p.reachable !== false || !firstUnreachable(p.name)) return;
  const why = p.detail ? `: ${p.detail}` : ' right now';
  showProviderNote(`${p.name} cannot answer${why}. Pick another provider here.`);
}

/**
 * The picker's own note, under the composer: about the choice, not an
 * action, so it never doubles a failure shown where it happened (the
 * alert, a message's note).
 */
function showProviderNote(text) {
  const note = $('provider-note');
  note.textContent = text;
  note.hidden = !text;
}

/** Asks the server which providers answer (a request each), then refills the picker. */
async function checkProviders() {
  let checked;
  try {
    checked = await api('/api/providers?check=true');
  } catch {
    return; // the picker keeps every configured provider
  }
  if (!checked || !Array.isArray(checked.providers)) return;
  setProviders(checked);
  fillPicker();
  fillSettings();
  renderModelBadge();
  reportUnreachable();
}

function fillSettings() {
  const p = app.prefs;
  const sel = $('set-provider');
  const provs = app.providers.providers || [];
  sel.replaceChildren(
    h('option', { value: '' }, `Server default${app.providers.default ? ` (${app.providers.default})` : ''}`),
    ...provs.map((x) => h('option', { value: x.name }, `${x.name} (${x.kind})`)));
  if (p.provider && !provs.some((x) => x.name === p.provider)) sel.append(h('option', { value: p.provider }, `${p.provider} (not configured here)`));
  sel.value = p.provider || '';
  fillModels();
  $('set-model').value = p.model || '';
  $('set-temperature').value = String(p.temperature ?? 0.7);
  $('temperature-value').textContent = Number(p.temperature ?? 0.7).toFixed(1) + (p.temperature === undefined ? ' (default)' : '');
  $('set-max-tokens').value = p.max_tokens ?? '';
  $('set-rag').checked = p.rag !== false;
  $('set-url-fetch').checked = p.url_fetch === true;
  $('set-max-entries').value = p.max_entries ?? '';
  $('set-min-certainty').value = p.min_certainty ?? '';
  $('set-username').value = p.username || '';
  $('set-username').placeholder = app.info.username || 'you';
}

function fillModels() {
  const name = $('set-provider').value || app.providers.default;
  const prov = (app.providers.providers || []).find((x) => x.name === name);
  const models = new Set(prov ? [prov.default_model, ...(prov.models || [])].filter(Boolean) : []);
  $('model-list').replaceChildren(...[...models].map((m) => h('option', { value: m })));
  $('set-model').placeholder = prov && prov.default_model ? `default: ${prov.default_model}` : 'default';
}

function readSettingsForm(changed) {
  const p = { ...app.prefs };
  const num = (id) => {
    const v = $(id).value.trim();
    return v === '' ? undefined : Number(v);
  };
  p.provider = $('set-provider').value || undefined;
  p.model = $('set-model').value.trim() || undefined;
  if (changed === 'set-temperature' || p.temperature !== undefined) p.temperature = Number($('set-temperature').value);
  p.max_tokens = num('set-max-tokens');
  if (p.max_tokens !== undefined) p.max_tokens = Math.round(p.max_tokens);
  p.rag = $('set-rag').checked ? undefined : false;
  p.url_fetch = $('set-url-fetch').checked ? true : undefined;
  p.max_entries = num('set-max-entries');
  if (p.max_entries !== undefined) p.max_entries = Math.round(p.max_entries);
  p.min_certainty = num('set-min-certainty');
  p.username = $('set-username').value.trim() || undefined;
  return cleanPrefs(p);
}

function savePrefs(prefs) {
  setPrefs(cleanPrefs(prefs));
  writePrefs(app.prefs);
  renderModelBadge();
  fillPicker();
}

/** The provider and model that will answer the next message: the settings, else the server's defaults. */
function answering() {
  const name = app.prefs.provider || app.providers.default || '';
  const prov = (app.providers.providers || []).find((x) => x.name === name);
  const model = app.prefs.model || (prov && prov.default_model) || '';
  return { provider: name, model };
}

function modelLabel() {
  const { provider, model } = answering();
  if (!provider) return 'the server default model';
  return model && model !== provider ? `${provider} · ${model}` : provider;
}

function renderModelBadge() {
  const badge = $('model-badge');
  const label = modelLabel();
  badge.textContent = label;
  badge.title = `Answers come from ${label} (change it in Settings)`;
}

export {
  checkProviders, fillModels, fillPicker, fillSettings, modelLabel, pickProvider, readSettingsForm,
  renderModelBadge, savePrefs,
};
