"""ERC-7562 validation rules, checked on a parsed validation trace. Pure: no I/O.

Rule ids are the ERC's; each violation names the rule, the entity and what it did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from entryway.bundler.errors import RpcErrorCode
from entryway.bundler.validation.trace import (
    CallAccess,
    CodeAccess,
    OpcodeUse,
    Phase,
    PhaseTrace,
    StorageAccess,
    ValidationTrace,
)
from entryway.domain.entry_points import EntryPointVersion
from entryway.domain.evm import address_bytes, keccak

# OP-011, plus the blob opcodes (environment, like BASEFEE).
BLOCKED_OPCODES = frozenset(
    {
        "ORIGIN", "GASPRICE", "BLOCKHASH", "COINBASE", "TIMESTAMP", "NUMBER", "PREVRANDAO",
        "DIFFICULTY", "GASLIMIT", "BASEFEE", "BLOBHASH", "BLOBBASEFEE", "CREATE", "INVALID",
        "SELFDESTRUCT",
    }
)  # fmt: skip
CALL_OPCODES = frozenset({"CALL", "CALLCODE", "DELEGATECALL", "STATICCALL"})
CORE_PRECOMPILES = frozenset(range(1, 10))  # OP-062: 0x01 .. 0x09
RIP7212_PRECOMPILE = 0x100
PRECOMPILE_RANGE_END = 0x1FF
ASSOCIATED_SLOT_SPAN = 128  # "keccak(A||x) + n, n in 0..128"
EMPTY_CODE_HASH = int.from_bytes(keccak(b""), "big")
DEPOSIT_TO_CALL_SIZE = 4 + 32  # depositTo(address)


@dataclass(frozen=True, slots=True)
class StakeInfo:
    stake: int
    unstake_delay_s: int


@dataclass(frozen=True, slots=True)
class RuleSettings:
    min_stake_wei: int
    min_unstake_delay_s: int = 86_400
    precompiles: frozenset[int] = CORE_PRECOMPILES
    # Where the rules differ by EntryPoint release (ERC-7562 as each release's mempool knows
    # it). v0.8: an unstaked paymaster may not return a context (EREP-050), and a staked
    # factory lets any entity touch the new sender's associated storage (STO-022). v0.7: the
    # context is allowed, and the staked factory does not cover an unstaked paymaster.
    paymaster_context_needs_stake: bool = True
    staked_factory_covers_paymaster: bool = True

    def for_version(self, version: EntryPointVersion) -> RuleSettings:
        """These settings with the rules of `version`'s mempool."""
        v07 = version is EntryPointVersion.V07
        v08 = version not in (EntryPointVersion.V06, EntryPointVersion.V07)
        # v0.6's mempool, like v0.8's, wants a paymaster returning a context staked.
        return replace(
            self, paymaster_context_needs_stake=not v07, staked_factory_covers_paymaster=v08
        )

    def is_staked(self, info: StakeInfo | None) -> bool:
        return (
            info is not None
            and info.stake >= self.min_stake_wei
            and info.unstake_delay_s >= self.min_unstake_delay_s
        )


@dataclass(frozen=True, slots=True)
class Entities:
    """Who is who in one UserOperation."""

    entry_point: str
    sender: str
    factory: str | None
    paymaster: str | None
    sender_stake: StakeInfo
    factory_stake: StakeInfo | None
    paymaster_stake: StakeInfo | None

    @property
    def sender_exists(self) -> bool:
        return self.factory is None

    def address_of(self, phase: Phase) -> str | None:
        return {Phase.FACTORY: self.factory, Phase.ACCOUNT: self.sender}.get(phase, self.paymaster)

    def stake_of(self, phase: Phase) -> StakeInfo | None:
        if phase is Phase.FACTORY:
            return self.factory_stake
        if phase is Phase.ACCOUNT:
            return self.sender_stake
        return self.paymaster_stake

    def all(self) -> set[str]:
        return {a for a in (self.sender, self.factory, self.paymaster) if a is not None}


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    code: RpcErrorCode
    phase: Phase
    message: str


class PreimagesNeeded(Exception):  # noqa: N818 - a signal, not an error
    """Raised when an associated-storage check needs the trace's KECCAK256 inputs."""


def _v(
    rule: str, phase: Phase, message: str, code: RpcErrorCode = RpcErrorCode.BANNED_OPCODE
) -> Violation:
    return Violation(rule, code, phase, f"{phase.value} {message} [{rule}]")


def check(
    trace: ValidationTrace,
    who: Entities,
    settings: RuleSettings,
    paymaster_context: bytes = b"",
) -> list[Violation]:
    """Every violation in the trace. Raises PreimagesNeeded if `trace.keccak_preimages` is
    missing and a storage access can only be judged by association."""
    found: list[Violation] = []
    needs_stake = settings.paymaster_context_needs_stake
    if paymaster_context and needs_stake and not settings.is_staked(who.paymaster_stake):
        # EREP-050: a context means postOp work the paymaster commits to; only with stake.
        found.append(_v("EREP-050", Phase.PAYMASTER, "returned a context without stake"))
    for phase, t in trace.phases.items():
        staked = settings.is_staked(who.stake_of(phase))
        found += _opcodes(t, who, staked, settings)
        found += _calls(t, who, settings)
        found += _code_accesses(t, who)
        found += _storage(t, who, settings, staked, trace.keccak_preimages)
    return found


def _opcodes(
    t: PhaseTrace, who: Entities, staked: bool, settings: RuleSettings
) -> Iterator[Violation]:
    creates = 0
    for use in t.opcodes:
        op = use.opcode
        if op in BLOCKED_OPCODES:
            if not _create_allowed(t, use, who, staked, settings):
                yield _v("OP-011", t.phase, f"uses banned opcode: {op}")
        elif op == "GAS" and use.next_opcode not in CALL_OPCODES:
            yield _v("OP-012", t.phase, "uses banned opcode: GAS (not right before a *CALL)")
        elif op in ("BALANCE", "SELFBALANCE") and not staked:
            yield _v("OP-080", t.phase, f"uses banned opcode: {op} (allowed only with stake)")
        elif op == "CREATE2":
            if t.phase is Phase.FACTORY and use.frame_address != who.sender:
                creates += 1
            elif not _create_allowed(t, use, who, staked, settings):
                yield _v("OP-031", t.phase, f"uses banned opcode: {op}")
        elif op not in ("GAS", "BALANCE", "SELFBALANCE"):
            yield _v("OP-013", t.phase, f"uses unassigned opcode {op}")
    if creates and not (staked and t.phase is Phase.FACTORY):
        if creates > 1:
            yield _v("OP-031", t.phase, f"uses banned opcode: CREATE2 {creates} times")
        elif t.created and t.created[0] != who.sender:
            yield _v("OP-031", t.phase, f"uses CREATE2 to deploy {t.created[0]}, not the sender")
    if t.out_of_gas:
        yield _v("OP-020", t.phase, f"ran out of gas in {t.out_of_gas[0]}")


def _create_allowed(
    t: PhaseTrace, use: OpcodeUse, who: Entities, staked: bool, settings: RuleSettings
) -> bool:
    """OP-032: with a factory (even unstaked) the sender's own code may CREATE, in its
    constructor or its validation; EREP-060: with a staked factory, the sender's own code or
    the factory itself may also CREATE2 (a utility contract they call may not)."""
    if use.opcode not in ("CREATE", "CREATE2"):
        return False
    if who.factory is not None and use.frame_address == who.sender:
        return use.opcode == "CREATE" or settings.is_staked(who.factory_stake)
    return t.phase is Phase.FACTORY and staked and use.frame_address == who.factory


def _calls(t: PhaseTrace, who: Entities, settings: RuleSettings) -> Iterator[Violation]:
    for call in t.calls:
        if call.target == who.entry_point:
            yield from _entry_point_call(t.phase, call, who)
            continue
        if call.value and call.opcode in ("CALL", "CALLCODE"):
            yield _v("OP-061", t.phase, f"calls {call.target} with value")
            continue
        number = int.from_bytes(address_bytes(call.target), "big")
        if 0 < number <= PRECOMPILE_RANGE_END:
            if number not in settings.precompiles:
                yield _v("OP-062", t.phase, f"calls unsupported precompile {call.target}")
            continue
        if not call.entered and not _sender_during_deployment(t.phase, call.target, who):
            yield _v("OP-041", t.phase, f"calls {call.target}, which has no code")


def _entry_point_call(phase: Phase, call: CallAccess, who: Entities) -> Iterator[Violation]:
    # OP-052 / OP-053: depositTo, or a plain value transfer to the fallback. The calling frame
    # may be a helper of the sender's (the reference bundler allows it, and so does the
    # conformance suite): what matters is that nothing else of the EntryPoint is used.
    if call.opcode == "CALL" and call.args_size in (0, DEPOSIT_TO_CALL_SIZE):
        return
    yield _v("OP-054", phase, "accesses the EntryPoint other than depositTo or the fallback")


def _code_accesses(t: PhaseTrace, who: Entities) -> Iterator[Violation]:
    for access in t.code_accesses:
        if access.target == who.entry_point:
            if access.opcode == "EXTCODESIZE" and access.next_opcode == "ISZERO":
                continue  # OP-051
            yield _v("OP-054", t.phase, f"uses {access.opcode} on the EntryPoint")
        elif _has_no_code(access) and not _sender_during_deployment(t.phase, access.target, who):
            yield _v(
                "OP-041", t.phase, f"uses {access.opcode} on {access.target}, which has no code"
            )


def _has_no_code(access: CodeAccess) -> bool:
    """EXTCODESIZE and EXTCODECOPY results are a code size; EXTCODEHASH's is a hash."""
    if access.result is None:
        return False
    if access.opcode == "EXTCODEHASH":
        return access.result in (0, EMPTY_CODE_HASH)
    return access.result == 0


def _sender_during_deployment(phase: Phase, target: str, who: Entities) -> bool:
    return target == who.sender and phase is Phase.FACTORY  # OP-042


def _storage(
    t: PhaseTrace,
    who: Entities,
    settings: RuleSettings,
    staked: bool,
    preimages: Sequence[bytes] | None,
) -> Iterator[Violation]:
    entity = who.address_of(t.phase)
    entities = who.all()
    for access in t.storage:
        owner = access.address
        if owner in (who.entry_point, who.sender):
            continue  # the EntryPoint's own bookkeeping; STO-010
        if owner == entity:
            if not staked:
                yield _v(
                    "STO-031",
                    t.phase,
                    f"accesses its own storage (slot {hex(access.slot)}) without stake",
                    RpcErrorCode.BANNED_OPCODE,
                )
            continue
        if owner in entities:
            yield _v("STO-031", t.phase, f"accesses the storage of entity {owner}")
            continue
        yield from _non_entity_storage(t.phase, access, who, settings, staked, entity, preimages)


def _non_entity_storage(
    phase: Phase,
    access: StorageAccess,
    who: Entities,
    settings: RuleSettings,
    staked: bool,
    entity: str | None,
    preimages: Sequence[bytes] | None,
) -> Iterator[Violation]:
    if staked and not access.write:
        return  # STO-033: read-only access by a staked entity
    if preimages is None:
        raise PreimagesNeeded
    if _is_associated(access.slot, who.sender, preimages):
        covered = settings.is_staked(who.factory_stake) and (
            settings.staked_factory_covers_paymaster or phase is not Phase.PAYMASTER or staked
        )
        if who.sender_exists or covered:
            return  # STO-021 / STO-022
        yield _v(
            "STO-022",
            phase,
            f"accesses the sender's associated storage in {access.address} before the account "
            "exists, with an unstaked factory",
            RpcErrorCode.BANNED_OPCODE,
        )
        return
    if entity is not None and staked and _is_associated(access.slot, entity, preimages):
        return  # STO-032
    kind = "writes" if access.write else "reads"
    yield _v(
        "STO-021",
        phase,
        f"{kind} unassociated storage of {access.address} (slot {hex(access.slot)})",
    )


def _is_associated(slot: int, address: str, preimages: Sequence[bytes]) -> bool:
    value = int.from_bytes(address_bytes(address), "big")
    if slot == value:
        return True
    padded = value.to_bytes(32, "big")
    for preimage in preimages:
        if len(preimage) >= 32 and preimage[:32] == padded:
            base = int.from_bytes(keccak(preimage), "big")
            if 0 <= slot - base <= ASSOCIATED_SLOT_SPAN:
                return True
    return False
