"""`Entryway.init` takes one `EntrywayOptions`; the service's URL comes from it or from
`ENTRYWAY_URL`, never from a localhost default."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from entryway_sdk import (
    ConfigurationError,
    Entryway,
    EntrywayError,
    EntrywayOptions,
    EntrywaySync,
    RetryPolicy,
)

from tests.sdk.fakes import API, FAST, NODE, Fake

OPTIONS = EntrywayOptions(api_key="ew_test_key", rpc_url=NODE, chain_id=80002, base_url=API)


class Recording(Fake):
    """The fake service and node, noting the host each request went to."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.hosts.append(request.url.host)
        return super().handle(request)


def _http(fake: Recording) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(fake.handle))


def test_the_options_are_frozen_typed_values() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        OPTIONS.chain_id = 84532  # type: ignore[misc]
    assert not hasattr(OPTIONS, "__dict__")  # slots
    assert (OPTIONS.request_timeout, OPTIONS.retry) == (30.0, None)
    other = dataclasses.replace(OPTIONS, chain_id=84532)
    assert (other.chain_id, OPTIONS.chain_id) == (84532, 80002)


async def test_init_takes_the_options_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENTRYWAY_URL", raising=False)
    fake = Recording()
    async with _http(fake) as http:
        client = await Entryway.init(dataclasses.replace(OPTIONS, retry=FAST), http=http)
        assert client.chain_id == 80002 and client.rpc_url == NODE
        assert client.api.retry is FAST
        assert client.defaults.network == "polygon-amoy"
    assert "/get-sdk-defaults" in fake.seen
    assert set(fake.hosts) == {"api.test", "node.test"}


async def test_without_a_base_url_the_environment_names_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENTRYWAY_URL", "http://from-env.test")
    fake = Recording()
    async with _http(fake) as http:
        await Entryway.init(dataclasses.replace(OPTIONS, base_url=None), http=http)
        await Entryway.init(api_key="ew_test_key", rpc_url=NODE, chain_id=80002, http=http)
    assert "from-env.test" in fake.hosts and "api.test" not in fake.hosts
    assert "127.0.0.1" not in fake.hosts and "localhost" not in fake.hosts


async def test_the_options_url_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTRYWAY_URL", "http://from-env.test")
    fake = Recording()
    async with _http(fake) as http:
        await Entryway.init(OPTIONS, http=http)
    assert "api.test" in fake.hosts and "from-env.test" not in fake.hosts


@pytest.mark.parametrize("env", [None, "", "  "])
async def test_no_url_anywhere_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, env: str | None
) -> None:
    if env is None:
        monkeypatch.delenv("ENTRYWAY_URL", raising=False)
    else:
        monkeypatch.setenv("ENTRYWAY_URL", env)
    fake = Recording()
    async with _http(fake) as http:
        with pytest.raises(ConfigurationError) as caught:
            await Entryway.init(dataclasses.replace(OPTIONS, base_url=None), http=http)
        with pytest.raises(ConfigurationError):
            await Entryway.init(api_key="ew_test_key", rpc_url=NODE, chain_id=80002, http=http)
    assert "base_url" in str(caught.value) and "ENTRYWAY_URL" in str(caught.value)
    assert isinstance(caught.value, EntrywayError) and isinstance(caught.value, ValueError)
    assert fake.hosts == []  # nothing was sent anywhere


async def test_options_and_keywords_are_not_mixed() -> None:
    async with _http(Recording()) as http:
        with pytest.raises(TypeError, match="not both"):
            await Entryway.init(OPTIONS, chain_id=84532, http=http)  # type: ignore[call-overload]
        with pytest.raises(TypeError, match="api_key"):
            await Entryway.init(rpc_url=NODE, chain_id=80002, http=http)  # type: ignore[call-overload]


def test_the_blocking_client_takes_the_options_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENTRYWAY_URL", raising=False)
    fake = Recording()
    http = _http(fake)
    options = dataclasses.replace(OPTIONS, retry=RetryPolicy(attempts=1))
    with EntrywaySync.init(options, http=http) as client:
        assert client.chain_id == 80002
        assert client.client.api.retry.attempts == 1
    assert "api.test" in fake.hosts
    with EntrywaySync.init(
        api_key="ew_test_key", rpc_url=NODE, chain_id=80002, base_url=API, http=http
    ) as client:
        assert client.chain_id == 80002  # the keywords, as before
    with pytest.raises(ConfigurationError, match="ENTRYWAY_URL"):
        EntrywaySync.init(dataclasses.replace(OPTIONS, base_url=None), http=http)
