"""Entryway's Python SDK: smart wallets, sponsored ERC-4337 UserOperations, guardians and
recovery, credits and webhooks, against an Entryway service.

    client = await Entryway.init(api_key=..., rpc_url=..., chain_id=80002, base_url=...)
    wallet = await client.wallet(owner)            # an eth-account LocalAccount, or a Signer
    op = await wallet.send([{"to": a, "data": d}, {"to": b, "value": 1}])
    receipt = await op.wait()
"""

from entryway_sdk.calls import Call
from entryway_sdk.client import DEFAULT_BASE_URL, Entryway
from entryway_sdk.errors import (
    ApiError,
    ChainNotRecognisedError,
    Check,
    EntrywayError,
    InvalidApiKeyError,
    JsonRpcError,
    NetworkConnectionError,
    NetworkMismatchError,
    NotFoundError,
    PlanNetworkNotAllowedError,
    RateLimitedError,
    SignerRequiredError,
    SponsorshipRefusedError,
    UserOperationDroppedError,
    UserOperationRejectedError,
    UserOperationTimeoutError,
    ValidationError,
    WebhookVerificationError,
)
from entryway_sdk.models import (
    AccountInfo,
    CreditLot,
    Credits,
    GasPrice,
    OpStatus,
    PendingRecovery,
    SdkDefaults,
    TaskStatus,
    UserOperationReceipt,
)
from entryway_sdk.operations import PendingUserOperation, SendOptions
from entryway_sdk.recovery import RecoveryApproval, sign_recovery_approval
from entryway_sdk.signer import Signer
from entryway_sdk.sync import EntrywaySync
from entryway_sdk.transport import RetryPolicy
from entryway_sdk.userop import ENTRY_POINT_V08, UserOperation, user_op_hash
from entryway_sdk.wallet import SmartWallet
from entryway_sdk.webhooks import verify_webhook

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_BASE_URL",
    "ENTRY_POINT_V08",
    "AccountInfo",
    "ApiError",
    "Call",
    "ChainNotRecognisedError",
    "Check",
    "CreditLot",
    "Credits",
    "Entryway",
    "EntrywayError",
    "EntrywaySync",
    "GasPrice",
    "InvalidApiKeyError",
    "JsonRpcError",
    "NetworkConnectionError",
    "NetworkMismatchError",
    "NotFoundError",
    "OpStatus",
    "PendingRecovery",
    "PendingUserOperation",
    "PlanNetworkNotAllowedError",
    "RateLimitedError",
    "RecoveryApproval",
    "RetryPolicy",
    "SdkDefaults",
    "SendOptions",
    "Signer",
    "SignerRequiredError",
    "SmartWallet",
    "SponsorshipRefusedError",
    "TaskStatus",
    "UserOperation",
    "UserOperationDroppedError",
    "UserOperationReceipt",
    "UserOperationRejectedError",
    "UserOperationTimeoutError",
    "ValidationError",
    "WebhookVerificationError",
    "sign_recovery_approval",
    "user_op_hash",
    "verify_webhook",
]
