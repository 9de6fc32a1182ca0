"""kato2024's private weighting protocol (dpfl.papers.kato2024.protocol.secure): the silos' key exchange, the setup
that gives every pair of silos its shared keys (the pairwise masks') and every silo the seed R of the per-user masks
r_u (dpfl.papers.kato2024.protocol.encoding.user_masks).

Key exchange (`key_exchange`): every silo makes a Diffie–Hellman key pair in the RFC 3526 3072-bit MODP group 15
(`cryptography`), the server relays the public keys, every pair of silos derives its shared key with HKDF-SHA256, and
silo 0 sends a random seed R to every other silo as R ⊕ K_{0,s} through the server; the per-user masks r_u derive
from R. The server relays only public keys and one-time-padded seeds. The public keys are not authenticated: the
parties are semi-honest (they follow the protocol), and a server that swapped them could read the seeds.

How R and the keys differ between the security levels (the paper's 32-bit R from the run's seeded stream and one
key per pair; the secure mode's 256-bit R from `secrets` and separate "pad" and "mask" subkeys): `key_exchange`.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Sequence

import numpy as np

from dpfl.papers.kato2024.protocol.security import PAPER, SECURE_SEED_BYTES, Security

#: RFC 3526 §4, the 3072-bit MODP group 15 (generator 2): 2^3072 − 2^3008 − 1 + 2^64·(⌊2^2942·π⌋ + 1690314), a safe
#: prime (tests/test_kato_secure.py recomputes it from that formula)
MODP_3072_PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
    16,
)
MODP_3072_GENERATOR = 2


class DhParty:
    """One silo's side of the key exchange: a DH key pair in group 15; `pair_keys` derives the keys shared with a peer
    from the peer's public value (HKDF-SHA256 over the DH secret, bound to both silo indices and to the key's use)."""

    def __init__(self, index: int):
        from cryptography.hazmat.primitives.asymmetric import dh

        self.index = index
        with _ffdh():
            self._params = dh.DHParameterNumbers(MODP_3072_PRIME, MODP_3072_GENERATOR).parameters()
            self._private = self._params.generate_private_key()
        self.public = self._private.public_key().public_numbers().y  # what the server relays

    def pair_keys(self, other: int, other_public: int, uses: Sequence[str] = ("pair",)) -> dict[str, bytes]:
        """{use: 32-byte key} shared with silo `other`, one HKDF-SHA256 derivation per use from one DH secret, each
        with its own info label ("dpfl kato2024 <use> key <a>-<b>"), so that keys of different uses are independent.
        The paper's mode uses one key ("pair") for the pad of R and the pairwise masks; the secure mode "pad" and
        "mask"."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import dh
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        with _ffdh():
            peer = dh.DHPublicNumbers(other_public, self._params.parameter_numbers()).public_key()
            secret = self._private.exchange(peer)
        a, b = sorted((self.index, other))
        return {use: HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                          info=f"dpfl kato2024 {use} key {a}-{b}".encode()).derive(secret) for use in uses}

    def pair_key(self, other: int, other_public: int) -> bytes:
        """The paper's mode's one key per pair of silos (for the pad of R and the pairwise masks)."""
        return self.pair_keys(other, other_public)["pair"]


@contextlib.contextmanager
def _ffdh():
    """`cryptography` warns that finite-field DH is deprecated; the paper's protocol uses it (RFC 3526 group 15)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Diffie-Hellman over finite fields")
        yield


def key_exchange(n_silos: int, rng: np.random.Generator | None = None, times: dict | None = None,
                 security: Security = PAPER, secret_rng: random.Random | None = None
                 ) -> tuple[list[dict[int, bytes]], list[bytes], dict]:
    """Setup steps (1)(a)–(c) of the paper's protocol for `n_silos` silos: the mask keys of every silo ({other: key}),
    the seed R every silo recovers, and what the server relayed (public values and padded seeds).
    Paper's mode: silo 0 draws a 32-bit R from `rng` (the run's seeded stream) and pads it with the first 32 bits of
    the pair key, which also seeds the pairwise masks. Secure mode: R has 256 bits from `secrets` (or `secret_rng`,
    in a simulation only; `rng` is not used), padded with a "pad" subkey and the masks seeded by a "mask" subkey.
    The silos' DH key generation is not timed (as in the paper); the exchange (relaying, deriving the pair keys, sending
    and recovering R) is appended to times["key exchange"] when `times` is given."""
    import time

    parties = [DhParty(s) for s in range(n_silos)]
    tick = time.perf_counter()
    relayed = {"public": {p.index: p.public for p in parties}}
    uses = ("pad", "mask") if security.secure else ("pair",)
    derived = [{o: p.pair_keys(o, relayed["public"][o], uses) for o in range(n_silos) if o != p.index}
               for p in parties]
    keys = [{o: k[uses[-1]] for o, k in d.items()} for d in derived]  # the pairwise masks' keys
    pads = [{o: k[uses[0]] for o, k in d.items()} for d in derived]
    if security.secure:
        R = security.secret_source(secret_rng).getrandbits(8 * SECURE_SEED_BYTES).to_bytes(SECURE_SEED_BYTES, "big")
    else:
        if rng is None:
            raise ValueError("security: paper draws R from the run's seeded stream: pass `rng`")
        R = int(rng.integers(0, 2**32)).to_bytes(4, "big")

    def xor(a: bytes, b: bytes) -> bytes:  # R ⊕ K_{0,s} (the key's first len(R) bytes)
        return bytes(x ^ y for x, y in zip(a, b[: len(a)]))

    relayed["seed"] = {s: xor(R, pads[0][s]) for s in range(1, n_silos)}
    seeds = [R] + [xor(relayed["seed"][s], pads[s][0]) for s in range(1, n_silos)]
    if times is not None:
        times.setdefault("key exchange", []).append(time.perf_counter() - tick)
    return keys, seeds, relayed
