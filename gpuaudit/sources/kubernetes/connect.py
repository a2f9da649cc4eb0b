"""Connect to the Kubernetes API: from a kubeconfig (`--kubeconfig`, else `$KUBECONFIG`, else
`~/.kube/config`) or, inside a pod with no kubeconfig, from the pod's service account.

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


def connect(kubeconfig: Path | None, context: str | None) -> Connection:
    """A client for the cluster `kubeconfig` and `context` pick (`None`: `$KUBECONFIG`, else
    `~/.kube/config`, else the pod's service account when running in a cluster)."""
    if kubeconfig is None and context is None and _in_cluster():
        return _connect_in_cluster()
    return _connect_kubeconfig(kubeconfig, context)


def _in_cluster() -> bool:
    """Like `kubectl`: the service account is used only when no kubeconfig is around."""
    if os.environ.get("KUBECONFIG") or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return False
    return not (Path.home() / ".kube" / "config").is_file()


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


def _kubeconfig_source(kubeconfig: Path | None) -> tuple[str, str, str]:
    """The `config_file` argument for the client, how to name it, and which option to blame."""
    if kubeconfig is not None:
        path = kubeconfig.expanduser()
        if not path.exists():
            raise SourceError(f"kubeconfig {path} does not exist; check --kubeconfig")
        if not path.is_file():
            raise SourceError(f"kubeconfig {path} is not a file; check --kubeconfig")
        return str(path), str(path), "--kubeconfig"
    env = os.environ.get("KUBECONFIG", "")
    if env:
        paths = [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
        if not any(os.path.isfile(p) for p in paths):
            raise SourceError(
                f"no kubeconfig file named in KUBECONFIG ({env}) exists; "
                "check KUBECONFIG or pass --kubeconfig"
            )
        return env, f"KUBECONFIG ({env})", "KUBECONFIG or --kubeconfig"
    default = Path.home() / ".kube" / "config"
    if not default.is_file():
        raise SourceError(
            f"no kubeconfig: {default} does not exist and KUBECONFIG is not set; "
            "pass --kubeconfig, or run gpuaudit in the cluster with a service account"
        )
    return str(default), str(default), "--kubeconfig"


def _contexts(config_file: str) -> tuple[list[str], str | None]:
    """Context names and the current context, read leniently (for messages and the name)."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    names: list[str] = []
    current: str | None = None
    for raw in config_file.split(os.pathsep):
        path = os.path.expanduser(raw)
        if not raw or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                doc = yaml.safe_load(fh)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(doc, dict):
            continue
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


def _connect_kubeconfig(kubeconfig: Path | None, context: str | None) -> Connection:
    import yaml  # type: ignore[import-untyped,unused-ignore]

    client, config = k8s_modules()
    config_file, shown, option = _kubeconfig_source(kubeconfig)
    names, current = _contexts(config_file)
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
            "(`kubectl config view` shows what is wrong)"
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
