"""Connect to the Kubernetes API: from a kubeconfig (`--kubeconfig`, else `$KUBECONFIG`, else
`~/.kube/config`) or, inside a pod with no kubeconfig, from the pod's service account.

`asked` says whether anything asks for the Kubernetes API at all; a live collection reads it
only then, and then a kubeconfig that cannot be used is an error, never a scan without it. Each
kubeconfig file is checked before the client reads it (there, empty, a file, UTF-8, YAML, a
mapping), and the message names who named it: "KUBECONFIG names /x, which is empty".

TLS is verified unless the kubeconfig itself says `insecure-skip-tls-verify: true`. Every failure
is one `SourceError` line that names the file or option to check and never quotes a credential.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuaudit.core.errors import SourceError
from gpuaudit.core.redact import url_for_display
from gpuaudit.sources.kubernetes.messages import clip

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod's service-account token and cluster CA are mounted."""

_TOKEN_REREAD_S = 60.0
MAX_KUBECONFIG_BYTES = 16 * 1024 * 1024
"""The largest kubeconfig file read (certificates inlined take a few kilobytes)."""
WITHOUT = "pass --no-kubernetes to audit without the Kubernetes API"
"""The way out every kubeconfig message offers."""


@dataclass
class Connection:
    """A configured client for one API server, and how to speak of it in messages."""

    api: Any
    """`kubernetes.client.ApiClient`."""
    cluster: str
    """The kubeconfig context, or `in-cluster`; never a credential."""
    server: str
    """The API server URL without user info, query, fragment or trailing slash."""
    hint: str
    """What to check when the cluster cannot be reached or refuses the credentials."""
    verify_tls: bool

    def secrets(self) -> list[str]:
        """Credential strings to blank out of any message, as a last guard."""
        conf = self.api.configuration
        found: list[str] = []
        for value in list(getattr(conf, "api_key", {}).values()) + [
            getattr(conf, "password", None),
        ]:
            if isinstance(value, str) and value:
                found.append(value)
                # "Bearer <token>": the token alone must go too.
                found.extend(part for part in value.split() if len(part) >= 8)
        return sorted(set(found), key=len, reverse=True)


def k8s_modules() -> tuple[Any, Any]:
    """The `kubernetes` client and config modules, imported on first use (they take about
    half a second to import, which `gpuaudit --help` should not pay)."""
    from kubernetes import client, config

    return client, config


def connect(kubeconfig: Path | None, context: str | None, origin: str | None = None) -> Connection:
    """A client for the cluster `kubeconfig` and `context` pick (`None`: `$KUBECONFIG`, else
    `~/.kube/config`, else the pod's service account when running in a cluster). `origin` is
    who named `kubeconfig`, as messages name it (`--kubeconfig` when not given)."""
    if kubeconfig is None and context is None and _in_cluster():
        return _connect_in_cluster()
    return _connect_kubeconfig(kubeconfig, context, origin or "--kubeconfig")


def asked(kubeconfig: Path | None, context: str | None) -> bool:
    """Whether anything asks for the Kubernetes API: `--kubeconfig` (by flag, variable or the
    config file), `--context`, a `KUBECONFIG` that names a file, something at `~/.kube/config`,
    or a pod's service account (`KUBERNETES_SERVICE_HOST` with a token mounted). When nothing
    does, a scan goes on without the API; when something does, the API must be read."""
    if kubeconfig is not None or context:
        return True
    if _env_paths() or os.path.lexists(_default_kubeconfig()):
        return True
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.lexists(
        SERVICE_ACCOUNT_DIR / "token"
    )


def _default_kubeconfig() -> Path:
    return Path.home() / ".kube" / "config"


def _env_paths() -> list[str]:
    """The files `KUBECONFIG` names, in order (empty entries left out, as `kubectl` does)."""
    env = os.environ.get("KUBECONFIG", "")
    return [os.path.expanduser(p) for p in env.split(os.pathsep) if p.strip()]


def _in_cluster() -> bool:
    """Like `kubectl`: the service account is used only when no kubeconfig is around."""
    if _env_paths() or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return False
    return not os.path.lexists(_default_kubeconfig())


def _connect_in_cluster() -> Connection:
    client, _ = k8s_modules()
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "").strip()
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443").strip() or "443"
    token_file = SERVICE_ACCOUNT_DIR / "token"
    ca_file = SERVICE_ACCOUNT_DIR / "ca.crt"
    hint = "check the pod's service account, or pass --kubeconfig"
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SourceError(
            f"KUBERNETES_SERVICE_HOST is set but the service-account token {token_file} "
            f"cannot be read ({exc.strerror or type(exc).__name__}); {hint}"
        ) from None
    if not token:
        raise SourceError(f"the service-account token {token_file} is empty; {hint}")
    if not ca_file.is_file():
        raise SourceError(f"the service-account CA {ca_file} does not exist; {hint}")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    conf = client.Configuration()
    conf.host = f"https://{host}:{port}"
    conf.ssl_ca_cert = str(ca_file)
    conf.api_key = {"BearerToken": token}
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    conf.retries = 2
    last_read = time.monotonic()

    def reread_token(c: Any) -> None:
        # Bound service-account tokens rotate (hourly by default); pick up the new one.
        nonlocal last_read
        if time.monotonic() - last_read < _TOKEN_REREAD_S:
            return
        last_read = time.monotonic()
        try:
            fresh = token_file.read_text(encoding="utf-8").strip()
        except OSError:
            return
        if fresh:
            c.api_key = {"BearerToken": fresh}

    conf.refresh_api_key_hook = reread_token
    return Connection(
        api=client.ApiClient(configuration=conf),
        cluster="in-cluster",
        server=url_for_display(conf.host).rstrip("/"),
        hint=hint,
        verify_tls=True,
    )


@dataclass(frozen=True)
class _Kubeconfig:
    """The kubeconfig files to use, read and checked."""

    config_file: str
    """The files for the client, joined by `os.pathsep`."""
    docs: list[dict[str, Any]]
    """Each file parsed (for the context names)."""
    shown: str
    """How messages name the kubeconfig."""
    option: str
    """What to check, in messages."""


def _kubeconfig_files(kubeconfig: Path | None, origin: str) -> _Kubeconfig:
    """The kubeconfig `kubeconfig` names (`origin` named it), else the files `KUBECONFIG`
    names, else `~/.kube/config`, each checked; `SourceError` naming who named a file that
    cannot be used. Of several files in `KUBECONFIG`, those that do not exist or are empty are
    left out, as `kubectl` leaves them, while another can be used."""
    if kubeconfig is not None:
        path = str(kubeconfig.expanduser())
        doc = _read(path)
        if isinstance(doc, str):
            raise SourceError(f"{origin} names {path}, which {doc}; check {origin}, or {WITHOUT}")
        return _Kubeconfig(path, [doc], path, origin)
    paths = _env_paths()
    if paths:
        env = os.environ.get("KUBECONFIG", "")
        found: list[tuple[str, dict[str, Any]]] = []
        passed: list[tuple[str, str]] = []
        for path in paths:
            doc = _read(path)
            if not isinstance(doc, str):
                found.append((path, doc))
            elif doc in _PASSED or len(paths) == 1:
                passed.append((path, doc))
            else:
                raise SourceError(
                    f"KUBECONFIG names {path}, which {doc}; check KUBECONFIG, or {WITHOUT}"
                )
        if not found:
            said = "; ".join(f"{path} {doc}" for path, doc in passed)
            what = (
                f"KUBECONFIG names {passed[0][0]}, which {passed[0][1]}"
                if len(passed) == 1
                else f"KUBECONFIG names {len(passed)} files and none holds a kubeconfig ({said})"
            )
            raise SourceError(f"{what}; check KUBECONFIG, or {WITHOUT}")
        return _Kubeconfig(
            os.pathsep.join(path for path, _ in found),
            [doc for _, doc in found],
            f"KUBECONFIG ({env})",
            "KUBECONFIG or --kubeconfig",
        )
    default = str(_default_kubeconfig())
    if not os.path.lexists(default):
        raise SourceError(
            f"no kubeconfig: {default} does not exist and KUBECONFIG is not set; "
            "pass --kubeconfig, or run gpuaudit in the cluster with a service account"
        )
    doc = _read(default)
    if isinstance(doc, str):
        raise SourceError(f"the default kubeconfig {default} {doc}; fix or remove it, or {WITHOUT}")
    return _Kubeconfig(default, [doc], default, "--kubeconfig")


_PASSED = ("does not exist", "is empty", "is empty (comments only)")
"""What `kubectl` passes over in one of several files of `KUBECONFIG`."""


def _read(path: str) -> dict[str, Any] | str:
    """The kubeconfig file at `path`, parsed; or what is wrong with it, as the end of a
    sentence about it (`is empty`, `does not exist`, `is not valid YAML (line 2, column 1)`)."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    if not os.path.lexists(path):
        return "does not exist"
    if not os.path.exists(path):
        return "is a link to nothing"
    if not os.path.isfile(path):
        return "is not a file"
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    if len(data) > MAX_KUBECONFIG_BYTES:
        return f"is larger than {MAX_KUBECONFIG_BYTES >> 20} MiB, more than any kubeconfig"
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "is not a kubeconfig (it is not UTF-8 text)"
    if not text.strip():
        return "is empty"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return f"is not valid YAML{where}"
    except RecursionError:
        return "is not a kubeconfig (its YAML is nested too deeply)"
    if doc is None:
        return "is empty (comments only)"
    if not isinstance(doc, dict):
        return "is not a kubeconfig (its YAML is not a mapping of clusters, users and contexts)"
    return doc


def _contexts(docs: list[dict[str, Any]]) -> tuple[list[str], str | None]:
    """Context names and the current context, read leniently (for messages and the name)."""
    names: list[str] = []
    current: str | None = None
    for doc in docs:
        for ctx in doc.get("contexts") or []:
            if isinstance(ctx, dict) and isinstance(ctx.get("name"), str):
                if ctx["name"] not in names:
                    names.append(ctx["name"])
        cur = doc.get("current-context")
        # The client lets a later file's current-context win; mirror it.
        if isinstance(cur, str) and cur:
            current = cur
    return names, current


def _clean_tokens(conf: Any, shown: str, option: str) -> None:
    """Drop the line break a token file written on Windows leaves after the token; refuse a
    token with a control character inside (it would end up quoted in a client error)."""
    if not _strip_tokens(conf):
        raise SourceError(
            f"the token in kubeconfig {shown} holds a line break or another control "
            f"character (not shown); check {option} and the token it names"
        )
    hook = getattr(conf, "refresh_api_key_hook", None)
    if callable(hook):
        # The client sets the token (and this hook) again before every request: strip it,
        # and put this hook back, every time.
        def refresh(c: Any) -> None:
            hook(c)
            c.refresh_api_key_hook = refresh
            _strip_tokens(c)

        conf.refresh_api_key_hook = refresh


def _strip_tokens(conf: Any) -> bool:
    """Strip the space and line breaks around each token; False when one has a control
    character inside."""
    keys = getattr(conf, "api_key", None)
    if not isinstance(keys, dict):
        return True
    ok = True
    for key, value in list(keys.items()):
        if isinstance(value, str):
            keys[key] = value.strip()
            ok = ok and not any(ord(c) < 32 or ord(c) == 127 for c in keys[key])
    return ok


def _connect_kubeconfig(kubeconfig: Path | None, context: str | None, origin: str) -> Connection:
    import yaml  # type: ignore[import-untyped,unused-ignore]

    client, config = k8s_modules()
    files = _kubeconfig_files(kubeconfig, origin)
    config_file, shown, option = files.config_file, files.shown, files.option
    names, current = _contexts(files.docs)
    listing = f" (it has: {', '.join(names)})" if names else ""
    if context is not None and names and context not in names:
        raise SourceError(f"context {context!r} is not in kubeconfig {shown}{listing}")
    conf = client.Configuration()
    try:
        # persist_config=False: a refreshed token must never be written back by gpuaudit.
        api = config.new_client_from_config(
            config_file=config_file,
            context=context,
            persist_config=False,
            client_configuration=conf,
        )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise SourceError(f"kubeconfig {shown} is not valid YAML{where}; check {option}") from None
    except config.ConfigException as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        if "current-context" in first:
            raise SourceError(
                f"kubeconfig {shown} sets no current-context; pass --context{listing}"
            ) from None
        if "contexts" in first and context is not None:
            raise SourceError(
                f"context {context!r} is not in kubeconfig {shown}{listing}"
            ) from None
        raise SourceError(
            f"kubeconfig {shown} cannot be used: {clip(first)}; check {option}"
            + (" and --context" if context else "")
            + f", or {WITHOUT}"
        ) from None
    except OSError as exc:
        raise SourceError(
            f"kubeconfig {shown} cannot be used: {exc.strerror or type(exc).__name__}"
            f"{' (' + exc.filename + ')' if isinstance(exc.filename, str) else ''}; "
            f"check {option}"
        ) from None
    except Exception as exc:
        # The message may quote kubeconfig content; name only the kind of failure.
        raise SourceError(
            f"kubeconfig {shown} is malformed ({type(exc).__name__}); check {option} "
            f"(`kubectl config view` shows what is wrong), or {WITHOUT}"
        ) from None
    api.configuration.retries = 2
    _clean_tokens(api.configuration, shown, option)
    name = context or current or "kubeconfig"
    return Connection(
        api=api,
        cluster=name,
        server=url_for_display(str(api.configuration.host)).rstrip("/"),
        hint=f"check {option}" + (" and --context" if context else "/--context"),
        verify_tls=bool(api.configuration.verify_ssl),
    )
