"""The boards as readers see them: the entries of a leaderboard folder, rendered as Markdown
tables (``LEADERBOARD.md``, the docs copy) and a static HTML page with an SVG plot per board.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mas_trainer.eval.leaderboard.trust import ValidationError, file_sha256, load_verified
from mas_trainer.eval.suite import (
    BOARDS,
    load_result,
)

__all__ = ["Entry", "check_rendered", "load_entries", "percent", "render"]

# ---------------------------------------------------------------------------------- entries


class Entry:
    """One row of a board: a result file with one env result."""

    def __init__(self, path: Path, root: Path, result: Mapping[str, Any], verified: bool) -> None:
        self.path = path
        self.rel = path.resolve().relative_to(root.resolve()).as_posix()
        self.result = result
        self.env = result["results"][0]
        self.verified = verified

    @property
    def agg(self) -> Mapping[str, Any]:
        return self.env["aggregate"]

    def sort_key(self) -> tuple[float, float, str]:
        return (-self.agg["success"], -self.agg["ci95"][0], self.result["name"])


def load_entries(root: Path) -> dict[str, list[Entry]]:
    """Every entry under ``root/results``, by board id, best first.

    Raises:
        ValidationError: A file in a board folder holds another env, or more than one env.
    """
    verified = load_verified(root)
    boards: dict[str, list[Entry]] = {b: [] for b in BOARDS}
    for key, board in BOARDS.items():
        folder = root / "results" / board.slug
        for path in sorted([*folder.glob("*.json"), *folder.glob("*.json.gz")]):
            result = load_result(path)
            held = [r.get("board", r.get("env_id")) for r in result.get("results", [])]
            envs = [r.get("env_id") for r in result.get("results", [])]
            if held != [key] or envs != [board.env_id]:
                raise ValidationError(
                    str(path),
                    [
                        f"a file in results/{board.slug}/ must hold "
                        f"exactly one result, for board {key} ({board.env_id}); it "
                        f"holds {held}"
                    ],
                )
            rel = path.resolve().relative_to(root.resolve()).as_posix()
            ok = rel in verified and verified[rel]["sha256"] == file_sha256(path)
            boards[key].append(Entry(path, root, result, ok))
        boards[key].sort(key=Entry.sort_key)
    return boards


def _heading(key: str) -> str:
    board = BOARDS[key]
    return f"{key} ({board.env_id})" if board.name else key


def _metric(key: str) -> str:
    board = BOARDS[key]
    if board.data:
        return (
            f"success rate on every problem of the prepared {board.data} test set "
            f"(`mas-data prepare {board.data}`, docs/data.md)"
        )
    return f"success rate on the first {board.episodes} test task ids"


# ---------------------------------------------------------------------------------- render


def percent(x: float) -> str:
    return f"{100 * x:.1f}"


def _md_text(text: str) -> str:
    """Untrusted text (an entry name) made safe inside a Markdown table cell."""
    return html.escape(text).replace("|", "\\|").replace("\n", " ")


def _markdown(boards: Mapping[str, list[Entry]], link_prefix: str | None) -> str:
    """Tables of the boards; files are links under ``link_prefix``, or plain paths when None."""
    lines = []
    for key, entries in boards.items():
        lines += [
            f"## {_heading(key)}",
            "",
            f"Primary metric: {_metric(key)} "
            f"(greedy decoding). {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}.",
            "",
        ]
        if not entries:
            lines += ["No entries yet.", ""]
            continue
        # The docs copy names the board's folder once instead of a long path in every row (a
        # path column made rows 100-300 px tall and pushed columns behind a scrollbar).
        files = link_prefix is not None
        if not files:
            folder = Path(entries[0].rel).parent.as_posix()
            lines += [f"Result files: `leaderboards/{folder}/`, one per entry.", ""]
        lines += [
            "| # | entry | policy | mode | success % | 95% CI | n | mean turns | verified |"
            + (" file |" if files else ""),
            "|---|---|---|---|---|---|---|---|---|" + ("---|" if files else ""),
        ]
        for rank, e in enumerate(entries, 1):
            a = e.agg
            mark = "yes" if e.verified else ""
            lines.append(
                f"| {rank} | {_md_text(e.result['name'])} | {e.result['policy']['kind']} "
                f"| {e.env['mode']} "
                f"| **{percent(a['success'])}** | {percent(a['ci95'][0])}-{percent(a['ci95'][1])} "
                f"| {a['episodes']} | {a['turns_mean']:.2f} | {mark} |"
                + (f" [{e.path.name}]({link_prefix}{e.rel}) |" if files else "")
            )
        lines.append("")
    return "\n".join(lines)


SVG_LABEL_CHARS = 48
"""Longest entry name drawn in full in a board's SVG; longer names end in an ellipsis."""


def _label(name: str) -> str:
    return name if len(name) <= SVG_LABEL_CHARS else name[: SVG_LABEL_CHARS - 1] + "\u2026"


def _svg(env_id: str, entries: Sequence[Entry]) -> str:
    """Horizontal bars of success with 95% CI whiskers (deterministic text, no plotting library)."""
    # Labels are never cut: the label column is as wide as the longest (capped) name needs, at
    # ~6.5 px per character of 11 px sans-serif; a capped name ends in an ellipsis and the full
    # name is the label's tooltip.
    names = [_label(e.result["name"]) for e in entries]
    row, width = 22, 360
    left = 12 + round(6.5 * max((len(n) for n in names), default=8))
    height = 30 + row * max(len(entries), 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" height="{height}" '
        f'role="img" aria-label="{html.escape(env_id)} success rates">',
        f'<text x="{left}" y="14" font-size="11" font-family="sans-serif">success % '
        "(bars), 95% Wilson interval (whiskers)</text>",
    ]
    for x in range(0, 101, 25):
        px = left + width * x / 100
        parts.append(f'<line x1="{px:.1f}" y1="20" x2="{px:.1f}" y2="{height - 4}" stroke="#ddd"/>')
    for i, e in enumerate(entries):
        y = 24 + row * i
        a = e.agg
        w = width * a["success"]
        lo, hi = (left + width * c for c in a["ci95"])
        color = "#4c78a8" if e.result["policy"]["kind"] not in ("random", "oracle") else "#bbb"
        label, full = html.escape(names[i]), html.escape(e.result["name"])
        parts += [
            f'<text x="{left - 6}" y="{y + 13}" font-size="11" font-family="sans-serif" '
            f'text-anchor="end"><title>{full}</title>{label}</text>',
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 8}" fill="{color}"/>',
            f'<line x1="{lo:.1f}" y1="{y + row / 2:.1f}" x2="{hi:.1f}" y2="{y + row / 2:.1f}" '
            'stroke="#222"/>',
            f'<text x="{left + width + 6}" y="{y + 13}" font-size="11" '
            f'font-family="sans-serif">{percent(a["success"])}</text>',
        ]
    parts.append("</svg>")
    return "\n".join(parts)


def _html(boards: Mapping[str, list[Entry]]) -> str:
    body = []
    for key, entries in boards.items():
        body.append(f"<h2>{html.escape(_heading(key))}</h2>")
        metric = html.escape(_metric(key).replace("`", ""))
        body.append(f"<p>{metric[0].upper()}{metric[1:]}, greedy.</p>")
        if not entries:
            body.append("<p>No entries yet.</p>")
            continue
        body.append(_svg(key, entries))
        body.append(
            "<table><tr><th>#</th><th>entry</th><th>policy</th><th>mode</th>"
            "<th>success %</th><th>95% CI</th><th>n</th><th>mean turns</th>"
            "<th>verified</th><th>file</th></tr>"
        )
        for rank, e in enumerate(entries, 1):
            a = e.agg
            body.append(
                f"<tr><td>{rank}</td><td>{html.escape(e.result['name'])}</td>"
                f"<td>{e.result['policy']['kind']}</td><td>{e.env['mode']}</td>"
                f"<td><b>{percent(a['success'])}</b></td>"
                f"<td>{percent(a['ci95'][0])}-{percent(a['ci95'][1])}</td><td>{a['episodes']}</td>"
                f"<td>{a['turns_mean']:.2f}</td><td>{'yes' if e.verified else ''}</td>"
                f'<td><a href="{html.escape(e.rel)}">{html.escape(e.path.name)}</a></td></tr>'
            )
        body.append("</table>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>mas-rl leaderboards</title><style>body{font-family:sans-serif;max-width:60em;"
        "margin:auto;padding:1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:2px 6px}</style></head><body>\n<h1>mas-rl leaderboards</h1>\n"
        "<p>Generated by <code>mas-leaderboard render</code> from <code>results/</code>; do not "
        "edit. Grey bars: the random (floor) and oracle (ceiling) reference policies.</p>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


HEADER = (
    "<!-- Generated by `mas-leaderboard render` from leaderboards/results; do not edit. -->\n"
    "\n# Leaderboard results\n\n"
)


def render(root: Path) -> dict[Path, str]:
    """The generated files (path -> text) of the leaderboard folder ``root``.

    ``LEADERBOARD.md`` and ``index.html`` in ``root``, and ``docs/leaderboard-results.md`` beside
    it (the docs site's copy, with the SVG plots inline).
    """
    boards = load_entries(root)
    docs_md = [
        HEADER.rstrip("\n"),
        "",
        "How boards are defined and how to submit: [Leaderboards](leaderboards.md).",
        "",
    ]
    for env_id, entries in boards.items():
        docs_md.append(_markdown({env_id: entries}, None))
        if entries:
            docs_md += [_svg(env_id, entries), ""]
    return {
        root / "LEADERBOARD.md": HEADER + "Boards are defined in [README.md](README.md). "
        "Plots: [index.html](index.html).\n\n" + _markdown(boards, "") + "\n",
        root / "index.html": _html(boards),
        root.parent / "docs" / "leaderboard-results.md": "\n".join(docs_md) + "\n",
    }


def check_rendered(root: Path) -> list[Path]:
    """Generated files that are missing or differ from what ``render`` would write now."""
    return [p for p, text in render(root).items() if not p.is_file() or p.read_text() != text]
