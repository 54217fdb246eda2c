"""The tables, as SQLAlchemy Core: readable SQL, no ORM session state to leak between use
cases. Money, credits and gas are integers (BIGINT); times are UTC."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ix": "ix_%(table_name)s_%(column_0_name)s",
    }
)

users = Table(
    "users",
    metadata,
    Column("user_id", String(36), primary_key=True),
    Column("email", String(320), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Dashboard sign-in: an argon2 hash (None: the user cannot sign in, e.g. a project made
    # by the operator API for an email nobody has signed up with yet).
    Column("password_hash", String(200), nullable=True),
    Column("is_operator", Boolean, nullable=False, server_default=false()),
    # No longer written: sign-in attempts are throttled per client address in memory, and
    # no account is locked (docs/security.md). Kept so that the schema needs no migration.
    Column("failed_sign_ins", Integer, nullable=False, server_default="0"),
    Column("locked_until", DateTime(timezone=True), nullable=True),
)

# A signed-in browser. The cookie carries a random id; only its SHA-256 is kept here.
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("session_digest", String(64), primary_key=True),
    Column("user_id", String(36), ForeignKey("users.user_id"), nullable=True),  # None: operator
    Column("operator", Boolean, nullable=False),
    Column("csrf_token", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_seen_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_dashboard_sessions_user_id", "user_id"),
)

projects = Table(
    "projects",
    metadata,
    Column("project_id", String(36), primary_key=True),
    Column("owner_id", String(36), ForeignKey("users.user_id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("plan", String(20), nullable=False),
    Column("aa_module_enabled", Boolean, nullable=False),
    Column("chains", Text, nullable=False),  # comma-separated chain ids
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Billing: the current cycle, its overage so far, a plan change waiting for the next cycle.
    Column("cycle_started_at", DateTime(timezone=True), nullable=True),  # None: created_at
    Column("cycle_overage", BigInteger, nullable=False, server_default="0"),
    Column("next_plan", String(20), nullable=True),
    Column("low_balance_credits", BigInteger, nullable=True),  # None: a tenth of the grant
    # The owner's spending budget: the most overage a cycle may reach through sponsorship
    # holds. None: no limit, overage is never refused.
    Column("overage_budget", BigInteger, nullable=True),
    # ENTERPRISE terms per project (None: the service-wide configured values).
    Column("enterprise_monthly_micro_eur", BigInteger, nullable=True),
    Column("enterprise_monthly_credits", BigInteger, nullable=True),
)

# Who may open a project in the dashboard: its owners and members.
memberships = Table(
    "memberships",
    metadata,
    Column("project_id", String(36), ForeignKey("projects.project_id"), primary_key=True),
    Column("user_id", String(36), ForeignKey("users.user_id"), primary_key=True),
    Column("role", String(8), nullable=False),  # owner | member
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_memberships_user_id", "user_id"),
)

# An invitation link to a project: whoever opens it signed in joins with `role`. The link
# carries a random token; only its SHA-256 is kept here.
invitations = Table(
    "invitations",
    metadata,
    Column("invitation_digest", String(64), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("email", String(320), nullable=False),  # whom it was meant for, as shown
    Column("role", String(8), nullable=False),
    Column("invited_by", String(36), ForeignKey("users.user_id"), nullable=True),  # None: operator
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("accepted_by", String(36), ForeignKey("users.user_id"), nullable=True),
    Column("accepted_at", DateTime(timezone=True), nullable=True),
    Index("ix_invitations_project_id", "project_id"),
)

# A paid plan change or credit pack waiting for the operator (no payment provider yet).
approvals = Table(
    "approvals",
    metadata,
    Column("approval_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("kind", String(16), nullable=False),  # plan_change | credit_pack
    Column("subject", String(40), nullable=False),  # the plan or the pack asked for
    Column("requested_by", String(80), nullable=False),  # "user:<id>" | "key:<id>"
    Column("status", String(10), nullable=False),  # pending | approved | rejected
    Column("requested_at", DateTime(timezone=True), nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=True),
    Column("decided_by", String(80), nullable=True),
    Column("note", Text, nullable=True),
    Index("ix_approvals_status", "status", "requested_at"),
    Index("ix_approvals_project_id", "project_id", "requested_at"),
)

support_requests = Table(
    "support_requests",
    metadata,
    Column("request_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=True),
    Column("user_id", String(36), ForeignKey("users.user_id"), nullable=False),
    Column("topic", String(40), nullable=False),
    Column("message", Text, nullable=False),
    Column("details", Text, nullable=True),  # JSON: the topic's own fields
    Column("status", String(10), nullable=False),  # open | answered
    Column("answer", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("answered_at", DateTime(timezone=True), nullable=True),
    # The support level filed under: community | priority | sla_and_dedicated_account_manager
    Column("support_level", String(40), nullable=False, server_default="community"),
    Column("answered_by", String(320), nullable=True),  # the operator's email, or the token
    Column("overdue_noted_at", DateTime(timezone=True), nullable=True),  # alerted once
    Index("ix_support_requests_status", "status", "created_at"),
)

# Chains the operator has put under maintenance: ops on them are refused meanwhile.
chain_maintenance = Table(
    "chain_maintenance",
    metadata,
    Column("chain_id", BigInteger, primary_key=True),
    Column("reason", Text, nullable=True),
    Column("since", DateTime(timezone=True), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", String(8), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("environment", String(4), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("chains", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    # `service` or `admin` (KeyRole). No default: a key is always issued with its role.
    Column("role", String(8), nullable=False),
    # When the key last authenticated a request, written at most once a minute per process.
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("name", String(100), nullable=True),
    # Where the key may be used from (domain.key_allowlist), JSON lists; null: anywhere.
    Column("allowed_origins", Text, nullable=True),
    Column("allowed_clients", Text, nullable=True),
    Index("ix_api_keys_project_id", "project_id"),
)

credit_lots = Table(
    "credit_lots",
    metadata,
    Column("lot_id", String(64), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("remaining", BigInteger, nullable=False),
    Column("granted_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Index("ix_credit_lots_project_id", "project_id", "granted_at"),
)

usage_events = Table(
    "usage_events",
    metadata,
    Column("event_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("idempotency_key", String(200), nullable=False),
    Column("operation", String(40), nullable=False),
    Column("credits", BigInteger, nullable=False),
    Column("overage", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Who and where: the key (None for the service's own work, e.g. webhook delivery), the
    # endpoint, the chain, the subject (a sender or wallet address) and the policy that paid.
    Column("key_id", String(8), nullable=True),
    Column("endpoint", String(100), nullable=True),
    Column("chain_id", BigInteger, nullable=True),
    Column("subject", String(66), nullable=True),
    Column("policy_id", String(36), nullable=True),
    # held (an estimate, sponsored but not mined), settled (final), released (never landed).
    Column("status", String(10), nullable=False, server_default="settled"),
    Column("breakdown", Text, nullable=True),  # the quote's components, JSON
    Column("settled_at", DateTime(timezone=True), nullable=True),
    # What the charge was for, when a client may ask: a userOpHash (its relay and its
    # sponsorship carry the same one).
    Column("reference", String(66), nullable=True),
    UniqueConstraint("project_id", "idempotency_key", name="uq_usage_events_idempotency"),
    Index("ix_usage_events_project_id", "project_id", "created_at"),
    Index("ix_usage_events_reference", "project_id", "reference"),
)

# Which lots paid for which event: a hold's release or settlement gives credit back to them.
usage_draws = Table(
    "usage_draws",
    metadata,
    Column("event_id", String(36), ForeignKey("usage_events.event_id"), primary_key=True),
    Column("lot_id", String(64), ForeignKey("credit_lots.lot_id"), primary_key=True),
    Column("credits", BigInteger, nullable=False),
)

# Where a settled sponsorship's op was mined (`storage.ledger_reorgs`): the block its receipt
# was in, so that a reorg removing that block reverses the settlement (`reversal_event_id`,
# an explicit entry), and so that the credits count as final once the block is deep enough.
op_inclusions = Table(
    "op_inclusions",
    metadata,
    Column("event_id", String(36), ForeignKey("usage_events.event_id"), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("chain_id", BigInteger, nullable=False),
    Column("user_op_hash", String(66), nullable=False),
    Column("hold_key", String(200), nullable=False),  # the sponsorship hold it settled
    Column("block_number", BigInteger, nullable=False),
    Column("transaction_hash", String(66), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("final", Boolean, nullable=False, server_default=false()),
    Column("reversal_event_id", String(36), nullable=True),
    Index("ix_op_inclusions_chain_id", "chain_id", "block_number"),
    Index("ix_op_inclusions_project_id", "project_id", "hold_key"),
)

# Free reads are counted, not charged one by one: per key, endpoint, chain and UTC day.
request_counts = Table(
    "request_counts",
    metadata,
    Column("project_id", String(36), ForeignKey("projects.project_id"), primary_key=True),
    Column("key_id", String(8), primary_key=True),
    Column("endpoint", String(100), primary_key=True),
    Column("chain_id", BigInteger, primary_key=True),  # 0: no chain
    Column("day", String(10), primary_key=True),  # YYYY-MM-DD
    Column("requests", BigInteger, nullable=False),
    Column("credits", BigInteger, nullable=False),
)

invoices = Table(
    "invoices",
    metadata,
    Column("invoice_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("plan", String(20), nullable=False),
    Column("cycle_start", DateTime(timezone=True), nullable=False),
    Column("cycle_end", DateTime(timezone=True), nullable=False),
    Column("plan_price_micro_eur", BigInteger, nullable=False),
    Column("overage_credits", BigInteger, nullable=False),
    Column("overage_micro_eur", BigInteger, nullable=False),
    Column("total_micro_eur", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("project_id", "cycle_start", name="uq_invoices_cycle"),
)

# At most one alert of a kind per project and cycle (credits.low, credits.overage, ...).
alerts = Table(
    "alerts",
    metadata,
    Column("alert_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("cycle_start", DateTime(timezone=True), nullable=False),
    Column("detail", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("project_id", "kind", "cycle_start", name="uq_alerts_once_per_cycle"),
)

# Sponsorship policies: the rules are a JSON document the paymaster's domain validates.
sponsorship_policies = Table(
    "sponsorship_policies",
    metadata,
    Column("policy_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("rules", Text, nullable=False),
    Column("active", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=True),
    Index("ix_sponsorship_policies_project_id", "project_id"),
)

# --- Durable tasks and webhooks (entryway.storage.tasks, entryway.storage.webhooks) ---

# A task queue: claimed under a lease that expires, retried with backoff, dead-lettered at last.
tasks = Table(
    "tasks",
    metadata,
    Column("task_id", String(36), primary_key=True),
    Column("kind", String(60), nullable=False),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=True),
    Column("payload", Text, nullable=False),  # JSON object
    Column("state", String(10), nullable=False),  # queued, running, succeeded, dead
    Column("attempts", BigInteger, nullable=False),
    Column("max_attempts", BigInteger, nullable=False),
    Column("run_at", DateTime(timezone=True), nullable=False),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("idempotency_key", String(200), nullable=True),
    Column("result", Text, nullable=True),  # JSON
    Column("error", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("kind", "idempotency_key", name="uq_tasks_idempotency"),
    Index("ix_tasks_ready", "state", "run_at"),
    Index("ix_tasks_project_id", "project_id", "created_at"),
)

webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("endpoint_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("url", Text, nullable=False),
    Column("description", String(200), nullable=False),
    Column("event_types", Text, nullable=False),  # comma-separated
    Column("secret", String(100), nullable=False),
    # After a rotation the old secret still signs, beside the new one, until it expires.
    Column("previous_secret", String(100), nullable=True),
    Column("previous_secret_expires_at", DateTime(timezone=True), nullable=True),
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", String(20), nullable=True),  # manual, gone, failing
    Column("disabled_at", DateTime(timezone=True), nullable=True),
    Column("failure_streak", BigInteger, nullable=False),  # failed attempts since a success
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("deleted_at", DateTime(timezone=True), nullable=True),
    Index("ix_webhook_endpoints_project_id", "project_id"),
)

# One row per event that had at least one subscriber; its body is what every endpoint gets.
webhook_events = Table(
    "webhook_events",
    metadata,
    Column("event_id", String(40), primary_key=True),  # the webhook-id header
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("event_type", String(60), nullable=False),
    Column("body", Text, nullable=False),
    Column("idempotency_key", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("project_id", "idempotency_key", name="uq_webhook_events_idempotency"),
)

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("delivery_id", String(36), primary_key=True),
    Column("event_id", String(40), ForeignKey("webhook_events.event_id"), nullable=False),
    Column("endpoint_id", String(36), ForeignKey("webhook_endpoints.endpoint_id"), nullable=False),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("state", String(10), nullable=False),  # pending, delivered, failed, skipped
    Column("attempts", BigInteger, nullable=False),
    Column("replays", BigInteger, nullable=False),
    Column("task_id", String(36), nullable=True),  # the latest delivery task
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("delivered_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event"),
    Index("ix_webhook_deliveries_endpoint_id", "endpoint_id", "created_at"),
)

# The delivery log: every attempt, with its status code or error and how long it took.
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("attempt_id", String(36), primary_key=True),
    Column("delivery_id", String(36), ForeignKey("webhook_deliveries.delivery_id"), nullable=False),
    Column("number", BigInteger, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("duration_ms", BigInteger, nullable=True),
    Column("status_code", BigInteger, nullable=True),
    Column("error", Text, nullable=True),
    # in_flight, succeeded, failed, gone, interrupted (its worker died mid-attempt)
    Column("outcome", String(12), nullable=False),
    Index("ix_webhook_attempts_delivery_id", "delivery_id", "number"),
)

# --- Notarization (entryway.storage.notary) ---

# A Merkle tree whose root is anchored in NotaryAnchor in one transaction: a batch of pending
# hashes of one chain (mode batched), or one hash alone (mode direct). Its leaves are its
# notarizations in leaf_index order.
notary_batches = Table(
    "notary_batches",
    metadata,
    Column("batch_id", String(36), primary_key=True),
    Column("chain_id", BigInteger, nullable=False),
    Column("mode", String(10), nullable=False),  # batched, direct
    Column("state", String(10), nullable=False),  # sealed, anchored, failed
    Column("leaf_count", BigInteger, nullable=False),
    # The anchor, once recorded: the root, NotaryAnchor's address and the transaction.
    Column("root", String(66), nullable=True),
    Column("contract", String(42), nullable=True),
    Column("transaction_hash", String(66), nullable=True),
    Column("block_number", BigInteger, nullable=True),
    Column("block_time", BigInteger, nullable=True),  # Unix seconds
    Column("task_id", String(36), nullable=True),  # the anchoring task
    # How often a reorg removed its anchor's block and it was anchored again.
    Column("reanchors", Integer, nullable=False, server_default="0"),
    Column("error", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("anchored_at", DateTime(timezone=True), nullable=True),
    Index("ix_notary_batches_chain_id", "chain_id", "state"),
)

# One submitted hash (or document, by its SHA-256). Pending while batch_id is None (waiting
# for a batch) or its batch is sealed; anchored or failed with its batch.
notarizations = Table(
    "notarizations",
    metadata,
    Column("notarization_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("key_id", String(8), nullable=True),
    Column("chain_id", BigInteger, nullable=False),
    Column("mode", String(10), nullable=False),  # batched, direct
    Column("kind", String(10), nullable=False),  # hash, document
    Column("document_hash", String(66), nullable=False),  # 0x + sha256, lower-case hex
    Column("data_bytes", BigInteger, nullable=False),  # the document's size; 32 for a hash
    Column("label", String(200), nullable=True),
    Column("metadata_json", Text, nullable=True),
    Column("filename", String(255), nullable=True),
    Column("content_type", String(200), nullable=True),
    Column("stored", Boolean, nullable=False),  # the document is kept in notary_documents
    Column("idempotency_key", String(200), nullable=True),
    # SHA-256 (hex) of the request that wrote the row: the same key with another digest is
    # another request, refused (NULL for rows written before migration 0008).
    Column("request_digest", String(64), nullable=True),
    Column("batch_id", String(36), ForeignKey("notary_batches.batch_id"), nullable=True),
    Column("leaf_index", BigInteger, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("project_id", "idempotency_key", name="uq_notarizations_idempotency"),
    Index("ix_notarizations_project_id", "project_id", "created_at"),
    Index("ix_notarizations_batch_id", "batch_id", "chain_id", "created_at"),
)

# Documents kept at the project's request (store: true), in the database with their record.
notary_documents = Table(
    "notary_documents",
    metadata,
    Column(
        "notarization_id",
        String(36),
        ForeignKey("notarizations.notarization_id"),
        primary_key=True,
    ),
    Column("content", LargeBinary, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# --- Smart-wallet recoveries (entryway.storage.recoveries) ---

# A recovery the service runs for a project: the guardians' approvals are collected here, then
# it submits startRecovery and, after the account's delay, finalizeRecovery; each step keeps
# its task, the op it submitted (JSON) and the transaction that mined it.
wallet_recoveries = Table(
    "wallet_recoveries",
    metadata,
    Column("recovery_id", String(36), primary_key=True),
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("key_id", String(8), nullable=True),
    Column("chain_id", BigInteger, nullable=False),
    Column("account", String(42), nullable=False),
    Column("new_owner", String(42), nullable=False),
    Column("recovery_nonce", BigInteger, nullable=False),  # the approvals bind to it
    Column("threshold", BigInteger, nullable=False),
    Column("guardians", Text, nullable=False),  # comma-separated, when it was opened
    # collecting, starting, started, finalized, cancelled, failed
    Column("state", String(12), nullable=False),
    Column("start_task_id", String(36), nullable=True),
    Column("start_user_op_hash", String(66), nullable=True),
    Column("start_submission", Text, nullable=True),
    Column("start_tx_hash", String(66), nullable=True),
    Column("finalize_task_id", String(36), nullable=True),
    Column("finalize_user_op_hash", String(66), nullable=True),
    Column("finalize_submission", Text, nullable=True),
    Column("finalize_tx_hash", String(66), nullable=True),
    Column("execute_after", BigInteger, nullable=True),  # chain time, Unix seconds
    Column("failure_reason", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index("ix_wallet_recoveries_project_id", "project_id", "chain_id", "account"),
)

# A guardian's EIP-712 approval of a recovery (65-byte signature, 0x-hex), one per guardian.
wallet_recovery_approvals = Table(
    "wallet_recovery_approvals",
    metadata,
    Column(
        "recovery_id",
        String(36),
        ForeignKey("wallet_recoveries.recovery_id"),
        primary_key=True,
    ),
    Column("guardian", String(42), primary_key=True),
    Column("signature", String(132), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# --- The durable op intake (entryway.storage.intake) ---

# A UserOperation the service accepted (every one takes this path): written with
# its relay charge before its hash is returned, read by the chain's elected bundler leader,
# which writes back what became of it (state: pending, submitted, included, failed, dropped).
op_intake = Table(
    "op_intake",
    metadata,
    Column("chain_id", BigInteger, primary_key=True),
    Column("user_op_hash", String(66), primary_key=True),
    Column("entry_point", String(42), nullable=False),
    Column("sender", String(42), nullable=False),
    Column("nonce", String(78), nullable=False),  # uint256, decimal
    Column("user_op", Text, nullable=False),  # ERC-4337 JSON (domain.userop_json)
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=True),
    Column("state", String(12), nullable=False),
    Column("reason", Text, nullable=True),
    Column("tx_hash", String(66), nullable=True),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # The API's validation (bundler.validation.outcome_json) and the head block it validated
    # at: the leader admits a fresh one without simulating the op again. Null: validate again.
    Column("validation", Text, nullable=True),
    Column("validated_block", BigInteger, nullable=True),
    # The sends of the op's bundle as the leader last wrote them, fee bumps included (JSON
    # list of {txHash, maxFeePerGas, maxPriorityFeePerGas, at}); null: not sent yet.
    Column("attempts", Text, nullable=True),
    Index("ix_op_intake_pending", "chain_id", "state", "received_at"),
)

# --- Sponsorship signatures and the chain's paymaster events (entryway.storage.signatures) ---

# Every paymaster signature the service returned: which project it was given to and which hold
# it draws on, written before the signature leaves the service. A UserOperationEvent naming
# our paymaster is charged to that project whoever submitted the op; once mined, where.
sponsorship_signatures = Table(
    "sponsorship_signatures",
    metadata,
    Column("signature_id", String(36), primary_key=True),
    Column("chain_id", BigInteger, nullable=False),
    Column("entry_point", String(42), nullable=False),
    # Null only for an EIP-7702 op whose delegate was not known at signing (found by sender
    # and nonce then).
    Column("user_op_hash", String(66), nullable=True),
    Column("sender", String(42), nullable=False),  # lower-case
    Column("nonce", String(78), nullable=False),  # uint256, decimal
    Column("project_id", String(36), ForeignKey("projects.project_id"), nullable=False),
    Column("hold_key", String(200), nullable=False),
    Column("user_op", Text, nullable=False),  # ERC-4337 JSON (domain.userop_json), as signed
    Column("valid_until", BigInteger, nullable=False),  # unix seconds, as signed
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Set when its UserOperationEvent is seen: the block and transaction, and whether it came
    # through this service ("entryway") or around it ("external").
    Column("block_number", BigInteger, nullable=True),
    Column("transaction_hash", String(66), nullable=True),
    Column("submitted_by", String(12), nullable=True),
    UniqueConstraint("chain_id", "user_op_hash", name="uq_sponsorship_signatures_hash"),
    Index("ix_sponsorship_signatures_sender", "chain_id", "sender", "nonce"),
    Index("ix_sponsorship_signatures_hold", "project_id", "hold_key"),
)

# How far each chain's paymaster events have been read: the next block to read, and the
# newest block read that is also final (its number and timestamp), before which a signature
# whose validUntil has passed can no longer be mined.
paymaster_event_cursors = Table(
    "paymaster_event_cursors",
    metadata,
    Column("chain_id", BigInteger, primary_key=True),
    Column("next_block", BigInteger, nullable=False),
    Column("final_block", BigInteger, nullable=False),
    Column("final_time", BigInteger, nullable=False),  # unix seconds
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# --- Bundler leader leases (entryway.storage.leader_lock, on SQLite) ---

# Who leads a chain's bundling (key: storage.leader_lock.leader_key, as text): the holder
# ("host:pid:nonce") renews expires_at while it leads; another may take the row once that
# has passed, or at once when the holder is a dead process on the same host.
leader_leases = Table(
    "leader_leases",
    metadata,
    Column("lease_key", String(24), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# Every call a project makes, as its request log shows it; bounded per project per minute and
# pruned by the plan's retention (storage/request_log.py).
request_log = Table(
    "request_log",
    metadata,
    Column("entry_id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("project_id", String(36), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("key_prefix", String(16), nullable=False),
    Column("chain_id", BigInteger, nullable=True),
    Column("method", String(100), nullable=False),  # JSON-RPC method, or "GET /v1/route"
    Column("outcome", String(8), nullable=False),  # ok | error
    Column("http_status", Integer, nullable=False),
    Column("rpc_code", Integer, nullable=True),
    Column("message", Text, nullable=True),
    Column("explanation", Text, nullable=True),
    Column("latency_us", BigInteger, nullable=False),
    Column("sender", String(42), nullable=True),
    Column("nonce", String(66), nullable=True),
    Column("user_op_hash", String(66), nullable=True),
    Column("calls", Integer, nullable=False, server_default="1"),  # >1: an over-cap summary
    Index("ix_request_log_project_id", "project_id", "entry_id"),
    Index("ix_request_log_op", "project_id", "user_op_hash"),  # a refused op's page
    Index("ix_request_log_at", "at"),
)
