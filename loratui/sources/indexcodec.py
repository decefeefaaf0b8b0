"""The replay index as data: msgpack (msgspec) instead of pickle, so loading one can run no code.

A pickle names callables to call on load; an allow-list of them was still enough to reach `os.system`
(issue 25 item 4). This codec writes only values: scalars, bytes, maps, arrays (Python tuples), and a few
extension types: a list (by reference, so the lists many checkpoints share a prefix of are written once),
a deque, a set, an `array.array`, a msgspec Struct (an event) and an object of one of loratui's data
classes (its fields). Decoding makes such an object with `object.__new__` and sets its fields: no
`__init__`, `__setstate__` or `__reduce__` is ever called, and only classes of the index's own modules
(`ALLOWED_MODULES`, public names) can be named at all. The advisor's recipe is left out and given back.
"""

from __future__ import annotations

import array
import dataclasses
import importlib
from collections import deque
from typing import Any

import msgspec

VERSION = 1
ALLOWED_MODULES = ("loratui.events", "loratui.logic.", "loratui.sources.logindex")
"""Where a class named in an index may come from (a prefix ending in '.' takes its submodules)."""

_LIST, _DEQUE, _SET, _FROZENSET, _ARRAY, _STRUCT, _OBJECT, _RECIPE, _FLAT = range(1, 10)
_SCALARS = (str, int, float, bool, type(None), bytes)
_FLAT_SCALARS = (str, int, float, bool, type(None))
_FLAT_KINDS = frozenset((*_FLAT_SCALARS, tuple))
_FLAT_TYPE = list[tuple[Any, ...] | str | int | float | bool | None]
"""A sequence of scalars and tuples of scalars (a curve, a window): encoded and decoded in C at once."""
_flat_decoder = msgspec.msgpack.Decoder(_FLAT_TYPE)


class _Flat(list):  # type: ignore[type-arg]
    """Items decoded whole (their tuples are tuples already): used as they are, never converted again."""


class IndexCodecError(ValueError):
    """An index that is not one (damaged, another version, naming a class it may not)."""


def encode(value: Any, recipe: Any = None) -> bytes:
    """`value` as msgpack; TypeError for a value of a kind an index never holds."""
    return _Encoder(recipe).run(value)


def decode(data: bytes | memoryview, recipe: Any = None) -> Any:
    """The value `encode` wrote (`recipe` where it left the recipe out); IndexCodecError for anything else."""
    try:
        return _Decoder(recipe).run(data)
    except IndexCodecError:
        raise
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, RecursionError, OverflowError, MemoryError) as exc:
        raise IndexCodecError(f"not an index: {type(exc).__name__}") from None


def _class_key(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _allowed_class(key: str) -> type:
    """The class `key` names, if an index may name it; IndexCodecError otherwise (nothing is imported
    outside `ALLOWED_MODULES`, and no private or dotted-into-a-function name is followed)."""
    module, _, qualname = key.partition(":")
    if not any(module == m or (m.endswith(".") and module.startswith(m)) for m in ALLOWED_MODULES):
        raise IndexCodecError(f"{module} may not appear in an index")
    parts = qualname.split(".")
    if any(not part.isidentifier() or part.startswith("_") for part in parts + module.split(".")):
        raise IndexCodecError(f"{key} may not appear in an index")
    try:
        found: Any = importlib.import_module(module)
    except ImportError:
        raise IndexCodecError(f"{module} is no module of this loratui") from None
    for part in parts:
        found = getattr(found, part, None)
    if not isinstance(found, type) or found.__module__ != module:
        raise IndexCodecError(f"{key} is not a class of {module}")
    return found


class _Encoder:
    def __init__(self, recipe: Any) -> None:
        self.recipe = recipe
        self.list_ids: dict[int, int] = {}
        self.lists: list[list[Any]] = []  # kept alive: their ids must stay theirs while encoding

    def run(self, value: Any) -> bytes:
        root = self.plain(value)
        entries: list[Any] = []
        while len(entries) < len(self.lists):  # an entry may reference lists not met before it
            entries.append(self.entry(self.lists[len(entries)]))
        return msgspec.msgpack.encode([VERSION, entries, root])

    def entry(self, items: Any) -> Any:
        """A sequence's items: one flat extension when they allow it, else each encoded on its own."""
        kinds = set(map(type, items))
        if kinds <= _FLAT_KINDS and (tuple not in kinds or {type(v) for x in items if type(x) is tuple
                                                            for v in x} <= _FLAT_KINDS - {tuple}):
            return msgspec.msgpack.Ext(_FLAT, msgspec.msgpack.encode(list(items)))
        return [self.plain(x) for x in items]

    def ext(self, code: int, value: Any) -> msgspec.msgpack.Ext:
        return msgspec.msgpack.Ext(code, msgspec.msgpack.encode(value))

    def plain(self, value: Any) -> Any:
        kind = type(value)
        if kind in _SCALARS:
            return value
        if value is self.recipe:
            return msgspec.msgpack.Ext(_RECIPE, b"")
        if kind is tuple:
            return [self.plain(x) for x in value]
        if kind is list:
            ref = self.list_ids.get(id(value))
            if ref is None:
                ref = self.list_ids[id(value)] = len(self.lists)
                self.lists.append(value)
            return self.ext(_LIST, ref)
        if kind is dict:
            return {self.key(k): self.plain(v) for k, v in value.items()}
        return self.container(value)

    def key(self, key: Any) -> Any:
        if type(key) not in _SCALARS:
            raise TypeError(f"a map key of type {type(key).__name__} in an index")
        return key

    def container(self, value: Any) -> Any:
        kind = type(value)
        if kind is deque:
            return self.ext(_DEQUE, [value.maxlen, self.entry(value)])
        if kind in (set, frozenset):
            return self.ext(_SET if kind is set else _FROZENSET, self.entry(value))
        if kind is array.array:
            return self.ext(_ARRAY, [value.typecode, value.tobytes()])
        if isinstance(value, msgspec.Struct):
            _allowed_class(_class_key(kind))
            return self.ext(_STRUCT, [_class_key(kind), msgspec.msgpack.encode(value)])
        if hasattr(value, "__dict__") and not isinstance(value, type):
            _allowed_class(_class_key(kind))  # what could not be read back is never written
            return self.ext(_OBJECT, [_class_key(kind), {k: self.plain(v) for k, v in vars(value).items()}])
        raise TypeError(f"a {kind.__name__} in an index")


class _Decoder:
    def __init__(self, recipe: Any) -> None:
        self.recipe = recipe
        self.lists: dict[int, list[Any]] = {}
        self.list_ids: set[int] = set()

    def run(self, data: bytes | memoryview) -> Any:
        top = self.decode(data)
        if type(top) is not list or len(top) != 3 or top[0] != VERSION or type(top[1]) is not list:
            raise IndexCodecError("not an index of this version")
        _, entries, root = top
        for ref, items in enumerate(entries):
            self.ref(ref).extend(self.items(items))
        if len(self.lists) > len(entries):
            raise IndexCodecError("a reference to a list the index does not hold")
        return self.fix(root)

    def decode(self, data: bytes | memoryview) -> Any:
        return msgspec.msgpack.decode(data, ext_hook=self.ext)

    def ref(self, number: Any) -> list[Any]:
        if type(number) is not int or number < 0:
            raise IndexCodecError("a bad list reference")
        found = self.lists.get(number)
        if found is None:
            found = self.lists[number] = []
            self.list_ids.add(id(found))
        return found

    def items(self, items: Any) -> Any:
        """What `_Encoder.entry` wrote, as an iterable of the items themselves."""
        if type(items) is _Flat:
            return items
        if type(items) is not list:
            raise IndexCodecError("a damaged sequence")
        return (self.fix(x) for x in items)

    def fix(self, value: Any) -> Any:
        """msgpack arrays back to tuples (a list came by reference, and is already itself)."""
        kind = type(value)
        if kind is list and id(value) not in self.list_ids:
            return tuple(x if type(x) in _SCALARS else self.fix(x) for x in value)
        if kind is dict:
            return {k: self.fix(v) for k, v in value.items()}
        return value

    def ext(self, code: int, data: memoryview) -> Any:
        if code == _RECIPE:
            return self.recipe
        if code == _FLAT:
            return _Flat(_flat_decoder.decode(data))
        value = self.decode(data)
        if code == _LIST:
            return self.ref(value)
        if code == _DEQUE:
            maxlen, items = value
            return deque(self.items(items), maxlen=maxlen)
        if code in (_SET, _FROZENSET):
            return (set if code == _SET else frozenset)(self.items(value))
        if code == _ARRAY:
            typecode, raw = value
            found = array.array(typecode)
            found.frombytes(raw)
            return found
        if code == _STRUCT:
            key, raw = value
            cls = _allowed_class(key)
            if not issubclass(cls, msgspec.Struct):
                raise IndexCodecError(f"{key} is no event")
            return msgspec.msgpack.decode(raw, type=cls)
        if code == _OBJECT:
            return self.object(*value)
        raise IndexCodecError(f"an unknown extension type {code}")

    def object(self, key: str, fields: dict[str, Any]) -> Any:
        cls = _allowed_class(key)
        if issubclass(cls, msgspec.Struct) or type(fields) is not dict:
            raise IndexCodecError(f"{key}: not a data object")
        obj = object.__new__(cls)
        for name, value in fields.items():
            if type(name) is not str or name.startswith("__"):
                raise IndexCodecError(f"{key}: a bad field name")
            object.__setattr__(obj, name, self.fix(value))  # frozen dataclasses too, as pickle did
        if dataclasses.is_dataclass(cls) and not all(hasattr(obj, f.name) for f in dataclasses.fields(cls)):
            raise IndexCodecError(f"{key}: a field is missing")
        return obj
