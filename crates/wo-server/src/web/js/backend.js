// Which backend answers: local mode's (backend-local.js) or stateless
// mode's (backend-stateless.js). Both have the same methods (load, chatPath,
// chatBody, afterDone, keepStopped, addTruth, editTruth, search, export, …).
import { notify } from './dom.js';
import { app } from './state.js';
import { local } from './backend-local.js';
import { readPendingTurn, stateless } from './backend-stateless.js';

const backend = () => (app.mode === 'local' ? local : stateless);

/**
 * On load in stateless mode: a turn the page was streaming when it closed
 * is kept now, marked incomplete. Returns its answer's id, or null.
 */
async function keepInterruptedTurn() {
  const turn = app.mode === 'stateless' ? readPendingTurn() : null;
  if (!turn) return null;
  try {
    const id = await stateless.keepStopped(turn);
    if (!id) return null;
    notify('The answer that was streaming when this page closed is kept, marked incomplete.');
    return id;
  } catch (e) {
    notify(`The turn that was streaming when this page closed could not be kept yet (${e.message}); it stays in this browser and is tried again on the next load.`, 'error');
    return null;
  }
}

export {
  backend, keepInterruptedTurn,
};
