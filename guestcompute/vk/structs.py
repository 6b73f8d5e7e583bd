"""The one struct helper: build Vulkan structs as raw cffi objects.

Every Vulkan struct in guestcompute is made by :func:`new` (or :func:`array`),
so nobody writes ``sType=VK_STRUCTURE_TYPE_...`` by hand and nothing goes
through the ``vulkan`` package's per-call Python wrappers.

Lifetime rule: cffi frees an ``ffi.new`` object when its Python owner dies,
even if a C pointer inside another struct still points at it. :func:`new`
therefore keeps every child it converted itself (lists, bytes, nested
dicts) alive for as long as the returned struct lives. Children you pass in
as ready cdata are *your* job to keep alive (hold them in a local variable
or in the cache entry that owns the struct).
"""
from __future__ import annotations

import inspect
import weakref
from functools import lru_cache

import vulkan as _vk
from vulkan import ffi

_children: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@lru_cache(maxsize=None)
def structure_type(ctype: str):
    """sType of a struct, taken from the ``vulkan`` package's own constructor
    default, so the mapping from struct name to enum is never written by us."""
    ctor = getattr(_vk, ctype, None)
    if ctor is None:
        return None
    try:
        param = inspect.signature(ctor).parameters.get("sType")
    except (TypeError, ValueError):
        return None
    return None if param is None else param.default


@lru_cache(maxsize=None)
def _field_types(ctype: str) -> dict:
    return {name: f.type for name, f in ffi.typeof(ctype).fields}


def _convert(value, ftype, keep: list):
    """Turn Python lists/bytes/dicts into cdata for a pointer field."""
    if ftype.kind != "pointer" or value is None:
        return value
    if isinstance(value, (bytes, bytearray)):
        buf = ffi.new("char[]", bytes(value))
        keep.append(buf)
        return ffi.cast(ftype, buf)
    if isinstance(value, str):
        buf = ffi.new("char[]", value.encode())
        keep.append(buf)
        return buf
    if isinstance(value, (list, tuple)):
        item = ftype.item
        if item.kind == "pointer" and item.item.cname == "char":
            strs = [ffi.new("char[]", s.encode() if isinstance(s, str) else s) for s in value]
            arr = ffi.new("char*[]", strs)
            keep.extend(strs)
            keep.append(arr)
            return arr
        arr = array(item.cname, value)
        keep.append(arr)
        return arr
    if isinstance(value, dict):
        child = new(ftype.item.cname, **value)
        keep.append(child)
        return child
    return value


def new(ctype: str, **fields):
    """``new("VkBufferCreateInfo", size=64, usage=...)`` → ``VkBufferCreateInfo *``.

    ``sType`` is filled in automatically. Pointer fields accept cdata, lists
    (of cdata structs, plain values, or dicts), bytes, str and dicts.
    ``pNext`` accepts a cdata struct pointer.
    """
    types = _field_types(ctype)
    keep: list = []
    init = {}
    stype = structure_type(ctype)
    if stype is not None and "sType" in types:
        init["sType"] = stype
    for name, value in fields.items():
        if name not in types:
            raise AttributeError(f"{ctype} has no field {name!r}")
        if name == "pNext" and value is not None and value != ffi.NULL:
            keep.append(value)
            init[name] = ffi.cast("void *", value)
            continue
        init[name] = _convert(value, types[name], keep)
    obj = ffi.new(ctype + " *", init)
    if keep:
        _children[obj] = keep
    return obj


def array(ctype: str, items):
    """A C array of ``ctype`` from cdata structs, dicts or plain values."""
    items = list(items)
    arr = ffi.new(f"{ctype}[]", max(len(items), 1))
    keep = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            item = new(ctype, **item)
        if isinstance(item, ffi.CData) and ffi.typeof(item).kind == "pointer" and \
                ffi.typeof(item).item.cname == ffi.typeof(ctype).cname:
            keep.append(item)
            arr[i] = item[0]
        else:
            arr[i] = item
    if keep:
        _children[arr] = keep
    return arr


def chain(*structs):
    """Link struct pointers through pNext in the given order; returns the first.
    Keeps each later struct alive through the one before it."""
    structs = [s for s in structs if s is not None]
    for a, b in zip(structs, structs[1:]):
        a.pNext = ffi.cast("void *", b)
        _children.setdefault(a, []).append(b)
    return structs[0] if structs else ffi.NULL


def keep_alive(owner, *children) -> None:
    """Keep ``children`` (cdata of any cffi, e.g. structs a pNext chain
    points to by address) alive as long as ``owner`` lives."""
    _children.setdefault(owner, []).extend(children)
