// Entryway dashboard: the little the pages need beyond HTML. Every page works without it.
"use strict";

// Copy buttons: <button class="copy" data-copy="element-id">.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = "Copied";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: press Ctrl+C";
  }
});

// Parts of the page drawn from the same figures (data-follows-live, with an id): when the
// credits used change, they are fetched afresh and swapped in, so they never lag the tiles.
async function refreshFollowers() {
  const answer = await fetch(window.location.href, { credentials: "same-origin" });
  if (!answer.ok) return;
  const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
  for (const part of document.querySelectorAll("[data-follows-live][id]")) {
    const next = fresh.getElementById(part.id);
    if (next) part.replaceWith(document.importNode(next, true));
  }
  document.body.dataset.refreshed = String(Date.now());
}

// Live figures: an element with data-live="<server-sent events URL>" holds elements with
// data-field="<name>"; each event's JSON fields replace their text.
for (const panel of document.querySelectorAll("[data-live]")) {
  const source = new EventSource(panel.dataset.live);
  let used = panel.dataset.used;
  source.addEventListener("usage", (event) => {
    const data = JSON.parse(event.data);
    if (used !== undefined && String(data.used_this_cycle) !== used) {
      used = String(data.used_this_cycle);
      refreshFollowers();
    }
    for (const field of panel.querySelectorAll("[data-field]")) {
      const value = data[field.dataset.field];
      if (value === undefined || value === null) continue;
      field.textContent = typeof value === "number" ? value.toLocaleString("en-US") : String(value);
    }
    panel.dataset.updated = String(Date.now());
  });
}
