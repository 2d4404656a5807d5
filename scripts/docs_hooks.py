"""MkDocs hooks (mkdocs.yml ``hooks:``): docstrings written with Sphinx roles render as code.

The package docstrings use reST roles (``:mod:`mas_envs```, ``:class:`TextEnv```), which
mkdocstrings' Google-style rendering leaves as raw text before the code span
(``:mod:<code>mas_envs</code>``). The role prefix carries nothing for a reader, so it is dropped.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|data|attr|exc|obj|const|term):(?=<code>)")


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub("", html)
