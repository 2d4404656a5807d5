"""Look at the documentation site in a real browser: screenshots and layout facts at two widths.

Builds the site (``mkdocs build --strict``) unless ``--site`` names a built one, injects a small
measuring script into a copy of each page, and opens it in headless Chromium at each width (1400
and 1920 px by default). For every page and width it writes ``<out>/<page>-<width>.png`` and
checks what a reader would notice:

- the page does not scroll sideways, and no table hides columns behind its own scrollbar;
- on the data-table pages (`ROW_LIMITS`: the leaderboard), no table row is taller than its limit
  (a long unbreakable cell, such as a file path, makes rows tall);
- every SVG text label lies inside its SVG (chart labels are not cut);
- no Sphinx role (``:mod:``, ``:class:``, ...) shows as raw text, and no page dumps source code
  ("Source code in ..." blocks of the API reference).

Usage (Debian: ``apt-get install -y chromium``)::

    python scripts/check_docs_pages.py --out /tmp/pages            # exit 1 when a check fails
    python scripts/check_docs_pages.py --pages index.md leaderboard-results.md --widths 1400

Then look at the PNGs. ``tests/project/test_docs.py::test_pages_in_a_browser`` runs it when
Chromium is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PAGES = [
    "index.md",
    "integrations.md",
    "trainer.md",
    "results.md",
    "leaderboard-results.md",
    "reference/mas_envs.md",
    "reference/mas_trainer.md",
]
ROW_LIMITS = {"leaderboard-results.md": 60}
"""Pages of one-line data rows, and the tallest row (px) they may have; prose tables may wrap."""
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
]

# Runs in the page after load; writes its findings as JSON into <pre id="layout-facts">.
MEASURE = """
<script>
window.addEventListener("load", () => {
  const W = window.innerWidth, facts = {width: W, problems: []};
  const bad = (msg) => facts.problems.push(msg);
  const doc = document.documentElement;
  if (doc.scrollWidth > W + 1) bad(`page scrolls sideways: ${doc.scrollWidth}px wide at ${W}px`);
  document.querySelectorAll(".md-typeset__table, .md-typeset__scrollwrap").forEach((el, i) => {
    if (el.scrollWidth > el.clientWidth + 1)
      bad(`table ${i} hides columns: ${el.scrollWidth}px of content in ${el.clientWidth}px`);
  });
  let tallest = 0;
  document.querySelectorAll("article tr").forEach((tr) => {
    tallest = Math.max(tallest, tr.getBoundingClientRect().height);
  });
  facts.tallest_row = Math.round(tallest);
  document.querySelectorAll("article svg").forEach((svg, i) => {
    const box = svg.getBoundingClientRect();
    svg.querySelectorAll("text").forEach((t) => {
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1)
        bad(`svg ${i}: label '${t.textContent}' is cut (${Math.round(r.left - box.left)}..` +
            `${Math.round(r.right - box.left)} of ${Math.round(box.width)}px)`);
    });
  });
  const text = document.querySelector("article")?.innerText || "";
  const role = text.match(/:(mod|class|func|meth|data|attr|exc|obj):`?\\w/);
  if (role) bad(`raw Sphinx role in the text: '${role[0]}...'`);
  if (/Source code in /.test(text)) bad("the page dumps source code ('Source code in ...')");
  const pre = document.createElement("pre");
  pre.id = "layout-facts";
  pre.textContent = JSON.stringify(facts);
  document.body.appendChild(pre);
});
</script>
"""


def build_site(out: Path) -> Path:
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, text=True)
    return out


def page_html(site: Path, page: str) -> Path:
    """The built HTML of docs page ``page`` (``reference/x.md`` -> ``reference/x/index.html``)."""
    stem = page.removesuffix(".md")
    return site / "index.html" if stem == "index" else site / stem / "index.html"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("no Chromium found; install it (Debian: apt-get install -y chromium)")


def check_page(
    browser: str, html: Path, width: int, png: Path, profile: Path, max_row_px: int | None
) -> dict:
    """Screenshot ``html`` at ``width`` and return its layout facts (with ``problems``)."""
    probe = html.with_name(f".probe-{width}.html")
    source = html.read_text()
    probe.write_text(source.replace("</body>", MEASURE + "</body>", 1))
    base = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    url = probe.as_uri()
    try:
        shot = subprocess.run(
            [*base, f"--window-size={width},1600", f"--screenshot={png}", url],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if not png.exists():
            raise RuntimeError(f"no screenshot of {html}: {shot.stderr[-2000:]}")
        dom = subprocess.run(
            [*base, f"--window-size={width},1600", "--dump-dom", url],
            capture_output=True, text=True, timeout=120,
        ).stdout  # fmt: skip
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(r'<pre id="layout-facts">(.*?)</pre>', dom, re.S)
    if not found:
        raise RuntimeError(f"the measuring script did not run on {html}")
    facts = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    if max_row_px is not None and facts["tallest_row"] > max_row_px:
        facts["problems"].append(
            f"a table row is {facts['tallest_row']}px tall (limit {max_row_px}px)"
        )
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a built site (default: build one)")
    parser.add_argument("--out", type=Path, default=Path("docs-screenshots"))
    parser.add_argument("--pages", nargs="+", default=DEFAULT_PAGES)
    parser.add_argument("--widths", nargs="+", type=int, default=[1400, 1920])
    args = parser.parse_args(argv)
    browser = chromium()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site or build_site(Path(tmp) / "site")
        failures = 0
        for page in args.pages:
            html = page_html(site, page)
            if not html.exists():
                raise SystemExit(f"{page}: no built page at {html}")
            for width in args.widths:
                png = args.out / f"{page.removesuffix('.md').replace('/', '-')}-{width}.png"
                profile = Path(tmp) / f"profile-{os.getpid()}-{width}"
                limit = ROW_LIMITS.get(page)
                facts = check_page(browser, html, width, png, profile, limit)
                status = "ok" if not facts["problems"] else "FAIL"
                failures += bool(facts["problems"])
                print(f"{status:4} {page} @{width}px: tallest row {facts['tallest_row']}px, {png}")
                for problem in facts["problems"]:
                    print(f"     - {problem}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
