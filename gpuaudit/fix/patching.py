"""Apply a patch to an object as read, as the API server (and `kubectl patch --local`) would,
so that the result can be validated before the patch is written. Only what gpuaudit's own
patches use: a merge patch of maps; a strategic merge patch, which is the same except that the
lists of a pod spec keyed by name (`containers`, `initContainers`) are merged entry by entry,
matched by `name` (the Kubernetes API's `patchMergeKey`); and a JSON patch's `test` and
`replace` operations."""

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
        out = merge(obj, patch, by_name=patch_type == "strategic")
    elif patch_type == "json":
        out = copy.deepcopy(dict(obj))
        for op in patch:
            _json_op(out, op)
    else:
        raise PatchError(f"unknown patch type {patch_type!r}")
    if not isinstance(out, dict):
        raise PatchError("the patched object is not a map")
    return out


BY_NAME = frozenset({"containers", "initContainers"})
"""The lists a strategic merge patch merges entry by entry, matched by `name`, among those
gpuaudit patches (a pod spec's; `patchMergeKey: name` in the Kubernetes API)."""


def merge(target: Any, patch: Any, by_name: bool = False) -> Any:
    """RFC 7386: `patch`'s maps merged into `target`'s, a null value removing its key; with
    `by_name` (a strategic merge patch), the lists of `BY_NAME` merged entry by entry."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif by_name and k in BY_NAME and isinstance(v, list):
            out[k] = _merge_named(out.get(k), v)
        else:
            out[k] = merge(out.get(k), v, by_name)
    return out


def _merge_named(target: Any, patch: list[Any]) -> list[Any]:
    """A list of maps keyed by `name`: each patch entry merged into the entry of its name, a
    new name appended, the others kept in their order (as the API server merges them)."""
    out = [copy.deepcopy(e) for e in target] if isinstance(target, list) else []
    at = {e.get("name"): i for i, e in enumerate(out) if isinstance(e, Mapping)}
    for entry in patch:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise PatchError("an entry of a list merged by name has no name")
        i = at.get(entry["name"])
        if i is None:
            at[entry["name"]] = len(out)
            out.append(merge({}, entry, True))
        else:
            out[i] = merge(out[i], entry, True)
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
