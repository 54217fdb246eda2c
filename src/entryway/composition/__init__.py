"""The composition root: settings in, running services out, for every process.

It sits above every other package (it imports them; none imports it but the command line),
so that use cases and adapters never reach back for what wires them.
"""

from entryway.composition.root import (
    ChainBundler,
    Composed,
    build_services,
    request_limits,
)

__all__ = ["ChainBundler", "Composed", "build_services", "request_limits"]
