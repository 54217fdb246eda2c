"""Request and response bodies of the REST API (pydantic), so the OpenAPI document is
complete. camelCase on the wire; integers for credits and micro-euros; hex strings for wei.

Fields from outside use the bounded types below (reusable by every router): integers are
strict JSON numbers (no `true`, no `80002.0`, no `"80002"`) within their range, dates lie
between the years 2000 and 9999 (UTC when they carry no offset), and text is printable and
bounded in length. docs/api.md lists the bounds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from entryway.domain.apikeys import KeyEnvironment, KeyRole
from entryway.domain.bounds import MAX_CHAIN_ID, MAX_CREDITS, BoundError, unprintable, utc_moment
from entryway.domain.plans import PlanName
from entryway.wallets.account_info import AccountInfo


def _single_line(text: str) -> str:
    bad = unprintable(text)
    if bad is not None:
        raise ValueError(f"holds a control or invisible character ({bad})")
    return text


def _multi_line(text: str) -> str:
    bad = unprintable(text, multiline=True)
    if bad is not None:
        raise ValueError(f"holds a control or invisible character ({bad})")
    return text


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank")
    return text


def _moment(value: datetime) -> datetime:
    try:
        return utc_moment(value, "the date")
    except BoundError as exc:
        raise ValueError(str(exc)) from None


# Text: a name (a project's, a policy's) or a label is one line; a description may span
# lines (line feeds and tabs); none holds other control or invisible characters.
Name = Annotated[
    str,
    Field(min_length=1, max_length=200),
    AfterValidator(_single_line),
    AfterValidator(_not_blank),
]
Label = Annotated[str, Field(max_length=200), AfterValidator(_single_line)]
Description = Annotated[str, Field(max_length=2000), AfterValidator(_multi_line)]
MetadataKey = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_single_line)]
Email = Annotated[
    str,
    Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$"),
    AfterValidator(_single_line),
]
# Numbers: strict (a JSON number, not a bool, a float or a string) and bounded.
ChainId = Annotated[int, Field(strict=True, ge=1, le=MAX_CHAIN_ID)]
ChainIds = Annotated[list[ChainId], Field(min_length=1, max_length=64)]
CreditAmount = Annotated[int, Field(strict=True, ge=1, le=MAX_CREDITS)]
CreditThreshold = Annotated[int, Field(strict=True, ge=0, le=MAX_CREDITS)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_CREDITS)]
Flag = Annotated[bool, Field(strict=True)]
# Dates: an offset, or UTC without one; 2000-01-01 <= moment < 9999-01-01.
Moment = Annotated[datetime, AfterValidator(_moment)]


class Wire(BaseModel):
    """camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Body(Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class SdkDefaults(Wire):
    chain_id: int  # wire names are camelCase
    network: str
    testnet: bool
    native_token: str
    explorer: str
    entry_point: str
    account_factory: str
    paymaster: str
    notary: str
    bundler_url: str
    min_priority_fee_per_gas: str
    # EntryPoint v0.7 beside v0.8, where the chain is deployed with it: its address, the
    # service's paymaster for it, the SimpleAccountFactory of that release.
    entry_point_v07: str | None = None
    paymaster_v07: str | None = None
    simple_account_factory_v07: str | None = None
    # EntryPoint v0.9 likewise (on a devnet: where its release candidate lands).
    entry_point_v09: str | None = None
    paymaster_v09: str | None = None
    simple_account_factory_v09: str | None = None
    # EntryPoint v0.6 at its canonical address, where the chain carries it: the service's
    # verifying paymaster for it and the release's SimpleAccountFactory.
    entry_point_v06: str | None = None
    paymaster_v06: str | None = None
    simple_account_factory_v06: str | None = None
    # The code an EIP-7702 EOA delegates to (eth-infinitism's Simple7702Account).
    simple_7702_account: str
    # How the bundler enforces ERC-7562 on the chain (native, opcodes, calls or untraced:
    # docs/bundler.md, "Validation modes"), and the rules that mode leaves unchecked.
    validation_mode: str = "opcodes"
    unchecked_rules: list[str] = []


class SdkDefaultsList(Wire):
    chains: dict[str, SdkDefaults]


class RecoveryOut(Wire):
    new_owner: str
    execute_after: int


class AccountInfoOut(Wire):
    chain_id: int
    address: str
    deployed: bool
    nonce: int
    deposit: str  # wei, hex
    smart_account: bool
    owner: str | None
    guardians: list[str]
    threshold: int
    pending_recovery: RecoveryOut | None

    @classmethod
    def of(cls, chain_id: int, info: AccountInfo) -> AccountInfoOut:
        pending = info.pending_recovery
        return cls(
            chain_id=chain_id,
            address=info.address,
            deployed=info.deployed,
            nonce=info.nonce,
            deposit=hex(info.deposit),
            smart_account=info.smart_account,
            owner=info.owner,
            guardians=list(info.guardians),
            threshold=info.threshold,
            pending_recovery=RecoveryOut(
                new_owner=pending.new_owner, execute_after=pending.execute_after
            )
            if pending
            else None,
        )


class OpStatusOut(Wire):
    # the bundler's status fields pass through
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    chain_id: int
    user_op_hash: str
    status: str
    credits: int  # charged for this op so far: its relay and, if sponsored, its sponsorship
    credits_final: bool  # False while the sponsorship is still held, awaiting the receipt
    # "entryway": sent through this service; "external": our paymaster's op, mined around it
    # (another bundler, or handleOps sent to the EntryPoint); None: signed, not seen yet.
    submitted_by: str | None = None


class ProjectOut(Wire):
    project_id: str
    name: str
    chains: list[int]
    aa_module_enabled: bool
    plan: PlanName
    next_plan: PlanName | None
    cycle_start: datetime
    cycle_end: datetime
    low_balance_credits: int | None
    overage_budget: int | None  # credits of overage a cycle may reach; None: no limit


class ProjectPatch(Body):
    name: Name | None = None
    chains: ChainIds | None = None  # a project holds one chain at least
    aa_module_enabled: Flag | None = None
    low_balance_credits: CreditThreshold | None = None
    overage_budget: CreditThreshold | None = None  # null: no spending budget


KeyName = Annotated[str, StringConstraints(max_length=100, strip_whitespace=True)]


class KeyOut(Wire):
    key_id: str
    environment: KeyEnvironment
    chains: list[int]
    role: KeyRole
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None = None  # to the minute
    name: str | None = None
    allowed_origins: list[str] = []  # empty: any origin
    allowed_client_addresses: list[str] = []  # IP addresses or networks; empty: any


class KeyCreate(Body):
    environment: KeyEnvironment = KeyEnvironment.TEST
    chains: ChainIds
    role: KeyRole = KeyRole.SERVICE  # admin keys administer the project; apps get service
    name: KeyName | None = None
    allowed_origins: list[str] | None = None
    allowed_client_addresses: list[str] | None = None


class KeyCreated(KeyOut):
    api_key: str  # shown once, never again


class KeyPatch(Body):
    chains: ChainIds | None = None
    role: KeyRole | None = None
    name: KeyName | None = None  # "" clears it
    # Each replaces the list; [] allows everything again.
    allowed_origins: list[str] | None = None
    allowed_client_addresses: list[str] | None = None


class PlanOut(Wire):
    name: PlanName
    monthly_price_micro_eur: int | None  # None: custom (ENTERPRISE)
    monthly_credits: int | None
    mainnet: bool
    support: str
    overage_micro_eur_per_credit: int


class PlanChange(Body):
    plan: PlanName


class LotOut(Wire):
    lot_id: str
    kind: str
    amount: int
    remaining: int
    granted_at: datetime
    expires_at: datetime
    expired: bool


class ForecastBasisOut(Wire):
    """What the forecast extrapolates from: the credits used in [windowStart, windowEnd),
    spread over `days` (the window, at least one day), at `creditsPerDay` to the cycle's end."""

    window_start: datetime
    window_end: datetime
    days: float
    credits: int
    credits_per_day: int
    method: str


class CreditsOut(Wire):
    balance: int
    plan: PlanName
    monthly_credits: int | None
    cycle_start: datetime
    cycle_end: datetime
    used_this_cycle: int
    overage_this_cycle: int
    consumption_per_day: int  # this cycle's average
    forecast_cycle_usage: int
    forecast_overage: int
    forecast_basis: ForecastBasisOut
    low_balance_threshold: int
    overage_budget: int | None = None  # the owner's spending budget; None: no limit
    lots: list[LotOut]


class UsageGroup(Wire):
    credits: int
    operations: int
    requests: int


class UsageOut(Wire):
    since: datetime
    until: datetime
    group_by: str
    groups: dict[str, UsageGroup]
    total_credits: int


class InvoiceOut(Wire):
    invoice_id: str
    plan: PlanName
    cycle_start: datetime
    cycle_end: datetime
    plan_price_micro_eur: int
    overage_credits: int
    overage_micro_eur: int
    total_micro_eur: int
    currency: str = "EUR"
    vat_included: bool = True


class AlertOut(Wire):
    alert_id: str
    kind: str
    cycle_start: datetime
    detail: str
    created_at: datetime


class AdminProjectCreate(Body):
    email: Email
    name: Name
    plan: PlanName = PlanName.FREE
    chains: ChainIds
    environment: KeyEnvironment = KeyEnvironment.TEST


class AdminKeyCreate(Body):
    """A key the operator issues to an existing project (e.g. one that lost its admin keys)."""

    environment: KeyEnvironment = KeyEnvironment.TEST
    chains: ChainIds
    role: KeyRole = KeyRole.SERVICE


class AdminProjectCreated(Wire):
    project_id: str
    api_key: str  # the project's first key: an admin key
    key_id: str
    role: KeyRole


class Purchase(Body):
    purchase_id: str = Field(min_length=1, max_length=50, pattern=r"^[A-Za-z0-9_.:-]+$")
    credits: Annotated[CreditAmount, Field(le=10**12)]  # a million euros in one purchase


class PurchaseOut(Wire):
    lot_id: str
    created: bool  # False: this purchase id was recorded before


class CycleCloseOut(Wire):
    invoices: list[InvoiceOut]
    failed_projects: list[str] = []  # could not be closed (logged); the next sweep retries


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)
