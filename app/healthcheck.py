"""``python -m app.healthcheck``: exit 0 when the server on this machine answers ``/healthz``
with 200, 1 otherwise. The container's HEALTHCHECK; it reads the server's own settings
(``SPECSCOPE_HOST``, ``SPECSCOPE_PORT``), so it asks wherever the server listens."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from engine.settings import Settings

TIMEOUT_S = 4.0
# A server listening on every interface is reached on the loopback one.
WILDCARDS = {"", "0.0.0.0", "::", "[::]"}


def health_url(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in WILDCARDS else settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}/healthz"


def main() -> int:
    url = health_url(Settings())
    # Always local: a proxy from the environment must not be asked.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=TIMEOUT_S) as response:
            print(response.read().decode("utf-8", "replace"))
            return 0
    except urllib.error.HTTPError as error:  # 503: the models could not be loaded
        print(f"{url}: HTTP {error.code} {error.read().decode('utf-8', 'replace')}")
    except (urllib.error.URLError, OSError) as error:
        print(f"{url}: {error}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
