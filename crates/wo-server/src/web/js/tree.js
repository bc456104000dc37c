// The branch tree the views walk: each loaded message's parent by
// wo-format's rule (format.js `messageParents`, run in Rust), its children,
// the branch to a message, the newest leaf below one, a conversation's root.
import { isObject, messageParents } from './format.js';
import { app } from './state.js';

/** The last tree built, reused while the loaded messages are the same (a render asks for it several times). */
let built = { msgs: null, count: -1, whole: null, tree: null };

/**
 * The messages as a tree: `byId`, `parentOf` (id → parent id or null) and
 * `children` (parent id or null → ids, in transcript order). Parents come
 * from wo-format's rule (`State::branch`: `parent`; none for a message
 * marked `new_conversation`; the latest earlier unlinked message for a
 * legacy transcript or a parent not in the file). `whole`: the messages are
 * the whole file (stateless mode); local mode loads pages and
 * conversations, and a parent not loaded makes a root there.
 */
function buildTree(msgs = app.state.messages, whole = app.mode !== 'local') {
  if (built.msgs === msgs && built.count === msgs.length && built.whole === whole) return built.tree;
  const byId = new Map(msgs.map((m) => [m.id, m]));
  const parents = messageParents(msgs, whole);
  const parentOf = new Map();
  const children = new Map();
  for (const m of msgs) {
    const p = parents.get(m.id) ?? null;
    parentOf.set(m.id, p);
    if (!children.has(p)) children.set(p, []);
    children.get(p).push(m.id);
  }
  const tree = { byId, parentOf, children };
  built = { msgs, count: msgs.length, whole, tree };
  return tree;
}

/** Root → id following parent links (cycle-safe). */
function branchTo(id, tree = buildTree()) {
  const path = [];
  const seen = new Set();
  let cur = id;
  while (cur && tree.byId.has(cur) && !seen.has(cur)) {
    seen.add(cur);
    path.push(tree.byId.get(cur));
    cur = tree.parentOf.get(cur);
  }
  return path.reverse();
}

/** The latest leaf below `id` (following the newest child each time). */
function leafBelow(id, tree = buildTree()) {
  let cur = id;
  const seen = new Set();
  for (;;) {
    const kids = tree.children.get(cur);
    if (!kids || !kids.length || seen.has(cur)) return cur;
    seen.add(cur);
    cur = kids[kids.length - 1];
  }
}

function latestId() {
  const m = app.state.messages;
  return m.length ? m[m.length - 1].id : null;
}

/** The root of `id`'s conversation (the top of its parent chain; cycle-safe). */
function rootOf(id, tree, memo) {
  const path = [];
  const seen = new Set();
  let cur = id;
  let root = id;
  while (cur && tree.byId.has(cur) && !seen.has(cur)) {
    if (memo.has(cur)) {
      root = memo.get(cur);
      break;
    }
    seen.add(cur);
    path.push(cur);
    root = cur;
    cur = tree.parentOf.get(cur);
  }
  for (const x of path) memo.set(x, root);
  return root;
}

/** The displayed conversation's root id, or null (none, or a new chat). */
function currentRoot(tree) {
  if (app.newChat || !app.leaf || !tree.byId.has(app.leaf)) return null;
  return rootOf(app.leaf, tree, new Map());
}

/** Whether a conversation's root says it is archived (`archive.hidden`, wo-format's `Message::archived`). */
function isArchived(root) {
  return !!root && isObject(root.archive) && root.archive.hidden === true;
}

/** True for an answer its reader stopped (`usage.truncated.reason = "stopped"`, as wo-engine marks it). */
function isStopped(m) {
  return isObject(m.usage) && isObject(m.usage.truncated) && m.usage.truncated.reason === 'stopped';
}

export {
  branchTo, buildTree, currentRoot, isArchived, isStopped, latestId, leafBelow,
};
