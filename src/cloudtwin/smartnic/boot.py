"""Measured boot of a NIC: firmware, NIC OS and pipeline program, each signed with Ed25519
and measured by its SHA-256 digest into a running measurement (like a TPM PCR extend).

A stage boots only when its signature verifies under the provider's public key; the
first stage that is unsigned or whose bytes no longer match its signature stops the
chain, and the host's port stays quarantined. Keys come from a seed so that a twin's
run is reproducible; the signatures and checks are real Ed25519.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cloudtwin.errors import NicError, needs_extra
from cloudtwin.scenario.nic import Nic

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "STAGES",
    "BootReport",
    "boot_hosts",
    "SignedStage",
    "boot_chain",
    "provider_key",
    "sign_stage",
    "stage_images",
]

STAGES = ("firmware", "nic-os", "pipeline")


@dataclass(frozen=True)
class SignedStage:
    """A boot stage's image and the provider's signature over its name and digest."""

    name: str
    image: bytes
    signature: bytes | None

    @property
    def digest(self) -> bytes:
        return hashlib.sha256(self.image).digest()


@dataclass(frozen=True)
class BootReport:
    """The outcome of one NIC's measured boot."""

    host: str
    booted: tuple[str, ...]
    measurement: str
    failed_stage: str | None
    reason: str | None

    @property
    def attested(self) -> bool:
        return self.failed_stage is None

    def to_json(self) -> dict[str, object]:
        return {
            "attested": self.attested,
            "quarantined": not self.attested,
            "booted": list(self.booted),
            "measurement": self.measurement,
            "failed_stage": self.failed_stage,
            "reason": self.reason,
        }


def provider_key(seed: int) -> Ed25519PrivateKey:
    """The provider's signing key, derived from `seed` (reproducible twins, not for production)."""
    with needs_extra("nic", "nic boot", NicError):  # cryptography: the `nic` extra
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"cloudtwin-boot-{seed}".encode()).digest())


def _message(name: str, digest: bytes) -> bytes:
    return name.encode() + b"\0" + digest


def sign_stage(key: Ed25519PrivateKey, name: str, image: bytes) -> SignedStage:
    """`image` as stage `name`, signed over its name and SHA-256 digest."""
    return SignedStage(name, image, key.sign(_message(name, hashlib.sha256(image).digest())))


def stage_images(profile: str, pipeline_program: str = "") -> dict[str, bytes]:
    """Stand-in images of a NIC profile's boot stages (their bytes are what gets measured)."""
    return {
        "firmware": f"{profile} firmware 1.0".encode() * 64,
        "nic-os": f"{profile} nic-os 1.0 (control plane agent, attestation agent)".encode() * 64,
        "pipeline": (pipeline_program or f"{profile} default pipeline").encode(),
    }


def boot_chain(host: str, stages: list[SignedStage], public_key: Ed25519PublicKey) -> BootReport:
    """Verify and measure `stages` in order; stop at the first one that fails."""
    from cryptography.exceptions import InvalidSignature  # present: `public_key` is one of its keys

    measurement = bytes(32)
    booted: list[str] = []
    for expected, stage in zip(STAGES, stages, strict=True):
        if stage.name != expected:
            return BootReport(
                host, tuple(booted), measurement.hex(), expected, f"stage {stage.name} out of order"
            )
        if stage.signature is None:
            return BootReport(host, tuple(booted), measurement.hex(), stage.name, "unsigned")
        try:
            public_key.verify(stage.signature, _message(stage.name, stage.digest))
        except InvalidSignature:
            return BootReport(
                host,
                tuple(booted),
                measurement.hex(),
                stage.name,
                "signature does not match the image (tampered)",
            )
        measurement = hashlib.sha256(measurement + stage.digest).digest()
        booted.append(stage.name)
    return BootReport(host, tuple(booted), measurement.hex(), None, None)


def boot_hosts(nic: Nic, host_count: int, seed: int) -> list[BootReport]:
    """Every host's NIC booted through the provider-signed chain; `nic.boot_faults` alter
    the images (tampered) or drop the signatures (unsigned) of some hosts' stages."""
    key = provider_key(seed)
    public = key.public_key()
    faults = {host: (fault.stage, fault.kind) for fault in nic.boot_faults for host in fault.hosts}
    images = stage_images(nic.profile)
    signed = [sign_stage(key, name, images[name]) for name in STAGES]
    reports = []
    for host in range(host_count):
        stages = signed
        if host in faults:
            stage, kind = faults[host]
            stages = [_altered(s, kind) if s.name == stage else s for s in signed]
        reports.append(boot_chain(f"host{host}", stages, public))
    return reports


def _altered(stage: SignedStage, kind: str) -> SignedStage:
    if kind == "unsigned":
        return SignedStage(stage.name, stage.image, None)
    tampered = bytearray(stage.image)
    tampered[len(tampered) // 2] ^= 0x01
    return SignedStage(stage.name, bytes(tampered), stage.signature)
