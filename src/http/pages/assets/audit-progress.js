// Progressive enhancement of an audit's page: while the audit runs, its progress is fetched from
// the API (the session cookie is accepted for GET) every two seconds; when it finishes, the page
// is loaded again to show the outcome. Without JavaScript the page is complete as it is.
(() => {
  const box = document.querySelector('[data-audit-progress]');
  if (box === null) return;
  const url = box.getAttribute('data-audit-progress');
  const field = (name) => box.querySelector(`[data-field="${name}"]`);
  const tick = async () => {
    let audit;
    try {
      const res = await fetch(url, { headers: { accept: 'application/json' }, credentials: 'same-origin' });
      if (!res.ok) return;
      audit = await res.json();
    } catch {
      return;
    }
    const done = audit.successes.length + audit.failures.length;
    const bar = box.querySelector('progress');
    if (bar !== null) {
      bar.max = Math.max(audit.packages, 1);
      bar.value = done;
    }
    for (const [name, value] of [
      ['done', done],
      ['successes', audit.successes.length],
      ['failures', audit.failures.length],
    ]) {
      const el = field(name);
      if (el !== null) el.textContent = String(value);
    }
    if (audit.finished_at !== null) window.location.reload();
    else setTimeout(tick, 2000);
  };
  setTimeout(tick, 2000);
})();
