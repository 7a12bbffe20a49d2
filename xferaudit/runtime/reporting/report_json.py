"""Saved reports as JSON, streamed both ways: written a row a line, read a row at a time.

Why: a report of 1,000,000 sites is some 300 MB of JSON. ``json.dumps(...,
indent=2)`` runs Python's own encoder (the C one serves no indent) and
``json.loads`` holds the whole document as dicts, several GB. Both ends here
work on one item at a time, so time and memory grow with one row, not with
the file: the writer encodes each row with the C encoder and puts it on a line
of its own; the reader decodes a chunk of text at a time with
``json.JSONDecoder.raw_decode`` and hands the big arrays (``rows``,
``launches``, ``unwrapped``, ``ranks``) over an element at a time, in file
order. The reader takes any layout JSON allows, so files written before (one
key a line, indented) read the same.

What is written is described as *fields*: ``(key, value)`` pairs, where a value
is plain JSON data, an :class:`Items` (an array given element by element) or a
:class:`Fields` (an object given pair by pair). :func:`chunks` encodes them;
:func:`plain` turns them into the dicts and lists ``json.loads`` would give
back, so a report's ``to_dict()`` and its file cannot differ.
"""

from __future__ import annotations

import json
import re
from itertools import islice
from typing import IO, Any, Callable, Iterable, Iterator, Optional

from ..._validate import DECODER, MAX_DEPTH, DuplicateKey, check_depth

try:  # the C encoder, made once (json.dumps makes one a call)
    from json.encoder import c_make_encoder as _c_make_encoder
    from json.encoder import encode_basestring_ascii as _escape
except ImportError:  # pragma: no cover - a Python without the C accelerator
    _c_make_encoder = None

if _c_make_encoder is not None:
    _ENCODER = _c_make_encoder(None, None, _escape, None, ": ", ", ", False, False, True)

    def encode(value: Any) -> str:
        """``json.dumps(value)``: one line, ASCII (a lone surrogate stays an escape)."""
        return "".join(_ENCODER(value, 0))
else:  # pragma: no cover
    encode = json.JSONEncoder(separators=(", ", ": ")).encode
    _escape = json.encoder.py_encode_basestring_ascii

#: A string as JSON (quoted, escaped, ASCII).
escape = _escape

Error = Callable[[str], Exception]

#: Rows are joined into pieces of about this many lines before they are written.
_BATCH = 4096


class Items:
    """An array written element by element, one a line. ``encoded``: the
    elements are JSON text already (rows kept on disk, see merging.py);
    ``objects``: they are :class:`Fields` (each rank of a merged report)."""

    __slots__ = ("items", "encoded", "objects")

    def __init__(self, items: Iterable, encoded: bool = False, objects: bool = False) -> None:
        self.items = items
        self.encoded = encoded
        self.objects = objects


class Fields:
    """An object written pair by pair (a rank's report inside a merged one)."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: Iterable[tuple[str, Any]]) -> None:
        self.pairs = pairs


class Pairs:
    """An object of a streamed array, read pair by pair as it is iterated
    (what :class:`Reader` hands over for each element under a `nested` key)."""

    __slots__ = ("it",)

    def __init__(self, it: Iterator[tuple[str, Any]]) -> None:
        self.it = it

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return self.it


def chunks(pairs: Iterable[tuple[str, Any]]) -> Iterator[str]:
    """The JSON text of an object given as fields: each key on a line of its
    own, each element of an :class:`Items` on a line of its own."""
    yield "{"
    sep = ""
    for key, value in pairs:
        yield sep + encode(key) + ": "
        sep = ",\n"
        if isinstance(value, Items):
            yield from _array_chunks(value)
        elif isinstance(value, Fields):
            yield from chunks(value.pairs)
        else:
            yield encode(value)
    yield "}"


def _array_chunks(value: Items) -> Iterator[str]:
    items = iter(value.items)
    sep = "\n"
    yield "["
    if value.objects:
        for x in items:
            yield sep
            sep = ",\n"
            yield from chunks(x.pairs)
    else:
        # Each element encoded as it comes: only text is held, never a batch of dicts.
        enc = (lambda x: x) if value.encoded else encode
        while True:
            piece = ",\n".join(map(enc, islice(items, _BATCH)))
            if not piece:  # (no element encodes to "")
                break
            yield sep + piece
            sep = ",\n"
    yield "]" if sep == "\n" else "\n]"


def plain(pairs: Iterable[tuple[str, Any]]) -> dict:
    """The object the fields describe, as ``json.loads`` would read it back."""
    out = {}
    for key, value in pairs:
        out[key] = _plain_value(value)
    return out


def _plain_value(value: Any) -> Any:
    if isinstance(value, Items):
        if value.encoded:
            return [json.loads(x) for x in value.items]
        return [_plain_value(x) for x in value.items]
    if isinstance(value, Fields):
        return plain(value.pairs)
    return value


# --- reading ---------------------------------------------------------------------------

_DECODER = DECODER  # (NaN refused, a key given twice in any object refused)
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER_GOES_ON = frozenset("0123456789.eE+-")
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]}:])[ \t\n\r]*")
_CHUNK = 1 << 20


class Reader:
    """One JSON document read from a text stream a chunk at a time.

    :meth:`pairs` yields the top-level object's ``(key, value)`` pairs in file
    order. For a key in `streamed` whose value is an array, the value is an
    iterator over its elements (read as it is consumed; what the caller leaves
    is skipped); an element that is an object under a key in `nested` is itself
    a pairs iterator. Every failure is `error` naming `where`, as
    :func:`xferaudit._validate.parse_json` words it.
    """

    def __init__(self, f: IO[str], where: str, error: Error, streamed: frozenset = frozenset(),
                 nested: frozenset = frozenset()) -> None:
        self.f = f
        self.where = where
        self.error = error
        self.streamed = streamed
        self.nested = nested
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.line0 = 1  # the line of buf[0]
        self.want = _CHUNK

    # -- the buffer ------------------------------------------------------------------
    def _more(self) -> bool:
        """Read another chunk (dropping what is consumed); False at the end."""
        if self.eof:
            return False
        if self.pos:
            self.line0 += self.buf.count("\n", 0, self.pos)
            self.buf = self.buf[self.pos:]
            self.pos = 0
        try:
            chunk = self.f.read(self.want)
        except UnicodeDecodeError as e:
            raise self.error(f"{self.where}: cannot read: {e}") from None
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _peek(self) -> str:
        """The next character after whitespace ("" at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _expect(self, chars: str) -> str:
        m = _SEPARATOR.match(self.buf, self.pos)  # the usual case: a separator, then more text
        if m is not None and m.group(1) in chars and m.end() < len(self.buf):
            self.pos = m.end()
            return m.group(1)
        c = self._peek()
        if c == "" or c not in chars:
            what = "end of file" if c == "" else repr(c)
            self._fail(f"expecting {' or '.join(repr(x) for x in chars)}, found {what}")
        self.pos += 1
        return c

    def _fail(self, msg: str, pos: Optional[int] = None) -> None:
        line = self.line0 + self.buf.count("\n", 0, self.pos if pos is None else pos)
        raise self.error(f"{self.where}: not JSON: {msg} at line {line}")

    def value(self, depth: int = 0) -> Any:
        """One whole value at the read position (`depth`: how deep it sits, for
        the nesting limit)."""
        self._peek()
        while True:
            try:
                v, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if self._grow():
                    continue
                self._fail(e.msg, e.pos)
            except RecursionError:
                raise self.error(f"{self.where}: not a usable file: JSON nested too deeply") from None
            except DuplicateKey as e:
                raise self.error(f"{self.where}: {e}") from None
            except ValueError as e:  # too many digits for an int, NaN, Infinity
                if self._grow():
                    continue
                raise self.error(f"{self.where}: bad value: {e}") from None
            if (type(v) in (int, float) and (end == len(self.buf) or self.buf[end] in _NUMBER_GOES_ON)
                    and self._grow()):
                continue  # a number cut by the end of the buffer ("-0" of "-0.5e-3")
            self.want = _CHUNK
            start, self.pos = self.pos, end
            # Each nesting level opens a bracket: few brackets, no need to walk the value.
            if depth + self.buf.count("{", start, end) + self.buf.count("[", start, end) > MAX_DEPTH:
                check_depth(v, self.where, self.error, MAX_DEPTH, depth)
            return v

    def _grow(self) -> bool:
        """More text for a value cut by the end of the buffer; reads twice as
        much each time in a row, so a large value costs linear time."""
        if self.eof:
            return False
        grew = self._more()
        self.want *= 2
        return grew

    # -- the structure ---------------------------------------------------------------
    def pairs(self) -> Iterator[tuple[str, Any]]:
        """The top-level object's pairs, then nothing but whitespace. A document
        that is no object yields no pair (its reader finds no report in it)."""
        if self._peek() == "{":
            yield from self._object(0)
        else:
            self.value(0)
        if self._peek() != "":
            self._fail("Extra data")

    def _open(self, depth: int, brackets: str) -> bool:
        """Past the opening bracket of a container at `depth`; False when it
        closes at once (``{}``, ``[]``)."""
        if depth >= MAX_DEPTH:
            raise self.error(f"{self.where}: not a usable file: nested too deeply (more than "
                             f"{MAX_DEPTH} levels)")
        self._expect(brackets[0])
        if self._peek() == brackets[1]:
            self.pos += 1
            return False
        return True

    def _object(self, depth: int) -> Iterator[tuple[str, Any]]:
        """An object's pairs; its values sit at `depth` + 1."""
        if not self._open(depth, "{}"):
            return
        seen: set = set()
        while True:
            if self._peek() != '"':
                self._fail("Expecting property name enclosed in double quotes")
            key = self.value(depth + 1)
            if key in seen:
                raise self.error(f"{self.where}: key {key!r} is there twice")
            seen.add(key)
            self._expect(":")
            if key in self.streamed and self._peek() == "[":
                items = self._array(depth + 1, key in self.nested)
                yield key, items
                for _ in items:  # what the caller left
                    pass
            else:
                yield key, self.value(depth + 1)
            if self._expect(",}") == "}":
                return

    def _array(self, depth: int, nested: bool) -> Iterator[Any]:
        """An array's elements (at `depth` + 1), objects as pairs when `nested`."""
        if not self._open(depth, "[]"):
            return
        while True:
            if nested and self._peek() == "{":
                inner = self._object(depth + 1)
                yield Pairs(inner)
                for _ in inner:
                    pass
            else:
                yield self.value(depth + 1)
            if self._expect(",]") == "]":
                return


def read_pairs(f: IO[str], where: str, error: Error, streamed: Iterable[str] = (),
               nested: Iterable[str] = ()) -> Iterator[tuple[str, Any]]:
    """:meth:`Reader.pairs` of the document in `f`."""
    return Reader(f, where, error, frozenset(streamed), frozenset(nested)).pairs()
