"""Plain values (what the channel's codec carries) to typed records and back, strictly.

A record is a dataclass; its fields' declared types are the contract. :func:`record` checks a
decoded value against them exactly (every field present, nothing extra, each of its type,
recursively: records inside records, lists, tuples, dicts with string keys, tensors) and raises
:class:`Malformed` otherwise, so the code past it can rely on the types mypy sees.
``device_agent.protocol`` uses it for every message of the agent <-> worker channel.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

import torch

from device_agent.codec import CodecError
from operators.spec import PointerArray


class Malformed(CodecError):
    """A value that is not the record it should be: a field missing, extra or mistyped."""



def plain(value: Any) -> Any:
    """Plain values for the codec: records as their fields, sets as sorted tuples. A pointer
    array is an argument the codec itself carries (its buffer, offsets and rebuilt addresses),
    never a record: flattened, it reached Batched candidates as a dict."""
    if isinstance(value, PointerArray):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, frozenset | set):
        return tuple(sorted(value, key=str))
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def record(cls: type[Any], data: Any, where: str) -> Any:
    """An instance of the dataclass ``cls`` from ``data``: exactly its fields, each of its
    type. ``where`` names the value in the error."""
    if not isinstance(data, dict):
        raise Malformed(f"{where}: expected an object, got {type(data).__name__}")
    hints = field_types(cls)
    unknown = set(data) - set(hints)
    if unknown:
        raise Malformed(f"{where}: unknown field(s) {sorted(map(str, unknown))[:5]}")
    missing = [name for name in hints if name not in data]  # the harness sends every field
    if missing:
        raise Malformed(f"{where}: missing field {missing[0]!r}")
    return cls(**{name: _typed(data[name], hint, f"{where}.{name}")
                  for name, hint in hints.items()})


_FIELD_TYPES: dict[type[Any], dict[str, Any]] = {}


def field_types(cls: type[Any]) -> dict[str, Any]:
    """The resolved field types of the dataclass ``cls`` (computed once per class)."""
    hints = _FIELD_TYPES.get(cls)
    if hints is None:
        resolved = typing.get_type_hints(cls)
        hints = _FIELD_TYPES[cls] = {f.name: resolved[f.name] for f in dataclasses.fields(cls)}
    return hints


def _typed(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the type ``hint`` says (tuples and sets from lists, floats from ints), or
    :class:`Malformed`. ``Any`` is left to its consumer."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _typed(value, option, where)
            except Malformed as exc:
                errors.append(str(exc))
        raise Malformed(errors[0] if len(errors) == 1
                        else f"{where}: {type(value).__name__} is none of {hint}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return record(hint, value, where)
    if origin in (list, tuple, frozenset, dict):
        return _container(value, origin, args, where)
    if not _is(value, hint):
        raise Malformed(f"{where}: expected {getattr(hint, '__name__', hint)}, "
                        f"got {type(value).__name__}")
    return float(value) if hint is float else value


def _is(value: Any, hint: Any) -> bool:
    if hint is type(None):
        return value is None
    if hint is float:  # JSON writes 2.0 as 2
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool, torch.Tensor):
        return isinstance(value, hint)
    raise TypeError(f"the protocol has no rule for {hint!r}")  # a field type added here


def _container(value: Any, origin: Any, args: tuple[Any, ...], where: str) -> Any:
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise Malformed(f"{where}: expected an object with string keys")
        return {k: _typed(v, args[1], f"{where}[{k[:40]!r}]") for k, v in value.items()}
    if not isinstance(value, list | tuple):
        raise Malformed(f"{where}: expected a list, got {type(value).__name__}")
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):  # a fixed-size tuple
        if len(value) != len(args):
            raise Malformed(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_typed(v, a, f"{where}[{i}]")
                     for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if args[0] is Any:
        return origin(value)
    return origin(_typed(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))

