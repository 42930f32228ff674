"""Layout checks for a page open in a real browser (the dashboard's pages, the static report):
the classes of defects a person sees, checked on every element rather than on known instances.

- `too_wide`: an element that reaches past the viewport's right edge, or whose content is cut
  or scrolled sideways inside it (a table in its scroll box, a diff line in a `pre`);
- `overlaps`: two blocks (tables, charts, code, plans, headings, ...) that are not nested and
  cover each other, like a chart laid over a table's last column;
- `stretched_rows`: table rows taller than their content (a table stretched to the height
  of a chart beside it);
- `legends_over_data`: a chart legend that covers a plotted series;
- `raw_markdown`: visible text (outside code) with markdown marks left in it (`**bold**`,
  `` `code` ``), i.e. markdown that was shown instead of rendered.
Each returns human-readable findings; an empty list is a clean page.
"""

from __future__ import annotations

from typing import Any

BLOCKS = (
    "table",
    "svg.chart",
    "pre",
    ".plan",
    "h1",
    "h2",
    "h3",
    "h4",
    "img",
    "ol.lineage > li",
    ".facts",
    ".cards > div",
    "details",
    "p",
    "#kernel .facts",
)

# an element a person cannot see: not displayed, hidden, or inside a closed <details> (its summary aside)
_UNSEEN = """(e) => {
  const st = getComputedStyle(e);
  if (st.display === 'none' || st.visibility === 'hidden' || e.closest('[hidden]')) return true;
  const d = e.closest('details:not([open])');
  return !!d && !e.closest('summary');
}"""

_TOO_WIDE = (
    """() => {
  const unseen = """
    + _UNSEEN
    + """;
  const vw = document.documentElement.clientWidth;
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  const out = [];
  if (document.documentElement.scrollWidth > vw + 1)
    out.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px on a ${vw} px viewport`);
  for (const e of document.querySelectorAll('body *')) {
    if (unseen(e)) continue;
    const st = getComputedStyle(e);
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    // inside a box that clips or scrolls: that box is what is checked (below)
    let clipped = false;
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox !== 'visible') { clipped = true; break; }
    }
    if (!clipped && r.right > vw + 1) out.push(`${name(e)} reaches ${Math.round(r.right)} px (viewport ${vw} px)`);
    if (['auto', 'scroll', 'hidden', 'clip'].includes(st.overflowX) && e.scrollWidth > e.clientWidth + 1 &&
        !['svg', 'html'].includes(e.tagName.toLowerCase()))
      out.push(`${name(e)} cuts or scrolls its content sideways: ${e.scrollWidth} px in ${e.clientWidth} px`);
  }
  return out;
}"""
)

_OVERLAPS = (
    """([root, selectors]) => {
  const unseen = """
    + _UNSEEN
    + """;
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') :
     (e.className && e.className.baseVal ? '.' + e.className.baseVal.split(/\\s+/).join('.') : ''));
  const seen = new Set();
  const blocks = [];
  const scope = document.querySelector(root);
  for (const sel of selectors) for (const e of scope ? scope.querySelectorAll(sel) : []) {
    if (seen.has(e)) continue;
    seen.add(e);
    if (unseen(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    blocks.push([e, r]);
  }
  const out = [];
  for (let i = 0; i < blocks.length; i++) for (let j = i + 1; j < blocks.length; j++) {
    const [a, ra] = blocks[i], [b, rb] = blocks[j];
    if (a.contains(b) || b.contains(a)) continue;
    const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
    const hgt = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
    if (w > 2 && hgt > 2) out.push(`${name(a)} and ${name(b)} overlap by ${Math.round(w)} x ${Math.round(hgt)} px`);
    if (out.length > 20) return out;
  }
  return out;
}"""
)

_STRETCHED = (
    """() => {
  const unseen = """
    + _UNSEEN
    + """;
  const out = [];
  for (const tr of document.querySelectorAll('tr')) {
    const r = tr.getBoundingClientRect();
    if (!r.height || unseen(tr)) continue;
    let need = 0;
    for (const td of tr.children) {
      const st = getComputedStyle(td);
      const range = document.createRange();
      range.selectNodeContents(td);
      const content = td.childNodes.length ? range.getBoundingClientRect().height : 0;
      need = Math.max(need, content + parseFloat(st.paddingTop) + parseFloat(st.paddingBottom) +
                      parseFloat(st.borderTopWidth) + parseFloat(st.borderBottomWidth));
    }
    if (r.height > need + 6)
      out.push(`a row of table.${tr.closest('table').className} is ${Math.round(r.height)} px tall for ` +
               `${Math.round(need)} px of content: ${tr.textContent.trim().slice(0, 40)}`);
    if (out.length > 10) break;
  }
  return out;
}"""
)

_LEGENDS = """() => {
  const out = [];
  for (const box of document.querySelectorAll('svg.chart rect.legend-box')) {
    const lb = box.getBoundingClientRect();
    const svg = box.ownerSVGElement;
    for (const m of svg.querySelectorAll('g.series circle, g.series polyline, g.series rect')) {
      const r = m.getBoundingClientRect();
      if (Math.min(lb.right, r.right) - Math.max(lb.left, r.left) > 0 &&
          Math.min(lb.bottom, r.bottom) - Math.max(lb.top, r.top) > 0) {
        out.push(`the legend of chart ${svg.dataset.chart} covers its data`);
        break;
      }
    }
  }
  return out;
}"""

_RAW_MARKDOWN = (
    """() => {
  const unseen = """
    + _UNSEEN
    + r""";
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const marks = /\*\*[^*\s][^*]*\*\*|__[^_\s][^_]*__|`[^`\s][^`]*`/;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest('pre, code, script, style, svg, textarea') || unseen(p)) continue;
    const m = n.textContent.match(marks);
    if (m) out.push(`raw markdown in <${p.tagName.toLowerCase()} class="${p.className}">: ${m[0].slice(0, 60)}`);
    if (out.length > 10) break;
  }
  return out;
}"""
)


def too_wide(page: Any) -> list[str]:
    return page.evaluate(_TOO_WIDE)


def overlaps(page: Any, root: str = "body", selectors: tuple[str, ...] = BLOCKS) -> list[str]:
    """Blocks within `root` (a selector: an open drawer covers the page by design, so it is
    checked on its own) that cover each other."""
    return page.evaluate(_OVERLAPS, [root, list(selectors)])


def stretched_rows(page: Any) -> list[str]:
    return page.evaluate(_STRETCHED)


def legends_over_data(page: Any) -> list[str]:
    return page.evaluate(_LEGENDS)


def raw_markdown(page: Any) -> list[str]:
    return page.evaluate(_RAW_MARKDOWN)


def layout_problems(page: Any, root: str = "body") -> list[str]:
    """Every finding of the checks above on the page as it is now (`root`: see `overlaps`)."""
    return (
        too_wide(page)
        + overlaps(page, root)
        + stretched_rows(page)
        + legends_over_data(page)
        + raw_markdown(page)
    )
