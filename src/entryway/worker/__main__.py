"""`python -m entryway.worker`."""

from entryway.worker.main import main

main()
