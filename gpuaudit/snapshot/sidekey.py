"""The key that seals this user's side-files (`sidefile`): 32 random bytes in a file that only
this user can read, `$XDG_CACHE_HOME/gpuaudit/side-file.key` (`~/.cache/gpuaudit/side-file.key`
when the variable is not set to an absolute path), made the first time a side-file is written.

Why a key: a side-file is derived data, and a digest of its content proves nothing, since
whoever can change the side-file can compute that digest again. Only a digest keyed with a
secret they do not hold (a MAC) ties the side-file to the run that made it from its snapshot.
The key is as safe as this user's files: it is refused (and side-files read as text) when it
is not a plain file owned by this user, or when other users may read or write it. Deleting it
costs speed, never figures: every side-file written before reads as unproven, and the next
`gpuaudit snapshot index` makes a new key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

KEY_BYTES = 32
"""The length of the key, in bytes (the largest key BLAKE2b takes is 64)."""
NAME = "side-file.key"


class Unavailable(Exception):
    """There is no key to use: why, as a phrase that names the file."""


class Missing(Unavailable):
    """No key has been made yet."""


def path() -> Path:
    """Where the key lies (`Unavailable` when this user has no home folder)."""
    cache = os.environ.get("XDG_CACHE_HOME", "")
    if cache and os.path.isabs(cache):
        return Path(cache) / "gpuaudit" / NAME
    try:
        return Path.home() / ".cache" / "gpuaudit" / NAME
    except (RuntimeError, KeyError):
        raise Unavailable("this user has no home folder to keep it in") from None


def load() -> bytes:
    """The key; `Missing` when none was made yet, `Unavailable` when the file is not safe to
    trust (not a plain file, a link, another user's, readable or writable by others)."""
    where = path()
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(where, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise Missing(f"{where} does not exist") from None
    except OSError as exc:
        raise Unavailable(f"{where} cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unavailable(f"{where} is not a plain file")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise Unavailable(f"{where} belongs to another user")
        if os.name == "posix" and st.st_mode & 0o077:
            raise Unavailable(f"other users may read or write {where} (it must be mode 0600)")
        data = os.read(fd, KEY_BYTES + 1)
    except OSError as exc:
        raise Unavailable(f"{where} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise Unavailable(f"{where} is not a key ({len(data)} bytes, not {KEY_BYTES})")
    return data


def ensure() -> bytes:
    """The key, made first when there is none (`Unavailable` when it cannot be)."""
    try:
        return load()
    except Missing:
        pass
    where = path()
    try:
        where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Written whole under a name of its own (mkstemp: created exclusively, mode 0600, never
        # through a link), then linked into place: a run that reads the key meanwhile never
        # sees part of one, and of two runs that make one at once, the first link wins.
        fd, tmp = tempfile.mkstemp(dir=where.parent, prefix="." + NAME + ".")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
            with contextlib.suppress(FileExistsError):
                try:
                    os.link(tmp, where, follow_symlinks=False)
                except FileExistsError:
                    raise
                except OSError:  # a file system without links: created exclusively instead
                    _create(where, Path(tmp).read_bytes())
        finally:
            os.unlink(tmp)
    except OSError as exc:
        raise Unavailable(f"{where} cannot be made ({exc.strerror or exc})") from None
    return load()


def _create(where: Path, key: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(where, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
