"""Plain explanations of refusals: what an EntryPoint `AAxx` code, an ERC-7562 rule id, a
paymaster or policy refusal means, and what to change. Pure: the same text goes into the
JSON-RPC error's `data.explanation`, the request log and the dashboard."""

from __future__ import annotations

import re
from collections.abc import Callable

from entryway.domain.revert_reasons import PANICS

# EntryPoint FailedOp reasons (v0.6-v0.9 share the numbering): meaning, then the fix.
AA_CODES: dict[str, tuple[str, str]] = {
    "AA10": ("the sender is already deployed", "drop initCode (factory) from the op"),
    "AA13": (
        "the factory's initCode failed or ran out of verificationGasLimit",
        "check the factory call, or raise verificationGasLimit",
    ),
    "AA14": (
        "the factory deployed an account at another address than the op's sender",
        "compute the sender with the factory's getAddress for the same owner and salt",
    ),
    "AA15": ("the factory did not deploy code at the sender", "check the factory call"),
    "AA20": (
        "the account is not deployed and the op carries no initCode",
        "add factory and factoryData so the first op deploys the account",
    ),
    "AA21": (
        "the account did not pay the prefund: its deposit plus balance is below the op's "
        "maximum cost",
        "fund the account (send native token to it or depositTo on the EntryPoint), or use "
        "a paymaster",
    ),
    "AA22": (
        "the op expired or is not valid yet (validUntil / validAfter)",
        "sign a fresh op with a later validUntil",
    ),
    "AA23": (
        "the account's validateUserOp reverted",
        "check the account's signature scheme and owner, and its revert reason below",
    ),
    "AA24": (
        "the signature does not match the account's owner",
        "sign the userOpHash of this chain and EntryPoint with the account's owner key",
    ),
    "AA25": (
        "the nonce is not the account's next nonce for that key",
        "read getNonce(sender, key) from the EntryPoint and use it; do not reuse a nonce",
    ),
    "AA26": (
        "verificationGasLimit is too low for the account's validation",
        "raise verificationGasLimit (eth_estimateUserOperationGas gives it)",
    ),
    "AA30": ("the paymaster is not deployed", "check the paymaster address for this chain"),
    "AA31": (
        "the paymaster's deposit on the EntryPoint is too low to pay for the op",
        "top up the paymaster's deposit (depositTo), or lower the op's gas limits",
    ),
    "AA32": (
        "the paymaster's signature expired or is not valid yet",
        "ask pm_getPaymasterData again and send the op at once",
    ),
    "AA33": (
        "the paymaster's validatePaymasterUserOp reverted",
        "ask pm_getPaymasterData again for this exact op (any field changed after signing "
        "breaks the paymaster's signature)",
    ),
    "AA34": (
        "the paymaster's signature does not match the op",
        "sign with pm_getPaymasterData after the op's last change, then send it unchanged",
    ),
    "AA36": (
        "paymasterVerificationGasLimit is too low for the paymaster's validation",
        "raise paymasterVerificationGasLimit (estimate the op with its paymaster fields)",
    ),
    "AA40": (
        "verificationGasLimit is above what the bundle can hold",
        "lower verificationGasLimit to what estimation gives",
    ),
    "AA41": ("too little verificationGasLimit", "raise verificationGasLimit"),
    "AA50": ("the paymaster's postOp reverted", "check the paymaster's postOp logic"),
    "AA51": (
        "the op's actual gas cost exceeded its prefund",
        "raise the gas limits the op is paid for",
    ),
    "AA90": ("the bundle's beneficiary is invalid", "a bundler issue: report it"),
    "AA93": ("the op's signature aggregator is invalid", "send the op without an aggregator"),
    "AA95": ("the bundle ran out of gas", "raise the op's gas limits, or retry"),
    "AA96": ("the signature aggregator is invalid", "send the op without an aggregator"),
}

# ERC-7562 rules the validation tracer reports: what the entity did, and the fix.
RULES: dict[str, tuple[str, str]] = {
    "OP-011": (
        "used a banned opcode{opcode} during validation",
        "read time, gas price, balances and block data in execution, not in validation",
    ),
    "OP-012": (
        "used GAS not followed by a call during validation",
        "use gasleft() only to forward gas to a call",
    ),
    "OP-013": ("used an unassigned opcode during validation", "compile for a supported EVM"),
    "OP-020": ("ran out of gas during validation", "raise the verification gas limit"),
    "OP-031": (
        "used CREATE2 other than to deploy the sender",
        "deploy only the sender, once, from the factory",
    ),
    "OP-032": ("used CREATE other than to deploy the sender", "deploy only the sender"),
    "OP-041": (
        "called or read the code of an address with no code during validation",
        "deploy the contract first, or do not touch it during validation",
    ),
    "OP-054": (
        "called the EntryPoint other than through depositTo or getNonce",
        "remove that call from validation",
    ),
    "OP-061": ("called with value during validation", "send no value during validation"),
    "OP-062": (
        "called an unsupported precompile during validation",
        "use only the core precompiles (0x01-0x09) during validation",
    ),
    "OP-080": (
        "used BALANCE or SELFBALANCE without stake",
        "stake the entity on the EntryPoint, or avoid the opcode",
    ),
    "STO-021": (
        "read storage associated with the sender from a contract without stake",
        "stake the entity, or read only the sender's own storage",
    ),
    "STO-022": (
        "accessed the sender's associated storage before the account was deployed",
        "deploy the account first, or stake the factory",
    ),
    "STO-031": (
        "accessed the storage of another entity without stake",
        "stake the entity whose storage it touches",
    ),
    "STO-040": (
        "used an address that is a sender in one op and an entity in another",
        "wait for the other op to be mined",
    ),
    "STO-041": (
        "touched the storage of another sender in the bundle",
        "wait for the other op to be mined",
    ),
    "COD-010": (
        "changed code between validation and the bundle",
        "do not deploy or self-destruct contracts validation depends on",
    ),
    "EREP-010": ("entity was throttled for too many pending ops", "wait for ops to be mined"),
    "EREP-015": ("entity was throttled after failing ops", "fix the failing ops, then wait"),
    "EREP-050": (
        "paymaster returned a context (a postOp to run) without stake",
        "stake the paymaster, or return an empty context",
    ),
    "GREP-040": ("entity is banned by the bundler's reputation", "wait and retry later"),
    "UREP-010": (
        "unstaked sender has too many pending ops (4 at most)",
        "wait for the pending ops to be mined, or stake the account",
    ),
    "UREP-020": (
        "unstaked factory or paymaster has more pending ops than its reputation allows",
        "wait for its pending ops to be mined, or stake it",
    ),
}

# Paymaster and sponsorship-policy refusals, by the rule the refusal names (`data.rule`).
POLICY_RULES: dict[str, str] = {
    "policy_unknown": "no sponsorship policy has that id in this project: check the "
    "sponsorshipPolicyId",
    "policy_inactive": "the policy is paused: activate it on the dashboard's Policies page",
    "policy_required": "this project sponsors only ops that name a policy: pass its id",
    "no_active_policy": "the project has no active sponsorship policy: create or activate one",
    "window_not_started": "the policy's time window has not begun: wait, or move its start",
    "window_ended": "the policy's time window is over: extend it on the Policies page",
    "unreadable_calls": "the policy limits targets but the op's callData is not an "
    "execute/executeBatch it can read: call through the account's execute",
    "allowed_targets": "the op calls a contract the policy does not allow: add it to the "
    "policy's allowed targets",
    "allowed_selectors": "the op calls a function the policy does not allow: add the "
    "selector to the policy",
    "spend_cap": "the policy's spending cap is reached: raise it or wait for its period to end",
    "operation_cap": "the policy's operation cap is reached: raise it or wait",
    "sender_spend_cap": "this sender reached its spending cap under the policy",
    "sender_operation_cap": "this sender reached its operation cap under the policy",
    "budget_exceeded": "the project's spending budget for this cycle is reached: raise the "
    "budget or buy credits",
}

BY_CODE: dict[int, str] = {
    -32501: "the paymaster refused the op",
    -32502: "the op broke an ERC-7562 validation rule",
    -32503: "the op's validity window is too short or not started: sign with a later validUntil",
    -32504: "an entity of the op is banned or throttled by reputation: wait and retry",
    -32505: "an unstaked sender, factory or paymaster of the op has as many ops pending as it "
    "may have unstaked: wait for them to be mined, or stake it on the EntryPoint",
    -32507: "the signature is invalid: sign the userOpHash for this chain and EntryPoint",
    -32508: "the paymaster's deposit is too low: top it up on the EntryPoint",
    -32521: "the op's callData reverted when simulated",
    -32601: "this method is not served: see the list of supported methods in the docs",
}

_AA = re.compile(r"\bAA(\d\d)\b")
_RULE = re.compile(r"\[((?:OP|STO|COD|EREP|GREP|UREP|SREP)-\d{3})\]")
_OPCODE = re.compile(r"opcode:? ([A-Z0-9]+)")
_PHASES = ("factory", "account", "paymaster")
_ERROR_STRING = bytes.fromhex("08c379a0")
_PANIC = bytes.fromhex("4e487b71")


def explain(
    code: int,
    message: str,
    data: object = None,
    decode_revert: Callable[[bytes], str | None] | None = None,
) -> str | None:
    """The plain explanation of a JSON-RPC error, with the fix; None when it needs none.
    `decode_revert` reads revert data with more ABIs known than Error(string) and Panic."""
    parts: list[str] = []
    aa = _AA.search(message)
    found = _RULE.search(message)
    rule = found.group(1) if found else None
    if isinstance(data, dict) and str(data.get("rule")) in RULES:
        rule = str(data["rule"])
    if aa is not None and f"AA{aa.group(1)}" in AA_CODES:
        meaning, fix = AA_CODES[f"AA{aa.group(1)}"]
        parts.append(f"AA{aa.group(1)}: {meaning}. Fix: {fix}.")
    elif rule in RULES:
        parts.append(_rule_text(rule, message))
    elif isinstance(data, dict) and str(data.get("rule")) in POLICY_RULES:
        parts.append(f"Sponsorship refused ({data['rule']}): {POLICY_RULES[str(data['rule'])]}.")
    elif code in BY_CODE:
        parts.append(f"{BY_CODE[code][0].upper()}{BY_CODE[code][1:]}.")
    if isinstance(data, dict) and isinstance(data.get("revertData"), str):
        reason = revert_reason(data["revertData"], decode_revert)
        if reason is not None:
            parts.append(f"Revert reason: {reason}.")
    return " ".join(parts) or None


def _rule_text(rule: str, message: str) -> str:
    meaning, fix = RULES[rule]
    first = message.split(" ", 1)[0]
    who = first if first in _PHASES else "entity"
    opcode = _OPCODE.search(message)
    meaning = meaning.format(opcode=f" ({opcode.group(1)})" if opcode else "")
    return f"{rule}: the {who} {meaning}. Fix: {fix}."


def revert_reason(
    revert_data: str, decode: Callable[[bytes], str | None] | None = None
) -> str | None:
    """A revert's reason: by `decode` when given, else where the ABI is standard
    (Error(string) and Panic(uint256))."""
    try:
        raw = bytes.fromhex(revert_data.removeprefix("0x"))
    except ValueError:
        return None
    if decode is not None:
        return decode(raw)
    if raw[:4] == _PANIC and len(raw) >= 36:
        value = int.from_bytes(raw[4:36], "big")
        return f"Panic(0x{value:02x}): {PANICS.get(value, 'unknown panic code')}"
    if raw[:4] == _ERROR_STRING and len(raw) >= 68:
        length = int.from_bytes(raw[36:68], "big")
        text = raw[68 : 68 + length]
        if len(text) == length:
            return f'Error("{text.decode("utf-8", "replace")}")'
    return None
