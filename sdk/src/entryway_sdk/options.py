"""What a client is set up with: `EntrywayOptions`, one frozen value for `Entryway.init`.

The service's URL has no default: a client that quietly talked to localhost would send a
production key to whatever listens there. It comes from the options, or from the
`ENTRYWAY_URL` environment variable, read when the client is set up (never at import).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from entryway_sdk.errors import ConfigurationError
from entryway_sdk.transport import RetryPolicy

BASE_URL_ENV = "ENTRYWAY_URL"


@dataclass(frozen=True, slots=True)
class EntrywayOptions:
    """A client's settings: the project's `api_key`, the caller's own RPC endpoint `rpc_url`
    for `chain_id`, and the service's `base_url` (None: `ENTRYWAY_URL`)."""

    api_key: str
    rpc_url: str
    chain_id: int
    base_url: str | None = None
    request_timeout: float = 30.0  # seconds, per HTTP request
    retry: RetryPolicy | None = None  # None: `RetryPolicy()`

    def service_url(self, environ: Mapping[str, str] | None = None) -> str:
        """`base_url`, else `ENTRYWAY_URL` from `environ` (the process's environment);
        ConfigurationError when neither is set."""
        if self.base_url:
            return self.base_url
        url = (os.environ if environ is None else environ).get(BASE_URL_ENV, "").strip()
        if not url:
            raise ConfigurationError(
                "no Entryway service URL: pass base_url (EntrywayOptions(base_url=...) or "
                f"Entryway.init(base_url=...)) or set the {BASE_URL_ENV} environment variable"
            )
        return url
