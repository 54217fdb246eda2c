"""Whether a dashboard page fits the width it is shown at.

What counts as overflow: the document scrolling sideways, or any visible element reaching past
the viewport's right edge or sticking out of its own box (text that does not wrap, a table
wider than its card). What is fair: a table inside `.table-wrap` (a box made to scroll
sideways) may be wider than the screen, and so may anything inside a box that scrolls on
purpose (`overflow-x: auto` or `scroll`); so may text cut with an ellipsis. Elements
clipped by `overflow: hidden` are overflow like any other: the person cannot reach them."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

_OVERFLOWS = """() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  const describe = (el) => {
    let name = el.tagName.toLowerCase();
    if (el.id) name += '#' + el.id;
    if (typeof el.className === 'string' && el.className.trim())
      name += '.' + el.className.trim().split(/\\s+/).join('.');
    const text = (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 60);
    return text ? `${name} "${text}"` : name;
  };
  const scrollsOnPurpose = (el) => {
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const x = getComputedStyle(up).overflowX;
      if (x === 'auto' || x === 'scroll') return true;
    }
    return false;
  };
  if (document.documentElement.scrollWidth > width + 1)
    found.push(`the document is ${document.documentElement.scrollWidth}px wide in ${width}px`);
  for (const el of document.body.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    if (el.closest('.visually-hidden, .skip, [hidden], svg *')) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (scrollsOnPurpose(el)) continue;
    if (box.right > width + 1) {
      found.push(`${describe(el)} reaches ${Math.round(box.right)}px in ${width}px`);
      continue;
    }
    const x = style.overflowX;
    if (style.textOverflow === 'ellipsis') continue;  // cut on purpose, whole in a tooltip
    if (el.matches('input, textarea, select')) continue;  // fields scroll their own text
    const block = style.display !== 'inline' && el.clientWidth > 0;
    if (block && x !== 'auto' && x !== 'scroll' && el.scrollWidth > el.clientWidth + 1)
      found.push(`${describe(el)} holds ${el.scrollWidth}px in ${el.clientWidth}px`);
  }
  return found;
}"""


async def overflows(page: Page) -> list[str]:
    """Each thing on the page as it is now that does not fit sideways, described."""
    found: list[Any] = await page.evaluate(_OVERFLOWS)
    return [str(item) for item in found]


async def assert_fits(page: Page) -> None:
    """Fails, naming the culprits, when the page does not fit its viewport's width."""
    found = await overflows(page)
    assert not found, f"{page.url} at {page.viewport_size}: " + "; ".join(found[:8])
