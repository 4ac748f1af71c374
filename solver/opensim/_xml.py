"""XML parsing that keeps line numbers, for error messages that name the line.

`parse(path)` returns the document element as an ElementTree element whose every element carries
`.line` (1-based line of its start tag). It accepts what OpenSim's own parser accepts beyond strict
XML in one case seen upstream: stray closing tags after the document element (gait2354_IK_Tasks.xml
ends with an unmatched ``</OpenSimDocument>``). Those are ignored with an OpenSimFileWarning that
names the file and line; anything else that is not well-formed raises OpenSimFileError.

Older models declare UTF-8 and hold Latin-1 bytes (an author's name, a degree sign in a comment);
OpenSim reads them. So does `parse`: in a file declared UTF-8 (or declaring nothing), each byte
that is not part of valid UTF-8 is read as the Latin-1 character it spells, with an
OpenSimFileWarning naming the first such line.
"""

from __future__ import annotations

import re
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.parsers import expat

import numpy as np

from .errors import OpenSimFileError, OpenSimFileWarning


class Element(ET.Element):
    """An ElementTree element that remembers the line of its start tag."""

    line: int | None = None


# What may follow the document element's end: white space, comments and stray closing tags. A comment
# is matched one way only ("<!--", characters that do not start "-->", "-->"), so a long run of
# comments followed by junk fails in linear time (".*?" there backtracked exponentially).
_STRAY_TAIL = re.compile(rb"(?:\s|<!--(?:[^-]|-(?!->))*-->|</[A-Za-z_][\w.:-]*\s*>)*", re.S)
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def parse(path, skip=()) -> Element:
    """Parse the XML file at `path`; see the module docstring. Elements whose tag is in `skip`
    are kept without their content (still checked to be well-formed XML, but not built: a model's
    ForceSet holds most of a .osim file and nothing the kinematics read)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise OpenSimFileError(path, None, f"cannot read file: {exc.strerror or exc}") from None
    return parse_bytes(data, path, skip)


_DECLARED_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


def _latin1_bytes_as_text(data: bytes, path) -> bytes:
    """`data` re-encoded as UTF-8 with bytes that are not valid UTF-8 read as Latin-1 (module
    docstring); `data` itself when it is valid UTF-8 or declares another encoding."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data
    declared = _DECLARED_ENCODING.match(data)
    if declared and declared.group(1).lower().replace(b"_", b"-") not in (b"utf-8", b"utf8"):
        return data
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError as exc:
        first = exc.start
    text = data.decode("utf-8", errors="surrogateescape")
    fixed = "".join(chr(ord(c) - 0xDC00) if "\udc80" <= c <= "\udcff" else c for c in text)
    line = len(_LINE_BREAK.findall(data, 0, first)) + 1
    warnings.warn(f"{path}, line {line}: bytes that are not UTF-8 (as the file declares) read as Latin-1",
                  OpenSimFileWarning, stacklevel=4)
    return fixed.encode("utf-8")


def parse_bytes(data: bytes, path=None, skip=()) -> Element:
    data = _latin1_bytes_as_text(data, path)
    parser = expat.ParserCreate()
    stack: list[Element] = []
    state = {"root": None, "root_end": None, "last": None, "depth": 0}
    skip = frozenset(skip)

    def start(tag, attrs):
        elem = Element(tag, attrs)
        elem.line = parser.CurrentLineNumber
        if stack:
            stack[-1].append(elem)
        elif state["root"] is None:
            state["root"] = elem
        stack.append(elem)
        state["last"] = None
        if skip and tag in skip:
            state["depth"] = 1
            parser.StartElementHandler, parser.EndElementHandler = start_inside, end_inside
            parser.CharacterDataHandler = None

    def start_inside(tag, attrs):
        state["depth"] += 1

    def end_inside(tag):
        state["depth"] -= 1
        if not state["depth"]:
            parser.StartElementHandler, parser.EndElementHandler = start, end
            parser.CharacterDataHandler = chars
            end(tag)

    def end(tag):
        elem = stack.pop()
        state["last"] = elem
        if not stack:
            state["root_end"] = parser.CurrentByteIndex

    def chars(text):
        if state["last"] is not None:          # text after a closed child: its tail
            last = state["last"]
            last.tail = (last.tail or "") + text
        elif stack:
            top = stack[-1]
            top.text = (top.text or "") + text

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        root, root_end = state["root"], state["root_end"]
        if root is not None and root_end is not None:
            # past the document element's own end tag (there is none after a self-closing <root/>)
            own = re.match(rb"</" + re.escape(root.tag.encode()) + rb"\s*>", data[root_end:])
            after = root_end + (own.end() if own else 0)
            tail = _STRAY_TAIL.fullmatch(data, after)
            if tail and tail.group().strip():
                stray = tail.group()
                stray_at = after + len(stray) - len(stray.lstrip())
                stray_line = len(_LINE_BREAK.findall(data, 0, stray_at)) + 1
                warnings.warn(f"{path}, line {stray_line}: ignored stray closing tag "
                              f"{stray.strip().decode(errors='replace')!r} after the document element",
                              OpenSimFileWarning, stacklevel=3)
                return root
        raise OpenSimFileError(path, exc.lineno, f"not well-formed XML: {expat.ErrorString(exc.code)}") from None
    except (LookupError, ValueError, UnicodeError) as exc:
        # pyexpat decodes an encoding it does not know itself with Python's codecs, and lets their
        # errors out: an unknown name, a multi-byte or non-text codec (encoding="utf-7", "base64")
        raise OpenSimFileError(path, 1, f"the XML declaration names an encoding that cannot be read: {exc}") from None
    if state["root"] is None:
        raise OpenSimFileError(path, None, "no XML element in the file")
    return state["root"]


def child(elem: Element, *tags: str) -> Element | None:
    """The first direct child whose tag is one of `tags` (OpenSim takes the first of duplicates)."""
    for c in elem:
        if c.tag in tags:
            return c
    return None


def text_of(elem: Element | None) -> str | None:
    """The stripped text of `elem`, or None when the element is missing or empty."""
    if elem is None or elem.text is None:
        return None
    s = elem.text.strip()
    return s or None


def child_text(elem: Element, *tags: str) -> str | None:
    return text_of(child(elem, *tags))


def quoted(text: str, limit: int = 60) -> str:
    """repr(text), cut to about `limit` characters (messages quote what the file says)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def floats(elem: Element, path, n: int | None = None, what: str | None = None, finite: bool = False) -> np.ndarray:
    """Whitespace-separated numbers in `elem` (OpenSim's Infinity/NaN spellings accepted, unless
    `finite`: then infinity and NaN are errors)."""
    what = what or elem.tag
    s = (elem.text or "").split()
    try:
        values = np.array(s, dtype=float)         # Python's float(): inf, Infinity, nan in any case
    except ValueError:
        raise OpenSimFileError(path, elem.line, f"<{what}> must hold numbers, got {quoted(elem.text.strip())}") from None
    if n is not None and values.size != n:
        raise OpenSimFileError(path, elem.line, f"<{what}> needs {n} numbers, got {values.size}")
    if finite and not np.all(np.isfinite(values)):
        raise OpenSimFileError(path, elem.line, f"<{what}> must hold finite numbers, got {quoted(elem.text.strip())}")
    return values


def child_floats(elem: Element, tag: str, path, n: int | None = None, default=None, finite: bool = False):
    c = child(elem, tag)
    if c is None or text_of(c) is None:
        return None if default is None else np.array(default, dtype=float)
    return floats(c, path, n, finite=finite)


def child_float(elem: Element, tag: str, path, default: float | None = None, finite: bool = False) -> float | None:
    c = child(elem, tag)
    if c is None or text_of(c) is None:
        return default
    return float(floats(c, path, 1, finite=finite)[0])


def child_bool(elem: Element, tag: str, path, default: bool) -> bool:
    c = child(elem, tag)
    s = text_of(c)
    if s is None:
        return default
    low = s.lower()
    if low in ("true", "yes", "1"):
        return True
    if low in ("false", "no", "0"):
        return False
    raise OpenSimFileError(path, c.line, f"<{tag}> must be true or false, got {quoted(s)}")
