"""Apply a patch to an object as read, as the API server (and `kubectl patch --local`) would,
so that the result can be validated before the patch is written. Only what gpuaudit's own
patches use: a merge patch of maps (a strategic merge patch without lists is the same), and a
JSON patch's `test` and `replace` operations."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any


class PatchError(ValueError):
    """The patch does not apply to the object (a `test` that fails, a path that is not there)."""


def apply(obj: Mapping[str, Any], patch: Any, patch_type: str) -> dict[str, Any]:
    """`obj` with `patch` applied (`strategic`, `merge` or `json`); `obj` is left as it was."""
    if patch_type in ("strategic", "merge"):
        if not isinstance(patch, Mapping):
            raise PatchError("a merge patch is a map")
        out = merge(obj, patch)
    elif patch_type == "json":
        out = copy.deepcopy(dict(obj))
        for op in patch:
            _json_op(out, op)
    else:
        raise PatchError(f"unknown patch type {patch_type!r}")
    if not isinstance(out, dict):
        raise PatchError("the patched object is not a map")
    return out


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch`'s maps merged into `target`'s, a null value removing its key."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def _json_op(doc: dict[str, Any], op: Mapping[str, Any]) -> None:
    kind, path = op.get("op"), str(op.get("path", ""))
    parent, last = _locate(doc, path)
    here = _get(parent, last, path)
    if kind == "test":
        if here != op.get("value"):
            raise PatchError(f"test failed at {path}: {here!r} is not {op.get('value')!r}")
    elif kind == "replace":
        if isinstance(parent, list):
            parent[int(last)] = copy.deepcopy(op.get("value"))
        else:
            parent[last] = copy.deepcopy(op.get("value"))
    else:
        raise PatchError(f"unsupported JSON patch operation {kind!r}")


def _locate(doc: Any, path: str) -> tuple[Any, str]:
    """The container of the JSON pointer `path`'s last token, and that token."""
    if not path.startswith("/"):
        raise PatchError(f"not a JSON pointer: {path!r}")
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]
    here = doc
    for t in tokens[:-1]:
        here = _get(here, t, path)
    return here, tokens[-1]


def _get(container: Any, token: str, path: str) -> Any:
    if isinstance(container, Mapping) and token in container:
        return container[token]
    if isinstance(container, Sequence) and not isinstance(container, str) and token.isdigit():
        i = int(token)
        if i < len(container):
            return container[i]
    raise PatchError(f"no {path} in the object")
