// What every page shares: the alert line and navigation.

// notify shows a message in the alert line (empty hides it).
export function notify(msg) {
  const notice = document.getElementById('notice');
  notice.textContent = msg || '';
  notice.hidden = !msg;
}

// inform shows a message that is not an error (empty hides it).
export function inform(msg) {
  const info = document.getElementById('info');
  info.textContent = msg || '';
  info.hidden = !msg;
}

// showError puts an error in the alert line; a 401 also points at the key.
export function showError(err) {
  if (err?.name === 'AbortError') return;
  if (err?.status === 401) {
    notify(`${err.message} Enter an API key above.`);
    document.getElementById('api-key').focus();
    return;
  }
  notify(err?.message || String(err));
}

// go navigates to a console path ("/runs/run_1?response=resp_2"); replace
// does not add a history entry. The same path again reloads the page.
export function go(path, { replace = false } = {}) {
  const hash = '#' + path;
  if (location.hash === hash || replace) {
    if (replace) history.replaceState(null, '', hash);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
    return;
  }
  location.hash = hash;
}

// href is the link to a console path.
export const href = (path) => '#' + path;
