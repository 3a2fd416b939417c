"""The images' HEALTHCHECK: GET /readyz of this container's process, on the port its settings give it (stdlib only,
so it runs before metalake imports anything). Exit 0 when ready, 1 otherwise (the reason on stdout).

    python3 healthcheck.py api|connect|enrichment|propagation|outbound|access|lake_worker
"""

import json
import os
import sys
import urllib.error
import urllib.request

# The address and port variables of each kind, and the port the settings default to (None: no health server).
_SERVERS = {
    "api": ("METALAKE_API__HOST", "METALAKE_API__PORT", 8000),
    "connect": ("METALAKE_CONNECT__HOST", "METALAKE_CONNECT__PORT", 8083),
}


def url(kind: str) -> str:
    host_var, port_var, default = _SERVERS.get(
        kind, ("METALAKE_HEALTH__HOST", f"METALAKE_HEALTH__PORTS__{kind.upper()}", None)
    )
    port = os.environ.get(port_var) or default
    if not port or str(port) == "0":
        raise SystemExit(f"unhealthy: {port_var} is unset, so {kind} serves no /readyz")
    host = os.environ.get(host_var) or "127.0.0.1"
    # A wildcard bind answers on loopback too.
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104 - compared, not bound
    return f"http://{host}:{port}/readyz"


def main() -> int:
    target = url(sys.argv[1])
    try:
        with urllib.request.urlopen(target, timeout=5) as resp:  # noqa: S310 - a loopback URL from the settings
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        print(f"unhealthy: {target} answered {exc.code}")  # noqa: T201
        return 1
    except (OSError, ValueError) as exc:
        print(f"unhealthy: {target}: {type(exc).__name__}")  # noqa: T201
        return 1
    status = body.get("status")
    print(f"{target}: {status} {body.get('checks', {})}")  # noqa: T201
    return 0 if status == "ready" else 1


if __name__ == "__main__":
    sys.exit(main())
