"""Why the recovery use cases refuse a request: each refusal has an HTTP status and a stable
`code`, which the API answers as problem+json (docs/wallets.md lists them)."""

from __future__ import annotations

from entryway.errors import EntrywayError
from entryway.wallets.recovery import Recovery


class RecoveryError(EntrywayError):
    def __init__(self, status: int, code: str, title: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.title, self.detail = status, code, title, detail


def not_found(recovery_id: str) -> RecoveryError:
    return RecoveryError(
        404, "recovery_not_found", "Recovery not found", f"no recovery {recovery_id}"
    )


def in_progress(running: Recovery) -> RecoveryError:
    return RecoveryError(
        409, "recovery_in_progress", "A recovery is in progress",
        f"recovery {running.recovery_id} of {running.account} is {running.state.value}",
    )  # fmt: skip


def not_a_smart_account(detail: str) -> RecoveryError:
    return RecoveryError(422, "not_a_smart_account", "Not a smart account", detail)


def invalid_new_owner(account: str, new_owner: str) -> RecoveryError:
    return RecoveryError(
        422, "invalid_new_owner", "Invalid new owner",
        f"{new_owner} cannot become the owner of {account}: it is the zero address, the account "
        "itself or its current owner",
    )  # fmt: skip


def pending_on_chain(account: str, pending_new_owner: str | None) -> RecoveryError:
    return RecoveryError(
        409, "recovery_pending", "A recovery is pending on chain",
        f"{account} has a pending recovery to {pending_new_owner}",
    )  # fmt: skip


def no_guardians(account: str) -> RecoveryError:
    return RecoveryError(
        422, "no_guardians", "The account has no guardians",
        f"{account} has no guardians: it cannot be recovered",
    )  # fmt: skip


def not_collecting(recovery: Recovery) -> RecoveryError:
    return RecoveryError(
        409, "recovery_not_collecting", "Approvals are closed",
        f"recovery {recovery.recovery_id} is {recovery.state.value}: it takes no more approvals",
    )  # fmt: skip


def invalid_signature(detail: str) -> RecoveryError:
    return RecoveryError(422, "invalid_signature", "Invalid signature", detail)


def not_the_guardians_approval(recovery: Recovery, guardian: str) -> RecoveryError:
    return invalid_signature(
        f"the signature is not {guardian}'s EIP-712 RecoveryApproval of {recovery.new_owner} "
        f"for {recovery.account} (recovery nonce {recovery.recovery_nonce}, chain "
        f"{recovery.chain_id}); sign the typed data this recovery shows"
    )


def not_a_guardian(recovery: Recovery, guardian: str) -> RecoveryError:
    return RecoveryError(
        422, "not_a_guardian", "Not a guardian",
        f"{guardian} is not a guardian of {recovery.account} on chain {recovery.chain_id}",
    )  # fmt: skip


def stale(recovery: Recovery, nonce_now: int) -> RecoveryError:
    return RecoveryError(
        409, "recovery_stale", "The recovery is stale",
        f"{recovery.account}'s recovery nonce is now {nonce_now}, not "
        f"{recovery.recovery_nonce}: the approvals are void; open a new recovery",
    )  # fmt: skip
