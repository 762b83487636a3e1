"""A griffe extension for the API pages: a Google-style entry that documents several parameters
at once (``tol, rtol: converged when ...``) becomes one entry per name, each with the whole
description, so that mkdocstrings renders a row per parameter instead of reading the second
name as the first one's type.

The source keeps the shared entry, which reads better there; only the rendered page splits it.
Sections: Args (and its spellings) and Attributes. Loaded from ``mkdocs.yml``
(``extensions: [docs/_hooks/split_names.py:SplitNames]``).
"""

from __future__ import annotations

import re

import griffe

__all__ = ["SplitNames", "split_entries"]

SECTIONS = {"args", "arguments", "parameters", "params", "attributes", "keyword args",
            "keyword arguments", "other parameters"}  # fmt: skip
#: ``a, b (type): description``: two or more names, an optional type, the description.
ENTRY = re.compile(
    r"^(?P<indent>\s+)(?P<names>\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)+)"
    r"(?P<type>\s*\([^)]*\))?\s*:(?P<rest>(?:\s.*)?)$"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def split_entries(text: str) -> str:
    """``text`` (a docstring) with each several-name entry of its parameter and attribute
    sections written once per name, continuation lines included."""
    lines = text.split("\n")
    out: list[str] = []
    k, section, entry_indent = 0, None, None
    while k < len(lines):
        line = lines[k]
        stripped = line.strip()
        if stripped.endswith(":") and stripped[:-1].lower() in SECTIONS:
            section, entry_indent = _indent(line), None
            out.append(line)
            k += 1
            continue
        if section is not None and stripped and _indent(line) <= section:
            section = None  # the section ended
        if section is not None and stripped and entry_indent is None:
            entry_indent = _indent(line)
        match = ENTRY.match(line) if section is not None else None
        if match and _indent(line) == entry_indent:
            body = [line]
            k += 1
            while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > entry_indent):
                body.append(lines[k])
                k += 1
            while body[-1].strip() == "":  # a blank line after the entry stays after it
                body.pop()
                k -= 1
            for name in re.split(r"\s*,\s*", match["names"]):
                first = f"{match['indent']}{name}{match['type'] or ''}:{match['rest']}"
                out.extend([first, *body[1:]])
            continue
        out.append(line)
        k += 1
    return "\n".join(out)


class SplitNames(griffe.Extension):
    """Rewrite every loaded object's docstring with ``split_entries``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = split_entries(obj.docstring.value)
