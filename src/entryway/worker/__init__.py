"""Durable task workers: `entryway worker` as its own process, or in-process in `entryway up`."""

from entryway.worker.main import WorkerSettings, run_worker, running_worker, worker_for
from entryway.worker.worker import Handler, Worker

__all__ = ["Handler", "Worker", "WorkerSettings", "run_worker", "running_worker", "worker_for"]
