"""RFC 6570 level 1 URI templates: ``test://template/{id}/data`` (L2).

Level 1 is simple string expansion: ``{var}`` expands to the percent-encoded value, and matches one or more
characters other than ``/``, ``?`` and ``#``. Matching decodes the percent-encoding back.
"""

from __future__ import annotations

import re

__all__ = ("UriTemplate", "is_template")

_VAR = re.compile(r"\{([A-Za-z0-9_]+)\}")


def is_template(uri: str) -> bool:
    return _VAR.search(uri) is not None


class UriTemplate:
    """A compiled level-1 template: :meth:`match` a URI to its variables, :meth:`expand` variables to a URI."""

    __slots__ = ("_regex", "template", "variables")

    def __init__(self, template: str) -> None:
        if "{" in _VAR.sub("", template) or "}" in _VAR.sub("", template):
            raise ValueError(f"unsupported URI template (only level 1, {{name}}): {template!r}")
        self.template = template
        self.variables: tuple[str, ...] = tuple(_VAR.findall(template))
        if len(set(self.variables)) != len(self.variables):
            raise ValueError(f"a variable appears twice in {template!r}")
        pattern = ""
        pos = 0
        for m in _VAR.finditer(template):
            pattern += re.escape(template[pos : m.start()]) + f"(?P<{m.group(1)}>[^/?#]+)"
            pos = m.end()
        pattern += re.escape(template[pos:])
        self._regex = re.compile(pattern)

    def match(self, uri: str) -> dict[str, str] | None:
        m = self._regex.fullmatch(uri)
        if m is None:
            return None
        from urllib.parse import unquote  # imported on first use: a server without templates never loads it

        return {k: unquote(v) for k, v in m.groupdict().items()}

    def expand(self, **values: str) -> str:
        from urllib.parse import quote

        return _VAR.sub(lambda m: quote(str(values[m.group(1)]), safe=""), self.template)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"
