"""A MkDocs hook: the site's maths rendered at build time, as MathML, so that a site built and
opened offline (a cluster node, a laptop on a train) shows formulas, not TeX.

``pymdownx.arithmatex`` (generic mode) leaves each formula as ``<span class="arithmatex">\\(
... \\)</span>`` (inline) or ``<div class="arithmatex">\\[ ... \\]</div>`` (display); this hook
replaces each with the MathML that ``latex2mathml`` writes for it, which every current browser
renders natively (no script, no font download). A formula it cannot convert, or converts to
MathML that is not well-formed XML, fails the build naming the page and the formula.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

from latex2mathml.converter import convert

FORMULA = re.compile(r'<(?P<tag>span|div) class="arithmatex">(?P<tex>.*?)</(?P=tag)>', re.S)
DELIMITERS = {"span": (r"\(", r"\)"), "div": (r"\[", r"\]")}


def mathml(tex: str, display: bool) -> str:
    """``tex`` (without delimiters) as a ``<math>`` element; ``ValueError`` if it is not one."""
    try:
        out = convert(tex, display="block" if display else "inline")
        ET.fromstring(out)
    except Exception as error:  # latex2mathml raises its own types
        raise ValueError(f"cannot render {tex.strip()[:120]!r} as MathML ({error})") from None
    return out


def render(text: str, where: str = "the page") -> str:
    """``text`` (a page's HTML) with every arithmatex formula replaced by its MathML."""

    def replace(match: re.Match) -> str:
        tag = match["tag"]
        tex = html.unescape(match["tex"]).strip()
        start, end = DELIMITERS[tag]
        if not (tex.startswith(start) and tex.endswith(end)):
            raise ValueError(f"{where}: a formula without its {start} {end}: {tex[:80]!r}")
        try:
            out = mathml(tex[len(start) : -len(end)], display=tag == "div")
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        return f'<div class="math-display">{out}</div>' if tag == "div" else out

    return FORMULA.sub(replace, text)


def _plain_toc(items) -> None:
    """A heading's formula in the table of contents as its plain text (``Never inverting
    \\(K\\)`` -> ``Never inverting K``): the theme writes those titles as text."""
    for item in items:
        item.title = re.sub(r"\\\((.*?)\\\)", r"\1", item.title)
        _plain_toc(item.children)


def on_page_content(html_text: str, page, **kwargs) -> str:
    _plain_toc(page.toc)
    return render(html_text, page.file.src_path)
