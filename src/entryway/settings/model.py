"""What an operator configures, as one typed, frozen value (docs/configuration.md).

Shape only: each field's type and bounds are checked here, offline. Whether the files can be
read, the nodes answer and the database is there is checked by `entryway.settings.checks`,
at the start of every process. Secrets (keys, tokens, URLs that may carry credentials) are
`SecretStr`: their repr, and every message about them, shows `**********`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from limits import parse as parse_rate
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from entryway.domain.billing import BUDGET_ALERT_PERCENT, BillingConfig
from entryway.domain.destinations import PRIVATE_ALLOWED, PUBLIC_ONLY, DestinationPolicy
from entryway.domain.eip7702 import SIMPLE_7702_ACCOUNT
from entryway.domain.evm import checksum
from entryway.domain.networks import NETWORKS, FeeRules, fee_rules_for
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import DEFAULT_NATIVE_PRICES, PriceBook
from entryway.domain.support import ResponseTargets
from entryway.domain.token_prices import NativeTokenPrices
from entryway.storage.secrets_key import SecretsKeySource

PositiveInt = Annotated[int, Field(gt=0)]
Wei = Annotated[int, Field(ge=0, lt=2**256)]
Credits = Annotated[int, Field(ge=0, le=2**62)]


class Section(BaseModel):
    """A table of the config file: unknown keys are mistakes, values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _address(value: str) -> str:
    try:
        return checksum(value)
    except Exception:
        raise ValueError("not a 20-byte hex address") from None


Seconds = Annotated[float, Field(gt=0, le=86_400)]


class HttpSettings(Section):
    """Where the API listens, and what a connection may cost it before and while it sends a
    request (docs/security.md, "Connections")."""

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65_535)] = 8000
    max_request_line_bytes: Annotated[int, Field(ge=256)] = 8 * 1024  # else 414
    max_header_bytes: Annotated[int, Field(ge=1024)] = 32 * 1024  # all header lines; else 431
    header_timeout_s: Seconds = 10.0  # from connecting, or a request's first byte, to its head
    body_timeout_s: Seconds = 30.0  # a body's time, plus a second per body_min_rate bytes
    body_min_rate: PositiveInt = 1024  # bytes per second
    keep_alive_timeout_s: Seconds = 5.0  # an idle connection between requests
    send_timeout_s: Seconds = 30.0  # an answer the client takes nothing of
    max_connections: PositiveInt = 4096  # open at once, per process
    max_connections_per_client: PositiveInt = 256  # open at once from one address

    # The address users reach the service at (e.g. https://aa.example.com behind a proxy):
    # links the dashboard hands out start with it. Unset: http://<host>:<port> served on.
    public_url: str | None = None

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return None if value is None else public_url_checked(value)


class DashboardSettings(Section):
    """The web console at /dashboard (docs/dashboard.md)."""

    enabled: bool = True
    # The session cookie goes over HTTPS only. Browsers count http://localhost and
    # http://127.0.0.1 as secure, so a local `entryway up` works with it; turn it off only
    # behind a plain-HTTP address other than those (a test network, never production).
    secure_cookies: bool = True
    # Attempts allowed as N/period (docs/security.md): sign-ups and sign-ins per client
    # address, sign-ins per client address and account, operator-token sign-ins per address.
    sign_in_per_address: str = "20/minute"
    sign_in_per_account: str = "5/15 minutes"
    operator_sign_in_per_address: str = "5/minute"
    # Passwords hashed at once (each a thread busy for tens of milliseconds), and how many
    # more may wait; the rest are answered 429 without hashing.
    password_hashing_threads: Annotated[int, Field(ge=1, le=64)] = 1
    password_hashing_queue: Annotated[int, Field(ge=0, le=1000)] = 8

    @field_validator("sign_in_per_address", "sign_in_per_account", "operator_sign_in_per_address")
    @classmethod
    def _rate(cls, value: str) -> str:
        try:
            parse_rate(value)
        except ValueError:
            raise ValueError("not N/period, e.g. 20/minute or 5/15 minutes") from None
        return value


def public_url_checked(value: str) -> str:
    """An http(s) origin, with a path prefix if the service is served under one; no
    trailing slash, so that paths are appended as they are."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(
            "not an http(s) URL without query or fragment, e.g. https://aa.example.com"
        )
    return value.strip().rstrip("/")


class LimitSettings(Section):
    """What one request may hold; unset: the service's defaults (docs/security.md)."""

    max_body_bytes: PositiveInt | None = None
    max_upload_bytes: PositiveInt | None = None
    max_json_depth: PositiveInt | None = None
    max_rpc_batch: PositiveInt | None = None
    max_rpc_batch_heavy: PositiveInt | None = None

    def given(self) -> dict[str, int]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class WebhookSettings(Section):
    allow_private: bool = False  # deliver to private, loopback and link-local addresses too

    @property
    def destinations(self) -> DestinationPolicy:
        return PRIVATE_ALLOWED if self.allow_private else PUBLIC_ONLY


class SecretsSettings(Section):
    """The key sealing secrets at rest: `key` (base64) or `key_file`, else the data
    directory's `secrets-key`, made once by the service."""

    key: SecretStr | None = None
    key_file: Path | None = None
    previous_keys: SecretStr = SecretStr("")  # base64, comma-separated: keys rotated out

    @model_validator(mode="after")
    def _one_source(self) -> SecretsSettings:
        if self.key is not None and self.key_file is not None:
            raise ValueError("give key or key_file, not both")
        return self

    @property
    def configured(self) -> bool:
        return self.key is not None or self.key_file is not None or bool(self.previous_keys)

    def source(self) -> SecretsKeySource:
        return SecretsKeySource(
            key=self.key.get_secret_value() if self.key is not None else None,
            key_file=self.key_file,
            previous_keys=self.previous_keys.get_secret_value(),
        )


class PaymasterSettings(Section):
    deposit_alert_wei: Wei = 10**17  # alert when the EntryPoint deposit falls under this
    # The signer of every chain that names none of its own.
    signer_key: SecretStr | None = None
    signer_key_file: Path | None = None
    # How long a paymaster signature stays valid after the chain's latest block (validUntil):
    # a hold whose signatures are all past it, with no event for them up to the chain's final
    # block, is released.
    signature_validity_s: int = Field(default=900, ge=60, le=86_400)


class PriceSettings(Section):
    """Over the price book's defaults (docs/pricing.md): only what is given changes."""

    native_token_micro_eur: dict[int, PositiveInt] = Field(default_factory=dict)
    read: Credits | None = None
    validation: Credits | None = None
    sponsorship: Credits | None = None
    relay_per_call: Credits | None = None
    per_calldata_byte: Credits | None = None
    account_creation: Credits | None = None
    guardian_change: Credits | None = None
    per_verification_step: Credits | None = None
    recovery: Credits | None = None
    notarization: Credits | None = None
    notarization_per_kib: Credits | None = None
    webhook_delivery: Credits | None = None

    def price_book(self, chain_prices: Mapping[int, int] | None = None) -> PriceBook:
        """The price book; `chain_prices` (the chains' own `native_token_price_micro_eur`)
        over `native_token_micro_eur` over the defaults. Its token prices are a
        `NativeTokenPrices`, which a chain's price feed may follow (`chain.price_feed`)."""
        fees = {k: v for k, v in self.model_dump().items() if v is not None}
        prices = {**DEFAULT_NATIVE_PRICES, **fees.pop("native_token_micro_eur")}
        prices.update(chain_prices or {})
        return PriceBook(native_token_micro_eur=NativeTokenPrices(prices), **fees)


class BillingSettings(Section):
    overage_micro_eur_per_credit: dict[PlanName, Credits] = Field(default_factory=dict)
    # The share of a project's spending budget, in percent, at which credits.budget fires.
    budget_alert_percent: Annotated[int, Field(ge=1, le=100)] = BUDGET_ALERT_PERCENT
    enterprise_monthly_micro_eur: Credits = 0
    enterprise_monthly_credits: Credits = 0

    def billing_config(self) -> BillingConfig:
        given = {k: v for k, v in self.model_dump().items() if v is not None}
        return BillingConfig(**given)


class WorkerSettings(Section):
    concurrency: PositiveInt = 4
    lease_seconds: Annotated[float, Field(gt=0)] = 30.0
    poll_interval: Annotated[float, Field(gt=0)] = 1.0
    shutdown_grace: Annotated[float, Field(ge=0)] = 10.0
    delivery_timeout: Annotated[float, Field(gt=0)] = 10.0


class SupportSettings(Section):
    """Each support level's response target, in hours (docs/dashboard.md, "Support")."""

    community_response_hours: Annotated[int, Field(ge=1, le=8_760)] = 72
    priority_response_hours: Annotated[int, Field(ge=1, le=8_760)] = 24
    sla_response_hours: Annotated[int, Field(ge=1, le=8_760)] = 4

    def targets(self) -> ResponseTargets:
        return ResponseTargets(
            community_hours=self.community_response_hours,
            priority_hours=self.priority_response_hours,
            sla_hours=self.sla_response_hours,
        )


class RequestLogSettings(Section):
    """The request log (docs/api.md, "Request log"): how long each plan keeps it, and how
    many calls a project has logged one by one per minute before the rest are summarised."""

    retention_free_hours: Annotated[int, Field(ge=1, le=8_760)] = 24
    retention_paid_hours: Annotated[int, Field(ge=1, le=8_760)] = 720
    per_project_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 600


class ReadinessSettings(Section):
    """The thresholds of /readyz (docs/operations.md)."""

    executor_min_wei: Wei = 10**16  # the least an executor key may hold, the chain ready
    # None: the deposit watcher's alert threshold; 0: the deposit is not checked.
    deposit_min_wei: Wei | None = None


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class LogSettings(Section):
    format: Literal["json", "console"] | None = None  # None: json unless stderr is a terminal
    level: str = "INFO"

    @field_validator("level")
    @classmethod
    def _level(cls, value: str) -> str:
        if value.strip().upper() not in LOG_LEVELS:
            raise ValueError(f"not a log level: give one of {', '.join(LOG_LEVELS)}")
        return value.strip().upper()

    @property
    def json_lines(self) -> bool | None:
        """JSON lines or not; None: as the output is (`configure_logging` decides)."""
        return None if self.format is None else self.format == "json"


class FeeRuleSettings(Section):
    """Over the network's own rules (domain/networks.py): only what is given changes."""

    min_priority_fee_per_gas: Wei | None = None
    l1_gas_price_oracle: str | None = None  # OP-stack GasPriceOracle; "" turns L1 fees off
    max_fee_per_gas: Wei | None = None

    @field_validator("l1_gas_price_oracle")
    @classmethod
    def _oracle(cls, value: str | None) -> str | None:
        return _address(value) if value else value

    def over(self, rules: FeeRules) -> FeeRules:
        given: dict[str, Any] = {k: v for k, v in self.model_dump().items() if v is not None}
        if given.get("l1_gas_price_oracle") == "":
            given["l1_gas_price_oracle"] = None
        return replace(rules, **given)


class ContractAddresses(Section):
    entry_point: str
    account_factory: str
    paymaster: str
    notary: str
    # EntryPoint v0.7 beside v0.8, with its own paymaster and SimpleAccountFactory (`entryway
    # deploy` prints all three); without them the chain serves v0.8 only.
    entry_point_v07: str | None = None
    paymaster_v07: str | None = None
    simple_account_factory_v07: str | None = None
    # EntryPoint v0.9 likewise: its canonical address on a chain that carries the release
    # (public chains), else where its npm release candidate lands (devnets).
    entry_point_v09: str | None = None
    paymaster_v09: str | None = None
    simple_account_factory_v09: str | None = None
    # EntryPoint v0.6 at its canonical address, where the chain carries it (`entryway deploy`
    # then deploys v0.6's paymaster and SimpleAccountFactory beside it and prints them).
    entry_point_v06: str | None = None
    paymaster_v06: str | None = None
    simple_account_factory_v06: str | None = None
    # Simple7702Account, what the SDK's EIP-7702 EOAs delegate to: its canonical address
    # unless the chain has it elsewhere.
    simple_7702_account: str = SIMPLE_7702_ACCOUNT

    @field_validator("*")
    @classmethod
    def _checksummed(cls, value: str | None) -> str | None:
        return None if value is None else _address(value)


class ChainSettings(Section):
    """One network. A known chain id (domain/networks.py) needs only its RPC URLs and keys;
    another chain also names itself: name, native_token, testnet, explorer_url."""

    chain_id: PositiveInt
    rpc_urls: Annotated[list[SecretStr], Field(min_length=1)]  # failover, in this order
    # Seconds one node call may take before it counts as unanswered (a hung node is then
    # answered 503); debug_trace* calls of op validation have their own, longer bound.
    rpc_timeout_s: Annotated[float, Field(gt=0, le=300)] = 5.0
    rpc_trace_timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0
    # Blocks one eth_getLogs may cover (a provider's cap, e.g. 2,000); None: none until the
    # node refuses a range, then learned by halving (chain/limits.py).
    rpc_max_log_range_blocks: PositiveInt | None = None
    # How ops reach the chain: always through the durable intake, for the chain's elected
    # bundler leader (docs/bundler.md). Kept for config files that name it; "in_process",
    # retired, is refused (`_bundling`).
    bundling: Literal["intake"] = "intake"
    # The leader's keys: needed where it runs (`entryway up`, `entryway serve`, `entryway
    # bundler --chain N`); an API replica or a worker may go without.
    executor_key_files: list[Path] = Field(default_factory=list)
    # The `entryway bundler` process watches its executor keys' balances: under this (None:
    # [readiness] executor_min_wei) it is not ready and alerts; with a funding key and an
    # amount, the leader sends that amount from the funding key to a key under it.
    executor_min_balance_wei: Wei | None = None
    executor_topup_wei: Wei = 0
    executor_funding_key_file: Path | None = None
    paymaster_signer_key_file: Path | None = None  # default: [paymaster] signer_key(_file)
    # The API and the worker need it (`config check` says so); a file for `entryway bundler`
    # alone may leave it out, as it may the paymaster signer.
    notary_submitter_key_file: Path | None = None
    # Where the contracts are: given, or derived from the owner `entryway deploy` used (the
    # API and the worker need one of the two).
    addresses: ContractAddresses | None = None
    deploy_owner: str | None = None
    fee_rules: FeeRuleSettings = Field(default_factory=FeeRuleSettings)
    maintenance: bool = False
    # The native token's price, micro-euros per token (over [prices].native_token_micro_eur),
    # and optionally a Chainlink-style feed of it in EUR: followed while its rounds are at
    # most price_feed_max_age_s old, the configured price used otherwise (docs/pricing.md).
    native_token_price_micro_eur: PositiveInt | None = None
    price_feed: str | None = None
    price_feed_max_age_s: PositiveInt = 3_600
    # Confirmations after which an op's receipt, and the credits its sponsorship settled,
    # are final; and how many recent blocks the chain's follower compares to see reorgs.
    # Defaults per chain (chain/finality.py): Polygon 128, Base 60, others 64, a development
    # node 1 (reorg depth: at least 64 and the finality depth).
    finality_depth: PositiveInt | None = None
    reorg_depth: PositiveInt | None = None
    # The share of the block gas limit (read from the node) one bundle may use, in percent;
    # default per chain (bundler/bundling.py): Ethereum L1 25, a development node 90,
    # others 50. Several executors fill one block when a bundle cannot carry the ready ops.
    bundle_block_gas_share_percent: Annotated[int, Field(ge=1, le=100)] | None = None
    # Factories, paymasters and aggregators the bundler's reputation never throttles or
    # bans, beside the operator's own (docs/bundler.md, "Trusted entities", for the risk).
    trusted_entities: list[str] = Field(default_factory=list)
    # How much of ERC-7562 the bundler enforces, by what the node traces ("auto": the
    # strongest mode it serves; docs/bundler.md, "Validation modes"). A pinned mode the node
    # cannot serve stops the chain at start.
    validation_mode: Literal["auto", "native", "opcodes", "calls", "untraced"] = "auto"
    name: str | None = None
    native_token: str | None = None
    testnet: bool | None = None
    explorer_url: str | None = None

    @field_validator("rpc_urls")
    @classmethod
    def _http_urls(cls, urls: list[SecretStr]) -> list[SecretStr]:
        for url in urls:
            if not url.get_secret_value().startswith(("http://", "https://")):
                raise ValueError("each RPC URL starts with http:// or https://")
        return urls

    @field_validator("bundling", mode="before")
    @classmethod
    def _bundling(cls, value: object) -> object:
        if value == "in_process":
            raise ValueError(
                'bundling = "in_process" is retired: every op now goes through the durable '
                'intake; remove the key (or write "intake") and run the chain\'s bundler '
                "leader: `entryway serve` runs it beside the API, or run `entryway bundler "
                "--config FILE --chain N` (docs/deploy.md)"
            )
        return value

    @field_validator("trusted_entities")
    @classmethod
    def _trusted_addresses(cls, values: list[str]) -> list[str]:
        return [_address(v) for v in values]

    @field_validator("deploy_owner", "price_feed")
    @classmethod
    def _owner(cls, value: str | None) -> str | None:
        return _address(value) if value is not None else None

    @model_validator(mode="after")
    def _complete(self) -> ChainSettings:
        # Neither is fine for a bundler's file (it bundles for the canonical EntryPoint);
        # the API and the worker are told at their start (settings.checks).
        if self.addresses is not None and self.deploy_owner is not None:
            raise ValueError("give the contract addresses or the deploy_owner, not both")
        if (self.executor_topup_wei > 0) != (self.executor_funding_key_file is not None):
            raise ValueError(
                "an executor top-up needs both executor_topup_wei (over 0) and "
                "executor_funding_key_file"
            )
        if self.chain_id not in NETWORKS:
            missing = [
                name
                for name in ("name", "native_token", "testnet", "explorer_url")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(
                    f"chain {self.chain_id} is not a known network: give {', '.join(missing)}"
                )
        return self

    @property
    def fee_rules_resolved(self) -> FeeRules:
        return self.fee_rules.over(fee_rules_for(self.chain_id))

    @property
    def display_name(self) -> str:
        known = NETWORKS.get(self.chain_id)
        return self.name or (known.name if known else str(self.chain_id))

    def urls(self) -> list[str]:
        return [u.get_secret_value() for u in self.rpc_urls]


class Settings(BaseSettings):
    """Everything a process of Entryway is configured with. Built by `load_settings`
    (a TOML file, then ENTRYWAY_* variables over it) or directly (the devnet of `up`)."""

    model_config = SettingsConfigDict(
        env_prefix="ENTRYWAY_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
    )

    data_dir: Path = Path(".entryway")  # SQLite, the secrets key and admin token by default
    database_url: SecretStr | None = None  # default: SQLite in data_dir
    redis_url: SecretStr | None = None  # shared rate limits; in memory without
    rate_limits: str = ""  # e.g. "FREE=10/second,PRO=100/second" over the defaults
    heavy_rate_limits: str = ""  # estimation, sending, pm_* per project, over their defaults
    max_keys_per_project: PositiveInt = 20  # active API keys a project may hold
    admin_token: SecretStr | None = None  # operator token for /v1/admin
    admin_token_file: Path | None = None  # default: <data_dir>/admin-token, made once
    metrics_token: SecretStr | None = None  # opens /metrics to scrapers off this host
    http: HttpSettings = Field(default_factory=HttpSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    secrets: SecretsSettings = Field(default_factory=SecretsSettings)
    paymaster: PaymasterSettings = Field(default_factory=PaymasterSettings)
    prices: PriceSettings = Field(default_factory=PriceSettings)
    billing: BillingSettings = Field(default_factory=BillingSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    readiness: ReadinessSettings = Field(default_factory=ReadinessSettings)
    support: SupportSettings = Field(default_factory=SupportSettings)
    request_log: RequestLogSettings = Field(default_factory=RequestLogSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    chains: list[ChainSettings] = Field(default_factory=list)

    @field_validator("rate_limits", "heavy_rate_limits")
    @classmethod
    def _rate_limits(cls, value: str) -> str:
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, _, rate = part.partition("=")
            try:
                PlanName(name.strip().upper())
                parse_rate(rate.strip())
            except ValueError:
                raise ValueError(
                    "not a list of PLAN=N/period items, e.g. FREE=10/second,PRO=100/second"
                ) from None
        return value

    @field_validator("metrics_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("empty: give a token, or leave it unset")
        return value

    @field_validator("chains")
    @classmethod
    def _distinct(cls, chains: list[ChainSettings]) -> list[ChainSettings]:
        ids = [c.chain_id for c in chains]
        if len(set(ids)) != len(ids):
            raise ValueError("each chain id appears once")
        return chains

    def price_book(self) -> PriceBook:
        """[prices] with each chain's own native token price over it."""
        return self.prices.price_book(
            {
                c.chain_id: c.native_token_price_micro_eur
                for c in self.chains
                if c.native_token_price_micro_eur is not None
            }
        )

    @model_validator(mode="after")
    def _one_admin_token(self) -> Settings:
        if self.admin_token is not None and self.admin_token_file is not None:
            raise ValueError("give admin_token or admin_token_file, not both")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Variables over the file: the loader passes the TOML file's tables as init values,
        so ENTRYWAY_* (and the documented flat names) come first. Without the loader (the
        devnet of `up`, tests) only the values given count."""
        from entryway.settings.loading import LegacyEnvironment, reading_environment

        if not reading_environment():
            return (init_settings,)
        return (env_settings, LegacyEnvironment(settings_cls), init_settings)
