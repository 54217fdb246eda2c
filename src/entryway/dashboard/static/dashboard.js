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

// Live figures: an element with data-live="<server-sent events URL>" holds elements with
// data-field="<name>"; each event's JSON fields replace their text.
for (const panel of document.querySelectorAll("[data-live]")) {
  const source = new EventSource(panel.dataset.live);
  source.addEventListener("usage", (event) => {
    const data = JSON.parse(event.data);
    for (const field of panel.querySelectorAll("[data-field]")) {
      const value = data[field.dataset.field];
      if (value === undefined || value === null) continue;
      field.textContent = typeof value === "number" ? value.toLocaleString("en-US") : String(value);
    }
    panel.dataset.updated = String(Date.now());
  });
}
