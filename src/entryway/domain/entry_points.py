"""The EntryPoint releases Entryway serves side by side, and what differs between them.

v0.7 and v0.8 take the same packed UserOperation, the same `handleOps` and emit the same
events; they differ in the userOpHash (v0.7: an ABI-encoded digest; v0.8: EIP-712), in
EIP-7702 support (v0.8 only), and in their simulation contracts. Each release is deployed by
Arachnid's deterministic deployer with the salt eth-infinitism used, so it sits at the same
address on every chain.

v0.6 is older and apart: its UserOperation is unpacked (nine gas and fee fields of their own, one
`paymasterAndData`), its hash is its own and it simulates inside the EntryPoint. Its npm
release does not compile to the code deployed at its canonical address, so it has no salt:
real chains already carry it, and a devnet copies the npm release's runtime code there.

v0.9 takes the same packed UserOperation again and hashes it as v0.8 does, except that a
paymaster signature appended to paymasterAndData (`paymasterSignature`, marked by a length and
a magic suffix) is left out of the hash, so the paymaster may sign after the account. npm only
carries its release candidate (0.9.0-rc.1), whose creation code differs from the release's:
with the release's salt it lands at `packaged_address`, not at the canonical address. Public
chains already carry the release at the canonical address; devnets get rc.1 where it lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EntryPointVersion(StrEnum):
    V06 = "0.6"
    V07 = "0.7"
    V08 = "0.8"
    V09 = "0.9"


@dataclass(frozen=True, slots=True)
class EntryPointRelease:
    version: EntryPointVersion
    address: str  # canonical, checksummed
    salt: str  # the deterministic deployer's salt that puts the release's code at `address`
    # ("" for v0.6: no salt puts its npm code there)
    package: str  # the npm release its artifacts come from
    artifact_suffix: str  # "" for v0.8's artifacts, "V07" for EntryPointV07.json and kin
    supports_eip7702: bool
    # Where the packaged creation code lands with `salt`, when the package is not the release
    # itself (v0.9: npm has only its release candidate); None when that is `address`.
    packaged_address: str | None = None

    @property
    def addresses(self) -> tuple[str, ...]:
        """Every address this release is served at: the canonical one, then the package's."""
        if self.packaged_address is None:
            return (self.address,)
        return (self.address, self.packaged_address)

    def artifact(self, name: str) -> str:
        """The packaged artifact of the release's `name` contract (EntryPoint, SimpleAccount…)."""
        return name + self.artifact_suffix


V07 = EntryPointRelease(
    EntryPointVersion.V07,
    "0x0000000071727De22E5E9d8BAf0edAc6f37da032",
    "90d8084deab30c2a37c45e8d47f49f2f7965183cb6990a98943ef94940681de3",
    "@account-abstraction/contracts@0.7.0",
    "V07",
    supports_eip7702=False,
)
V08 = EntryPointRelease(
    EntryPointVersion.V08,
    "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108",
    "0a59dbff790c23c976a548690c27297883cc66b4c67024f9117b0238995e35e9",
    "@account-abstraction/contracts@0.8.0",
    "",
    supports_eip7702=True,
)
V06 = EntryPointRelease(
    EntryPointVersion.V06,
    "0x5FF137D4b0FDCD49DcA30c7CF57E578a026d2789",
    "",
    "@account-abstraction/contracts@0.6.0",
    "V06",
    supports_eip7702=False,
)
V09 = EntryPointRelease(
    EntryPointVersion.V09,
    "0x433709009B8330FDa32311DF1C2AFA402eD8D009",
    "7702864008ddeab30aa67b7adc3d2653bc8d162714b1fe8fe4582df814f3bf61",
    "@account-abstraction/contracts@0.9.0-rc.1",
    "V09",
    supports_eip7702=True,
    packaged_address="0x63e9dfF4784c514b314670f239a52690F5709433",
)
# The releases taking the packed UserOperation; v0.6 (unpacked) is served by its own code.
RELEASES: dict[EntryPointVersion, EntryPointRelease] = {r.version: r for r in (V07, V08, V09)}
DEFAULT_VERSION = EntryPointVersion.V08
_BY_ADDRESS = {a.lower(): r for r in (*RELEASES.values(), V06) for a in r.addresses}


def release(version: EntryPointVersion | str) -> EntryPointRelease:
    """A release taking the packed UserOperation (v0.6's own code asks for `V06` itself)."""
    try:
        return RELEASES[EntryPointVersion(version)]
    except (ValueError, KeyError):
        supported = ", ".join(v.value for v in RELEASES)
        raise ValueError(
            f"unsupported EntryPoint version {version!r} (supported: {supported})"
        ) from None


def release_at(address: str) -> EntryPointRelease | None:
    """The release served at this address (canonical, or its package's), if any."""
    return _BY_ADDRESS.get(address.lower())


def version_at(address: str) -> EntryPointVersion:
    """The version of the EntryPoint at `address`: a canonical address says which; an
    EntryPoint deployed elsewhere (a private devnet's) is taken to be v0.8."""
    found = release_at(address)
    return DEFAULT_VERSION if found is None else found.version
