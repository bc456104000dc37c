// Untrusted XHTML → DOM, and back to Markdown. Content (messages, truth,
// context) is parsed with DOMParser (an inert document: no scripts run,
// nothing loads) and only an allowlist of elements and attributes is copied
// into new nodes made with createElement/textContent. Nothing from content
// ever reaches innerHTML.

/** Elements copied when rendering content (others are unwrapped or dropped). */
const RENDER_ELEMENTS = new Set([
  'p', 'br', 'em', 'strong', 'b', 'i', 'u', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li',
  'a', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'table', 'thead', 'tbody', 'tr', 'th', 'td',
  'span', 'div', 'hr', 'sub', 'sup', 'del', 'ins', 'dl', 'dt', 'dd',
]);

/** Elements dropped together with everything inside them. */
const DROP_ELEMENTS = new Set([
  'script', 'style', 'template', 'noscript', 'iframe', 'frame', 'frameset', 'object',
  'embed', 'applet', 'svg', 'math', 'textarea', 'select', 'option', 'optgroup', 'datalist',
  'title', 'head', 'meta', 'link', 'base', 'noembed', 'noframes', 'xmp', 'plaintext',
  'img', 'image', 'picture', 'source', 'video', 'audio', 'track', 'canvas', 'input',
  'button', 'param', 'portal', 'slot', 'dialog', 'map', 'area',
]);

const VOID_ELEMENTS = new Set(['br', 'hr']);

const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);

const HTML_NS = 'http://www.w3.org/1999/xhtml';

const MAX_DEPTH = 100;

/** An absolute http/https/mailto URL, normalised; anything else → null. */
function safeHref(raw) {
  if (typeof raw !== 'string') return null;
  let url;
  try {
    url = new URL(raw.trim()); // absolute only: relative URLs throw
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

function parseFragment(src) {
  // An inert document: nothing in it runs or loads.
  return new DOMParser().parseFromString(String(src ?? ''), 'text/html').body;
}

/**
 * Copies the allowed part of `from`'s children into `to`, creating nodes in
 * `doc`. `allowed` is the element allowlist; `forRender` adds the link
 * attributes used on screen.
 */
function copySafe(from, to, doc, allowed, forRender, depth) {
  for (const n of Array.from(from.childNodes)) {
    if (n.nodeType === Node.TEXT_NODE) {
      to.append(doc.createTextNode(n.data));
      continue;
    }
    if (n.nodeType !== Node.ELEMENT_NODE) continue; // comments, CDATA, PIs
    if (n.namespaceURI !== HTML_NS) continue; // svg/math subtrees
    const tag = n.localName;
    if (DROP_ELEMENTS.has(tag)) continue;
    if (depth >= MAX_DEPTH) {
      to.append(doc.createTextNode(n.textContent || ''));
      continue;
    }
    if (!allowed.has(tag)) {
      copySafe(n, to, doc, allowed, forRender, depth + 1); // unwrap
      continue;
    }
    const e = doc.createElement(tag);
    const title = n.getAttribute('title');
    if (title != null) e.setAttribute('title', title);
    if (forRender && tag === 'code') {
      // pulldown-cmark's `language-x` class names the code's language (for
      // highlighting); no other class reaches the page.
      const lang = /(?:^|\s)language-([A-Za-z0-9_+#.-]{1,32})(?:\s|$)/.exec(n.getAttribute('class') || '');
      if (lang) e.setAttribute('data-lang', lang[1]);
    }
    if (tag === 'a') {
      const href = safeHref(n.getAttribute('href'));
      if (href) {
        e.setAttribute('href', href);
        if (forRender) {
          e.setAttribute('rel', 'noopener noreferrer nofollow');
          e.setAttribute('target', '_blank');
        }
      }
    }
    if (!VOID_ELEMENTS.has(tag)) copySafe(n, e, doc, allowed, forRender, depth + 1);
    to.append(e);
  }
}

/** Untrusted XHTML → a DocumentFragment of safe nodes for this page. */
function renderXhtml(src) {
  const frag = document.createDocumentFragment();
  copySafe(parseFragment(src), frag, document, RENDER_ELEMENTS, true, 0);
  return frag;
}

function plainText(src) {
  return (parseFragment(src).textContent || '').replace(/\s+/g, ' ').trim();
}

const CONTROL_CHARS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g;

function escText(s) {
  return String(s)
    .replace(CONTROL_CHARS, '')
    .replace(/[&<>]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;' })[c]);
}

/** Sanitised content → Markdown (what Copy puts on the clipboard, as text). */
function toMarkdown(node, ctx = { list: null, index: 0 }) {
  let out = '';
  for (const n of node.childNodes) {
    if (n.nodeType === Node.TEXT_NODE) {
      out += n.data.replace(/\s+/g, ' ');
      continue;
    }
    if (n.nodeType !== Node.ELEMENT_NODE) continue;
    const tag = n.localName;
    const inner = () => toMarkdown(n, ctx).trim();
    switch (tag) {
      case 'br': out += '\n'; break;
      case 'p': case 'div': out += `\n\n${inner()}\n\n`; break;
      case 'h1': case 'h2': case 'h3': case 'h4': case 'h5': case 'h6':
        out += `\n\n${'#'.repeat(Number(tag[1]))} ${inner()}\n\n`; break;
      case 'strong': case 'b': out += `**${inner()}**`; break;
      case 'em': case 'i': out += `*${inner()}*`; break;
      case 'del': out += `~~${inner()}~~`; break;
      case 'code': out += '`' + (n.textContent || '') + '`'; break;
      case 'pre': out += '\n\n```\n' + (n.textContent || '').replace(/\n$/, '') + '\n```\n\n'; break;
      case 'blockquote': out += '\n\n' + inner().split('\n').map((l) => `> ${l}`).join('\n') + '\n\n'; break;
      case 'ul': case 'ol': {
        let i = 0;
        const items = [];
        for (const li of n.children) {
          if (li.localName !== 'li') continue;
          i++;
          const body = toMarkdown(li, ctx).trim().replace(/\n+/g, '\n   ');
          items.push(`${tag === 'ol' ? `${i}.` : '-'} ${body}`);
        }
        out += `\n\n${items.join('\n')}\n\n`;
        break;
      }
      case 'a': {
        const href = n.getAttribute('href');
        const text = inner();
        out += href ? `[${text}](${href})` : text;
        break;
      }
      case 'hr': out += '\n\n---\n\n'; break;
      case 'tr': out += `\n| ${Array.from(n.children).map((c) => toMarkdown(c, ctx).trim()).join(' | ')} |`; break;
      case 'table': out += `\n\n${toMarkdown(n, ctx).trim()}\n\n`; break;
      default: out += toMarkdown(n, ctx);
    }
  }
  return out;
}

function messageMarkdown(m) {
  const holder = document.createElement('div');
  holder.append(renderXhtml(m.content));
  return toMarkdown(holder).replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

/** Stored XHTML → the Markdown shown for editing (never the markup itself). */
function xhtmlToMarkdown(xhtml) {
  const holder = document.createElement('div');
  holder.append(renderXhtml(xhtml));
  return toMarkdown(holder).replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

export {
  escText, messageMarkdown, plainText, renderXhtml, xhtmlToMarkdown,
};
