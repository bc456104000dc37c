// The server's JSON API: `api` (a JSON call; errors become ApiError with the
// server's kind, message and JSON pointer) and `postSse` (a POST whose
// answer is Server-Sent Events: a turn's stream).

class ApiError extends Error {
  constructor(status, kind, message, pointer) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.pointer = pointer;
  }
}

async function errorFrom(response) {
  let kind = 'http';
  let message = `${response.status} ${response.statusText}`;
  let pointer;
  try {
    const body = await response.json();
    if (body && body.error) {
      kind = body.error.kind || kind;
      message = body.error.message || message;
      pointer = body.error.pointer;
    }
  } catch {
    // not JSON
  }
  return new ApiError(response.status, kind, message, pointer);
}

/** JSON API call; state-changing methods always send a JSON body. */
async function api(path, { method = 'GET', body, rawBody, signal } = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' }, signal };
  if (method !== 'GET' && method !== 'HEAD') {
    init.headers['Content-Type'] = 'application/json';
    init.body = rawBody ?? JSON.stringify(body ?? {});
  }
  const r = await fetch(path, init);
  if (!r.ok) throw await errorFrom(r);
  const type = r.headers.get('content-type') || '';
  if (type.includes('json')) return r.json();
  return r.text();
}

/**
 * POST a JSON body and read the Server-Sent Events answer. `on` maps event
 * names to handlers. `done` and `error` end the answer: reading stops there
 * even if the server keeps the connection open. Resolves with the last
 * event's name.
 */
async function postSse(path, body, on, signal) {
  const r = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify(body),
    signal,
  });
  if (!r.ok) throw await errorFrom(r);
  if (!r.body) throw new ApiError(0, 'internal', 'This browser cannot read a streamed answer.');
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let last = null;
  const dispatch = (frame) => {
    let event = 'message';
    const data = [];
    for (const line of frame.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (!data.length) return;
    let payload;
    try {
      payload = JSON.parse(data.join('\n'));
    } catch {
      payload = { text: data.join('\n') };
    }
    last = event;
    if (on[event]) on[event](payload);
  };
  // After `done` a `memory` event may follow (the interpreter ran on the
  // exchange); the stream ends after it, or right after `done` without one.
  const finished = () => last === 'memory' || last === 'error';
  while (!finished()) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    // Normalise line ends, keeping a trailing CR until its LF may arrive.
    const keepCr = buf.endsWith('\r');
    if (keepCr) buf = buf.slice(0, -1);
    buf = buf.replace(/\r\n?/g, '\n');
    let i;
    while (!finished() && (i = buf.indexOf('\n\n')) >= 0) {
      dispatch(buf.slice(0, i));
      buf = buf.slice(i + 2);
    }
    if (keepCr) buf += '\r';
  }
  if (finished()) {
    reader.cancel().catch(() => {});
    return last;
  }
  buf += decoder.decode();
  if (buf.trim()) dispatch(buf.replace(/\r\n?/g, '\n'));
  return last;
}

export {
  api, ApiError, postSse,
};
