"""The webhook delivery handler: one attempt of one delivery per run of its task.

Each attempt is logged before the request goes out and completed after, with the status code
or error and the duration. A 2xx delivers (and charges the project once per delivery, however
many times the task runs); 410 Gone disables the endpoint for good; any other answer, a
timeout or a connection error is retried on the delivery schedule, and a delivery whose last
attempt fails disables its endpoint. Disabling raises an alert through the EndpointAlerts port.

The HTTP client is expected to check destinations (entryway.worker.destinations): a refused
one (a forbidden address, or a name that does not resolve) is logged as `refused`, with one
text for every refusal and nothing sent, so the log cannot tell a tenant which internal names,
addresses or ports exist; the operator's log keeps the reason. It is retried like a failure (DNS
may be corrected, or the operator may allow private destinations). No error of the URL or the
name ends the task abnormally: each is a failed attempt with a reason.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import httpx

from entryway import __version__
from entryway.domain.destinations import (
    PUBLIC_ONLY,
    DestinationNotAllowedError,
    DestinationPolicy,
)
from entryway.domain.pricebook import OperationType, PriceBook
from entryway.domain.tasks import PermanentTaskError, RetrySchedule, RetryTaskError, Task
from entryway.domain.webhooks import (
    DELIVERY_SCHEDULE,
    DELIVERY_TIMEOUT_SECONDS,
    AttemptOutcome,
    DeliveryAttempt,
    DeliveryState,
    DisabledReason,
    WebhookEndpoint,
    webhook_headers,
)
from entryway.storage.tasks import Clock, utc_now
from entryway.storage.webhook_log import DeliveryLog, DeliveryTarget
from entryway.storage.webhooks import WebhookStore

log = logging.getLogger("entryway.webhooks")

# What the tenant's delivery log says of every refusal, whether the name does not resolve or
# resolves to an address the policy forbids: telling them apart would let a tenant probe which
# internal names exist. The operator's log has the detail.
REFUSED = "destination not allowed or does not resolve"


DeliveryFailed = Callable[[AttemptOutcome], None]  # an attempt did not deliver (a metric)


class UsageRecorder(Protocol):
    """Where deliveries are charged: entryway.storage.store.Store fits."""

    async def record_usage(
        self, project_id: str, idempotency_key: str, operation: str, credits: int, at: datetime
    ) -> object: ...


class EndpointAlerts(Protocol):
    """Told once when an endpoint is disabled by the service (410 Gone, or failing)."""

    async def endpoint_disabled(
        self, endpoint: WebhookEndpoint, reason: DisabledReason, detail: str
    ) -> None: ...


class LoggedAlerts:
    async def endpoint_disabled(
        self, endpoint: WebhookEndpoint, reason: DisabledReason, detail: str
    ) -> None:
        log.warning(
            "webhook endpoint %s of project %s disabled (%s): %s",
            endpoint.endpoint_id,
            endpoint.project_id,
            reason.value,
            detail,
        )


@dataclass(frozen=True, slots=True)
class DeliverySettings:
    timeout: float = DELIVERY_TIMEOUT_SECONDS  # per attempt, connecting included
    schedule: RetrySchedule = DELIVERY_SCHEDULE
    user_agent: str = f"Entryway-Webhooks/{__version__}"
    destinations: DestinationPolicy = PUBLIC_ONLY  # checked again after DNS, at each attempt


@dataclass(frozen=True, slots=True)
class _Answer:
    status_code: int | None
    error: str | None
    duration_ms: int
    refused: bool = False  # the destination is not allowed: nothing was sent

    @property
    def reason(self) -> str:
        return self.error or f"HTTP {self.status_code}"


def charge_key(delivery_id: str) -> str:
    return f"webhook_delivery:{delivery_id}"


class WebhookDeliveryHandler:
    def __init__(
        self,
        deliveries: DeliveryLog,
        webhooks: WebhookStore,
        usage: UsageRecorder,
        price_book: PriceBook,
        http: httpx.AsyncClient,
        *,
        alerts: EndpointAlerts | None = None,
        settings: DeliverySettings | None = None,
        clock: Clock = utc_now,
        rng: random.Random | None = None,
        on_failure: DeliveryFailed | None = None,
    ) -> None:
        self.deliveries = deliveries
        self.webhooks = webhooks
        self.usage = usage
        self.price_book = price_book
        self.http = http
        self.alerts: EndpointAlerts = alerts or LoggedAlerts()
        self.settings = settings or DeliverySettings()
        self.clock = clock
        self._rng = rng or random.Random()
        self.on_failure = on_failure

    async def __call__(self, task: Task) -> dict[str, Any]:
        delivery_id = str(task.payload["deliveryId"])
        target = await self.deliveries.target(delivery_id)
        if target is None:
            raise PermanentTaskError(f"no delivery {delivery_id}")
        if target.delivery.state is DeliveryState.DELIVERED:
            # An earlier run delivered, then its worker died before recording it: settle only.
            await self._charge(target)
            return {"deliveryId": delivery_id, "state": DeliveryState.DELIVERED.value}
        if target.endpoint_deleted or not target.endpoint.enabled:
            await self.deliveries.conclude(delivery_id, DeliveryState.SKIPPED)
            return {"deliveryId": delivery_id, "state": DeliveryState.SKIPPED.value}

        attempt = await self.deliveries.start_attempt(delivery_id)
        answer = await self._post(target)
        return await self._settle(task, target, attempt, answer)

    async def _settle(
        self, task: Task, target: DeliveryTarget, attempt: DeliveryAttempt, answer: _Answer
    ) -> dict[str, Any]:
        """Log how the attempt ended; charge, retry, or give up (disabling the endpoint)."""
        code = answer.status_code
        if code is not None and 200 <= code < 300:
            await self._finish(
                target, attempt, answer, AttemptOutcome.SUCCEEDED, DeliveryState.DELIVERED
            )
            await self._charge(target)
            return {
                "deliveryId": target.delivery.delivery_id,
                "state": DeliveryState.DELIVERED.value,
                "statusCode": code,
                "attempt": attempt.number,
            }
        if code == 410:
            await self._finish(target, attempt, answer, AttemptOutcome.GONE, DeliveryState.FAILED)
            await self._disable(target.endpoint, DisabledReason.GONE, "the receiver answered 410")
            raise PermanentTaskError("410 Gone: the endpoint is disabled")
        failed = AttemptOutcome.REFUSED if answer.refused else AttemptOutcome.FAILED
        if task.final_attempt:
            await self._finish(target, attempt, answer, failed, DeliveryState.FAILED)
            detail = f"{task.attempts} attempts of one delivery failed; the last: {answer.reason}"
            await self._disable(target.endpoint, DisabledReason.FAILING, detail)
            raise PermanentTaskError(answer.reason)
        await self._finish(target, attempt, answer, failed, DeliveryState.PENDING)
        delay = self.settings.schedule.delay_after(task.attempts, self._rng.random())
        raise RetryTaskError(answer.reason, delay=delay)

    async def _finish(
        self,
        target: DeliveryTarget,
        attempt: DeliveryAttempt,
        answer: _Answer,
        outcome: AttemptOutcome,
        state: DeliveryState,
    ) -> None:
        if outcome is not AttemptOutcome.SUCCEEDED and self.on_failure is not None:
            self.on_failure(outcome)
        await self.deliveries.finish_attempt(
            target,
            attempt,
            outcome,
            status_code=answer.status_code,
            error=answer.error,
            duration_ms=answer.duration_ms,
            delivery_state=state,
        )

    async def _post(self, target: DeliveryTarget) -> _Answer:
        at = self.clock()
        secrets = target.secrets.valid_at(at)
        headers = webhook_headers(
            secrets, target.delivery.event_id, int(at.timestamp()), target.body
        )
        headers["content-type"] = "application/json"
        headers["user-agent"] = self.settings.user_agent
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        refused = False
        try:
            # Streamed and closed unread: only the status matters, whatever the receiver sends.
            async with self.http.stream(
                "POST",
                target.endpoint.url,
                content=target.body,
                headers=headers,
                timeout=self.settings.timeout,
                follow_redirects=False,
            ) as response:
                status = response.status_code
        except DestinationNotAllowedError as exc:
            refused, error = True, REFUSED
            log.info("webhook delivery %s refused: %s", target.delivery.delivery_id, exc)
        except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
            # UnicodeError: httpx's IDNA check of a name registered before hosts were checked.
            error = "the URL is not valid"
            log.info("webhook delivery %s: invalid URL: %s", target.delivery.delivery_id, exc)
        except httpx.TimeoutException:
            error = f"timed out after {self.settings.timeout:g} s"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        except Exception:
            # A failed attempt, retried and counted like any other: a crash here would leave
            # the delivery pending for good and its endpoint never disabled.
            error = "the request could not be made"
            log.exception("webhook delivery %s failed unexpectedly", target.delivery.delivery_id)
        return _Answer(status, error, round((time.monotonic() - started) * 1000), refused)

    async def _charge(self, target: DeliveryTarget) -> None:
        quote = self.price_book.webhook()
        await self.usage.record_usage(
            target.delivery.project_id,
            charge_key(target.delivery.delivery_id),
            OperationType.WEBHOOK_DELIVERY.value,
            quote.credits,
            self.clock(),
        )

    async def _disable(
        self, endpoint: WebhookEndpoint, reason: DisabledReason, detail: str
    ) -> None:
        if not await self.webhooks.disable_endpoint(endpoint.endpoint_id, reason):
            return  # disabled already, and alerted then
        try:
            await self.alerts.endpoint_disabled(endpoint, reason, detail)
        except Exception:
            log.exception("alerting that endpoint %s was disabled failed", endpoint.endpoint_id)
