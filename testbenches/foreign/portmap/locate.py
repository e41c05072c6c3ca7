"""Line numbers of the keys of a TOML text (``tomllib`` gives none), for one-line map errors.

:func:`key_lines` scans a text that ``tomllib`` has already parsed (so it is valid TOML) for
table headers, ``key =`` lines and the keys of inline tables, and maps every dotted key path
to the line where it is written. :func:`line_of` finds a path's line, or its nearest written
ancestor's (a missing key is reported at its table's header).
"""

from __future__ import annotations

__all__ = ["key_lines", "line_of"]

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

Path = tuple[str, ...]


class _Scanner:
    """A cursor over the text that knows its line and skips TOML's strings and comments."""

    def __init__(self, text: str):
        self.text, self.i, self.line = text, 0, 1
        self.lines: dict[Path, int] = {}

    def peek(self, n: int = 1) -> str:
        return self.text[self.i:self.i + n]

    def advance(self, n: int = 1) -> None:
        self.line += self.text.count("\n", self.i, self.i + n)
        self.i += n

    def skip_blank(self, newlines: bool) -> None:
        """Skip spaces (and newlines and comments when ``newlines``)."""
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif c == "#":
                end = self.text.find("\n", self.i)
                self.advance((len(self.text) if end < 0 else end) - self.i)
            else:
                return

    def string(self) -> str:
        """Skip the string at the cursor; its raw contents (escapes left as written)."""
        for quote in ('"""', "'''"):
            if self.peek(3) == quote:
                end = self.text.find(quote, self.i + 3)
                while self.text.startswith(quote[0], end + 3):   # """a"""" ends one later
                    end += 1
                body = self.text[self.i + 3:end]
                self.advance(end + 3 - self.i)
                return body
        quote = self.text[self.i]
        j = self.i + 1
        while self.text[j] != quote:
            j += 2 if quote == '"' and self.text[j] == "\\" else 1
        body = self.text[self.i + 1:j]
        self.advance(j + 1 - self.i)
        return body

    def key(self) -> Path:
        """A (dotted) key at the cursor."""
        parts = []
        while True:
            self.skip_blank(False)
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                j = self.i
                while j < len(self.text) and self.text[j] in _BARE:
                    j += 1
                parts.append(self.text[self.i:j])
                self.advance(j - self.i)
            self.skip_blank(False)
            if self.peek() != ".":
                return tuple(parts)
            self.advance()

    def value(self, path: Path) -> None:
        """Skip the value at the cursor, recording the keys of inline tables in it."""
        self.skip_blank(False)
        c = self.peek()
        if c == "{":
            self.advance()
            self.skip_blank(True)
            while self.peek() != "}":
                self.key_value(path)
                self.skip_blank(True)
                if self.peek() == ",":
                    self.advance()
                    self.skip_blank(True)
            self.advance()
        elif c == "[":
            self.advance()
            self.skip_blank(True)
            index = 0
            while self.peek() != "]":
                self.value(path + (str(index),))
                index += 1
                self.skip_blank(True)
                if self.peek() == ",":
                    self.advance()
                    self.skip_blank(True)
            self.advance()
        elif c in ('"', "'"):
            self.string()
        else:
            while self.i < len(self.text) and self.text[self.i] not in ",]}\n#":
                self.advance()

    def key_value(self, table: Path) -> None:
        line = self.line
        path = table + self.key()
        self.lines.setdefault(path, line)
        self.skip_blank(False)
        self.advance()                                            # "="
        self.value(path)

    def header(self) -> Path:
        double = self.peek(2) == "[["
        self.advance(2 if double else 1)
        line = self.line
        path = self.key()
        self.advance(2 if double else 1)
        self.lines.setdefault(path, line)
        return path


def key_lines(text: str) -> dict[Path, int]:
    """The line (1-based) of every key path written in ``text`` (valid TOML): table headers,
    ``key = value`` lines and the keys of inline tables (arrays' items get their index as a
    path part). A path written twice keeps its first line."""
    s = _Scanner(text)
    table: Path = ()
    while True:
        s.skip_blank(True)
        if s.i >= len(s.text):
            return s.lines
        if s.peek() == "[":
            table = s.header()
        else:
            s.key_value(table)


def line_of(lines: dict[Path, int], path: Path) -> int:
    """The line of ``path``, else of its nearest ancestor written in the text, else of the
    first key below it, else 1."""
    for n in range(len(path), 0, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    below = [line for p, line in lines.items() if p[:len(path)] == path]
    return min(below, default=1)
