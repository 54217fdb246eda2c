"""Logging set-up: stdlib `logging` routed through structlog, so that every module's
`logging.getLogger(__name__)` keeps working and each line comes out either as one JSON
object (production: one line per event, for a log pipeline) or as readable console text
(development).

Every line carries what structlog's context variables hold; the HTTP edge binds the request
id there for the duration of a request, so any line logged while handling it names it.
Secrets are masked last, after the message was formatted and any exception rendered, so the
masking sees exactly the text that will be written."""

from __future__ import annotations

import logging
import sys
from contextlib import AbstractContextManager
from typing import TextIO

import structlog
from structlog.typing import Processor

from entryway.observability.redaction import mask_event

HANDLER_NAME = "entryway"  # our handler on the root logger, replaced when set up again
QUIET_LOGGERS = {"httpx": logging.WARNING}  # one line per outgoing call is noise


def configure_logging(
    json: bool | None, level: str = "INFO", *, stream: TextIO | None = None
) -> logging.Handler:
    """Route all logging through structlog; the handler installed on the root logger.
    `json` None: JSON lines unless the stream is a terminal. Calling it again replaces the
    earlier set-up (tests, or a CLI that reconfigures)."""
    stream = stream or sys.stderr
    if json is None:
        json = not stream.isatty()
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            mask_event,
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name, quiet in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(quiet)
    # A library's warning (SQLAlchemy's about a connection never given back, say) becomes a
    # line of the same format, logger `py.warnings`, not raw text on stderr a log pipeline
    # cannot parse.
    logging.captureWarnings(True)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    return handler


def bind_request(request_id: str) -> AbstractContextManager[None]:
    """Lines logged inside it carry `request_id`."""
    return structlog.contextvars.bound_contextvars(request_id=request_id)
