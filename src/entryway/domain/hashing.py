"""The notary's hash functions: SHA-256 for documents, Keccak-256 for Merkle trees. Pure.

Keccak-256 comes from pycryptodome. Its public API costs about 3.4 µs a hash on the
project's machine, mostly in building a hash object per call; a Merkle tree of 100,000
leaves needs 200,000 hashes. `keccak256_hasher()` instead drives pycryptodome's own compiled
Keccak directly (the same C code its public API calls) with one reused state, at about 1.4 µs
a hash. It checks itself against known digests before it is trusted and falls back to the
public API when the compiled library cannot be used.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

from Crypto.Hash import keccak as _keccak

HashFunction = Callable[[bytes], bytes]

_DIGEST_BYTES = 32
_CAPACITY_BYTES = 2 * _DIGEST_BYTES  # Keccak-256: capacity 512 bits
_ROUNDS = 24
_KECCAK_PADDING = 0x01  # original Keccak, as Ethereum uses (SHA-3 pads with 0x06)
_KNOWN_DIGESTS = {
    b"": bytes.fromhex("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"),
    b"abc": bytes.fromhex("4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"),
}


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def keccak256(data: bytes) -> bytes:
    """One Keccak-256 digest through pycryptodome's public API."""
    return _keccak.new(data=data, digest_bits=256).digest()


@cache
def _compiled_keccak() -> ctypes.CDLL | None:
    """pycryptodome's compiled Keccak, typed for ctypes, or None when it cannot be used."""
    try:
        spec = importlib.util.find_spec("Crypto.Hash._keccak")
        if spec is None or spec.origin is None:
            return None
        lib = ctypes.CDLL(spec.origin)
        lib.keccak_init.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_ubyte]
        lib.keccak_destroy.argtypes = [ctypes.c_void_p]
        lib.keccak_reset.argtypes = [ctypes.c_void_p]
        lib.keccak_absorb.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.keccak_digest.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_ubyte,
        ]
        for fn in ("keccak_init", "keccak_destroy", "keccak_reset", "keccak_absorb"):
            getattr(lib, fn).restype = ctypes.c_int
        lib.keccak_digest.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError, ValueError):
        return None
    with _compiled_hasher(lib) as hasher:
        trusted = all(hasher(data) == digest for data, digest in _KNOWN_DIGESTS.items())
    return lib if trusted else None


@contextmanager
def _compiled_hasher(lib: ctypes.CDLL) -> Iterator[HashFunction]:
    state = ctypes.c_void_p()
    if lib.keccak_init(ctypes.byref(state), _CAPACITY_BYTES, _ROUNDS) != 0:
        raise MemoryError("Keccak state could not be allocated")
    handle = state.value
    out = ctypes.create_string_buffer(_DIGEST_BYTES)
    reset, absorb, digest = lib.keccak_reset, lib.keccak_absorb, lib.keccak_digest

    def hasher(data: bytes) -> bytes:
        reset(handle)
        absorb(handle, data, len(data))
        digest(handle, out, _DIGEST_BYTES, _KECCAK_PADDING)
        return out.raw

    try:
        yield hasher
    finally:
        lib.keccak_destroy(handle)


@contextmanager
def keccak256_hasher() -> Iterator[HashFunction]:
    """A Keccak-256 function for many digests in a row, valid inside the `with` block.

    It reuses one state, so it belongs to one thread; open one per tree or per batch.
    """
    lib = _compiled_keccak()
    if lib is None:
        yield keccak256
        return
    with _compiled_hasher(lib) as hasher:
        yield hasher
