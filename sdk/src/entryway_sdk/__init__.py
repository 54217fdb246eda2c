"""Entryway's Python SDK: smart wallets, sponsored ERC-4337 UserOperations, guardians and
recovery, credits and webhooks, against an Entryway service.

    client = await Entryway.init(
        EntrywayOptions(api_key=..., rpc_url=..., chain_id=80002, base_url=...)
    )  # base_url omitted: the ENTRYWAY_URL environment variable
    wallet = await client.wallet(owner)            # an eth-account LocalAccount, or a Signer
    op = await wallet.send([{"to": a, "data": d}, {"to": b, "value": 1}])
    receipt = await op.wait()

    account = client.account(address, signer=personal_sign(owner))  # an existing v0.7 account
    receipt = await (await account.send({"to": a, "value": 1})).wait()

    n = await client.notarize_document(data, mode="direct")
    proof = await n.wait_for_proof()               # the entryway-proof/1 document
    result = await client.verify_proof(proof, data)  # offline and on chain
"""

from entryway_sdk.anchor_verification import verify_proof_on_chain
from entryway_sdk.calls import Call
from entryway_sdk.client import Entryway
from entryway_sdk.eip7702 import Authorization, authorization_digest, delegate_of
from entryway_sdk.eoa import SIMPLE_7702_ACCOUNT, Eip7702Account
from entryway_sdk.errors import (
    ApiError,
    ChainNotRecognisedError,
    Check,
    ConfigurationError,
    EntrywayError,
    InvalidApiKeyError,
    JsonRpcError,
    NetworkConnectionError,
    NetworkMismatchError,
    NotarizationFailedError,
    NotarizationTimeoutError,
    NotFoundError,
    PlanNetworkNotAllowedError,
    ProofFormatError,
    RateLimitedError,
    SignerRequiredError,
    SponsorshipRefusedError,
    UnsupportedProofError,
    UserOperationDroppedError,
    UserOperationRejectedError,
    UserOperationTimeoutError,
    ValidationError,
    WebhookVerificationError,
)
from entryway_sdk.existing_account import (
    ExistingAccount,
    simple_account_call_data,
    simple_account_encoder,
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
from entryway_sdk.notarization import (
    Anchor,
    BulkNotarization,
    Notarization,
    NotarizationItem,
    NotarizationStatus,
)
from entryway_sdk.operations import PendingUserOperation, SendOptions
from entryway_sdk.options import BASE_URL_ENV, EntrywayOptions
from entryway_sdk.proof import (
    PROOF_VERSION,
    Proof,
    ProofFailure,
    VerificationResult,
    document_hash,
    verify_proof,
)
from entryway_sdk.recovery import RecoveryApproval, sign_recovery_approval
from entryway_sdk.signer import (
    Signer,
    UserOpHashSigner,
    direct_sign,
    personal_sign,
    simple_account_signer,
)
from entryway_sdk.sync import EntrywaySync
from entryway_sdk.transport import RetryPolicy
from entryway_sdk.userop import (
    ENTRY_POINT_V06,
    ENTRY_POINT_V07,
    ENTRY_POINT_V08,
    ENTRY_POINT_V09,
    EntryPointVersion,
    UserOperation,
    entry_point_version,
    user_op_hash,
)
from entryway_sdk.wallet import SmartWallet
from entryway_sdk.webhooks import verify_webhook

__version__ = "0.1.0"

__all__ = [
    "BASE_URL_ENV",
    "ENTRY_POINT_V06",
    "ENTRY_POINT_V07",
    "ENTRY_POINT_V08",
    "ENTRY_POINT_V09",
    "PROOF_VERSION",
    "SIMPLE_7702_ACCOUNT",
    "AccountInfo",
    "Anchor",
    "ApiError",
    "Authorization",
    "BulkNotarization",
    "Call",
    "ChainNotRecognisedError",
    "Check",
    "ConfigurationError",
    "CreditLot",
    "Credits",
    "Eip7702Account",
    "EntryPointVersion",
    "Entryway",
    "EntrywayError",
    "EntrywayOptions",
    "EntrywaySync",
    "ExistingAccount",
    "GasPrice",
    "InvalidApiKeyError",
    "JsonRpcError",
    "NetworkConnectionError",
    "NetworkMismatchError",
    "NotFoundError",
    "Notarization",
    "NotarizationFailedError",
    "NotarizationItem",
    "NotarizationStatus",
    "NotarizationTimeoutError",
    "OpStatus",
    "PendingRecovery",
    "PendingUserOperation",
    "PlanNetworkNotAllowedError",
    "Proof",
    "ProofFailure",
    "ProofFormatError",
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
    "UnsupportedProofError",
    "UserOpHashSigner",
    "UserOperation",
    "UserOperationDroppedError",
    "UserOperationReceipt",
    "UserOperationRejectedError",
    "UserOperationTimeoutError",
    "ValidationError",
    "VerificationResult",
    "WebhookVerificationError",
    "authorization_digest",
    "delegate_of",
    "direct_sign",
    "document_hash",
    "entry_point_version",
    "personal_sign",
    "sign_recovery_approval",
    "simple_account_call_data",
    "simple_account_encoder",
    "simple_account_signer",
    "user_op_hash",
    "verify_proof",
    "verify_proof_on_chain",
    "verify_webhook",
]
