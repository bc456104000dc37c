// Syntax highlighting, done on the rendered DOM rather than in the stored
// XHTML: the file keeps the plain code pulldown-cmark wrote (message ids
// hash the content, and other tools read llm.json), and the same code looks
// the same while it streams, in both modes. Only text nodes are made: the
// spans' text is the code's text, so nothing in it is ever parsed as markup.
import { h } from './dom.js';

const HL_KEYWORDS = new Set((
  'as async await break case catch class const continue crate def default defer del do done elif else enum esac ' +
  'except export extends extern fi finally fn for foreach from func function go goto if impl import in interface ' +
  'is lambda let loop match mod module move mut namespace new not or and package pass private protected pub public ' +
  'raise readonly ref return select self static struct super switch then this throw trait try type typeof union ' +
  'unsafe use var void where while with yield local end begin elsif unless until echo export val object override ' +
  'CREATE SELECT FROM WHERE INSERT INTO UPDATE DELETE JOIN ON GROUP BY ORDER LIMIT AND OR NOT NULL TABLE VALUES AS ' +
  'create select from where insert into update delete join on group by order limit values table'
).split(' '));

const HL_LITERALS = new Set('true false null nil None True False undefined NaN Infinity Some Ok Err'.split(' '));

/** Languages whose line comments start with `#`. */
const HASH_COMMENTS = new Set(['python', 'py', 'sh', 'bash', 'shell', 'zsh', 'console', 'ruby', 'rb', 'yaml', 'yml', 'toml', 'perl', 'r', 'make', 'makefile', 'dockerfile', 'ini', 'conf', 'nix', 'elixir', 'powershell', 'ps1']);

/** Languages whose line comments start with `--`. */
const DASH_COMMENTS = new Set(['sql', 'lua', 'haskell', 'hs', 'elm', 'ada']);

const HL_MAX_CHARS = 100_000;

/** The code's tokens: [class or '', text] pairs whose texts join to `text`. */
function codeTokens(text, lang) {
  const l = String(lang || '').toLowerCase();
  const hash = HASH_COMMENTS.has(l);
  const dash = DASH_COMMENTS.has(l);
  const slash = !hash || l === 'php';
  const out = [];
  const push = (cls, s) => {
    if (!s) return;
    const last = out[out.length - 1];
    if (last && last[0] === cls) last[1] += s;
    else out.push([cls, s]);
  };
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    const rest2 = text.slice(i, i + 2);
    let j;
    if ((slash && rest2 === '//') || (hash && c === '#') || (dash && rest2 === '--')) {
      j = text.indexOf('\n', i);
      if (j < 0) j = n;
      push('hl-com', text.slice(i, j));
    } else if (slash && rest2 === '/*') {
      j = text.indexOf('*/', i + 2);
      j = j < 0 ? n : j + 2;
      push('hl-com', text.slice(i, j));
    } else if (c === '"' || c === "'" || c === '`') {
      // A quote in Rust lifetimes ('a) or English prose (don't) is not a
      // string: a string ends on its line, or it is not one.
      j = i + 1;
      while (j < n && text[j] !== c && (text[j] !== '\n' || c === '`')) j += text[j] === '\\' ? 2 : 1;
      if (j < n && text[j] === c) {
        j++;
        push('hl-str', text.slice(i, j));
      } else {
        j = i + 1;
        push('', c);
      }
    } else if (/[0-9]/.test(c) && !(i > 0 && /[\w$]/.test(text[i - 1]))) {
      const m = /^(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9]+)?)[a-zA-Z0-9_]*/.exec(text.slice(i, i + 64));
      j = i + m[0].length;
      push('hl-num', m[0]);
    } else if (/[A-Za-z_$]/.test(c)) {
      const m = /^[A-Za-z_$][\w$]*/.exec(text.slice(i, i + 256));
      const word = m[0];
      j = i + word.length;
      let cls = '';
      if (HL_KEYWORDS.has(word)) cls = 'hl-kw';
      else if (HL_LITERALS.has(word)) cls = 'hl-lit';
      else if (text[j] === '(' || (text[j] === '!' && text[j + 1] === '(')) cls = 'hl-fn';
      else if (/^[A-Z][a-z0-9]\w*$/.test(word)) cls = 'hl-ty';
      push(cls, word);
    } else {
      j = i + 1;
      push('', c);
    }
    i = j;
  }
  return out;
}

/** Highlights one rendered `<pre>` (its `<code>`'s `data-lang`, if any) in place. */
function highlightCode(pre) {
  const code = pre.querySelector('code') || pre;
  if (code.childElementCount) return; // already highlighted, or not plain code
  const text = code.textContent || '';
  if (!text || text.length > HL_MAX_CHARS) return;
  const lang = code.getAttribute('data-lang') || '';
  const parts = codeTokens(text, lang).map(([cls, s]) => (cls ? h('span', { class: cls }, s) : document.createTextNode(s)));
  code.replaceChildren(...parts);
  code.classList.add('hl');
  if (lang) pre.setAttribute('data-lang', lang);
}

export {
  codeTokens, highlightCode,
};
