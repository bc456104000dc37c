// The ingestion page (ingest.html): pick a folder, index it in the browser
// with crates/wo-index-wasm (the Rust `wo index` runs), store the index in
// IndexedDB, search it, show outlines and symbols, and download the exports
// `wo pack --layout full` writes. Files are read here and never sent
// anywhere. Folders whose names start with "." are not read (the index
// skips hidden names, as `wo index` does), but hidden files are, so
// `.gitignore` and `.ignore` apply as they do natively.

import { loadModule, loadSaved, save, forget } from './ingest-lib.js';

const $ = (id) => document.getElementById(id);
let indexer = null;

function setError(msg) { $('error').textContent = msg || ''; }

function showProgress(label, done, total) {
  $('progress-wrap').hidden = false;
  $('progress-label').textContent = label;
  $('progress').max = Math.max(total, 1);
  $('progress').value = done;
}

const skippedDir = (name) => name.startsWith('.');

/** Files of a directory handle (File System Access API), as [{path, file}]. */
async function fromHandle(dir, prefix = '', out = []) {
  for await (const [name, handle] of dir.entries()) {
    if (handle.kind === 'directory') {
      if (!skippedDir(name)) await fromHandle(handle, `${prefix}${name}/`, out);
    } else {
      out.push({ path: prefix + name, file: await handle.getFile() });
    }
  }
  return out;
}

/** Files of a dropped directory entry (webkitGetAsEntry). */
async function fromEntry(dir, prefix = '', out = []) {
  const reader = dir.createReader();
  for (;;) {
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) break;
    for (const e of batch) {
      if (e.isDirectory) {
        if (!skippedDir(e.name)) await fromEntry(e, `${prefix}${e.name}/`, out);
      } else {
        out.push({ path: prefix + e.name, file: await new Promise((resolve, reject) => e.file(resolve, reject)) });
      }
    }
  }
  return out;
}

/** Files of `<input webkitdirectory>`: paths start with the folder's name, which is dropped. */
function fromInput(list) {
  const out = [];
  let name = '';
  for (const file of list) {
    const parts = file.webkitRelativePath.split('/');
    name ||= parts[0];
    const rest = parts.slice(1);
    if (rest.slice(0, -1).some(skippedDir)) continue;
    out.push({ path: rest.join('/'), file });
  }
  return { name, files: out };
}

async function ingest(name, files) {
  setError('');
  try {
    const m = await loadModule();
    const ix = new m.Indexer(name);
    let done = 0;
    for (const { path, file } of files) {
      ix.add(path, new Uint8Array(await file.arrayBuffer()));
      done += 1;
      if (done % 16 === 0 || done === files.length) showProgress(`Reading ${done} of ${files.length} files`, done, files.length);
    }
    showProgress(`Indexing ${files.length} files…`, files.length, files.length);
    await new Promise((r) => setTimeout(r, 0)); // let the label paint before the build
    const saved = await loadSaved();
    const previous = saved && saved.name === name ? saved.index : undefined;
    const report = JSON.parse(ix.build(previous));
    await save({ name, index: ix.indexJson() });
    indexer = ix;
    $('progress-wrap').hidden = true;
    $('summary').textContent = `Indexed “${name}”: ${report.files} files, ${report.chunks} chunks `
      + `(${report.files_chunked} chunked, ${report.files_reused} reused, ${report.files_removed} removed`
      + `${report.warnings.length ? `, ${report.warnings.length} notices` : ''}). Stored in this browser.`;
    document.body.dataset.reused = String(report.files_reused);
    document.body.dataset.chunked = String(report.files_chunked);
    ready();
  } catch (e) {
    $('progress-wrap').hidden = true;
    setError(`Could not index the folder: ${e && e.message ? e.message : e}`);
  }
}

function ready() {
  for (const id of ['search-card', 'outline-card', 'exports-card', 'forget']) $(id).hidden = false;
  renderExports();
  document.body.dataset.ready = 'true';
}

function downloadButton(name) {
  const li = document.createElement('li');
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = name;
  b.dataset.export = name;
  b.addEventListener('click', () => {
    try {
      const bytes = name === 'index.json' ? new TextEncoder().encode(indexer.indexJson()) : indexer.exportFile(name);
      const url = URL.createObjectURL(new Blob([bytes]));
      const a = document.createElement('a');
      a.href = url;
      a.download = name.split('/').pop();
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setError(String(e && e.message ? e.message : e));
    }
  });
  li.append(b);
  return li;
}

function renderExports() {
  const { files, report } = JSON.parse(indexer.renderExports('full'));
  const main = $('exports');
  const chunks = $('chunk-exports');
  main.replaceChildren(downloadButton('index.json'));
  chunks.replaceChildren();
  let n = 0;
  for (const [name] of files) {
    if (name.startsWith('chunks/')) { chunks.append(downloadButton(name)); n += 1; } else main.append(downloadButton(name));
  }
  $('chunk-count').textContent = String(n);
  // After a reload the index is stored but the images' bytes are not: say so beside the exports.
  $('export-note').textContent = report.warnings.length
    ? `Left out: ${report.warnings.join('; ')}. Pick the folder again to include them.`
    : '';
}

function runSearch(ev) {
  ev.preventDefault();
  setError('');
  try {
    const hits = JSON.parse(indexer.search(JSON.stringify({
      text: $('q').value, kind: $('kind').value || null, path: $('path').value || null, limit: 20,
    })));
    const list = $('hits');
    list.replaceChildren();
    if (!hits.length) {
      const li = document.createElement('li');
      li.textContent = 'No chunk matches.';
      list.append(li);
    }
    for (const h of hits) {
      const li = document.createElement('li');
      const where = document.createElement('div');
      where.className = 'where';
      where.textContent = `${h.ref} ${h.path}:${h.start_line}-${h.end_line} ${h.label}`;
      const snip = document.createElement('div');
      snip.className = 'snippet';
      snip.textContent = h.snippet;
      li.append(where, snip);
      list.append(li);
    }
  } catch (e) {
    setError(String(e && e.message ? e.message : e));
  }
}

function showOutline(ev) {
  ev.preventDefault();
  setError('');
  try {
    const path = $('outline-path').value;
    const list = $('outline');
    list.replaceChildren();
    for (const o of JSON.parse(indexer.outline(path))) {
      const li = document.createElement('li');
      li.textContent = `${'  '.repeat(o.depth - 1)}${o.heading} — ${o.path}:${o.start_line} (${o.ref})`;
      list.append(li);
    }
    for (const s of JSON.parse(indexer.symbols(path))) {
      const li = document.createElement('li');
      li.textContent = `${s.symbol} — ${s.path}:${s.start_line}-${s.end_line} (${s.ref})`;
      list.append(li);
    }
  } catch (e) {
    setError(String(e && e.message ? e.message : e));
  }
}

async function start() {
  if ('showDirectoryPicker' in window) {
    // One way to pick: the File System Access API's picker; the input stays for drop-in tests and older pages.
    $('pick-folder').hidden = false;
    $('folder-input-label').hidden = true;
    $('pick-folder').addEventListener('click', async () => {
      let handle;
      try { handle = await window.showDirectoryPicker(); } catch { return; } // cancelled
      showProgress('Listing files…', 0, 0);
      await ingest(handle.name, await fromHandle(handle));
    });
  }
  $('folder-input').addEventListener('change', async () => {
    const { name, files } = fromInput($('folder-input').files);
    if (files.length) await ingest(name, files);
    $('folder-input').value = '';
  });
  const zone = $('drop-zone');
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('dragging'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('dragging'));
  zone.addEventListener('drop', async (e) => {
    e.preventDefault();
    zone.classList.remove('dragging');
    const entry = e.dataTransfer.items && e.dataTransfer.items[0] && e.dataTransfer.items[0].webkitGetAsEntry();
    if (!entry || !entry.isDirectory) { setError('Drop a folder, not a file.'); return; }
    showProgress('Listing files…', 0, 0);
    await ingest(entry.name, await fromEntry(entry));
  });
  $('search-form').addEventListener('submit', runSearch);
  $('outline-form').addEventListener('submit', showOutline);
  $('forget').addEventListener('click', async () => {
    await forget();
    indexer = null;
    for (const id of ['search-card', 'outline-card', 'exports-card', 'forget']) $(id).hidden = true;
    $('summary').textContent = 'The index was removed from this browser.';
    delete document.body.dataset.ready;
  });
  try {
    const saved = await loadSaved();
    if (saved) {
      const m = await loadModule();
      indexer = new m.Indexer(saved.name);
      indexer.load(saved.index);
      const data = JSON.parse(saved.index);
      $('summary').textContent = `Index of “${saved.name}” stored in this browser: `
        + `${data.files.length} files, ${data.chunks.length} chunks. Pick the folder again to update it.`;
      ready();
    }
  } catch (e) {
    setError(`The stored index could not be read: ${e && e.message ? e.message : e}`);
  }
  document.body.dataset.loaded = 'true';
}

// For the browser suite (as app.js exports its wasm calls): the bytes the
// download buttons give, read in the page without a download per file.
window.woIngest = {
  exportBytes: (name) => (name === 'index.json' ? new TextEncoder().encode(indexer.indexJson()) : indexer.exportFile(name)),
};

start();
