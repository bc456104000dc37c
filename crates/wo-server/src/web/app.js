// WikiOracle web client: one codebase for `wo serve` (local mode, the server
// owns llm.json) and `wo serve --stateless` (the browser keeps llm.json in
// IndexedDB). No framework, no build step, no external requests: ES modules
// under js/, imported relatively, so the web/ folder also works from a
// static file server. ARCHITECTURE.md's "web client" table says which
// module owns what; js/main.js starts the page.
//
// Security rules kept throughout:
// - Content (messages, truth, context) is untrusted XHTML, rendered by
//   js/xhtml.js from an allowlist into nodes made with createElement; nothing
//   from content ever reaches innerHTML.
// - Titles, usernames, ids, diff lines and error messages are text only.
// - Settings live in this server's preferences cookie (js/prefs.js); no
//   state and no secret goes there.

import './js/main.js';

// For the browser suite (tests/browser/run.mjs), which imports this module
// again (the same instances: nothing runs twice) and holds these to the
// Rust golden vectors. Exports are not globals: nothing leaks into the page.
export {
  admitState, applyStatePatch, canonicalStateText, deleteTruthIn, editTruthIn, mergeStates, messageId,
  normalizeState, renameMessageIn, textToXhtml, truthId, listConversations, compareTimestamps, sortMessages,
  messageParents, roleOf, truthByUpdate, newState, bm25Scores,
} from './js/format.js';
export { codeTokens } from './js/highlight.js';
