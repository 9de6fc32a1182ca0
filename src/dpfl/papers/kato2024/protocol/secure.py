"""kato2024's private weighting protocol (docs/papers/kato2024.md, 'The private weighting protocol'), the parties
and the messages they exchange.

ULDP-AVG-w weights user u's clipped update in silo s by n_{s,u}/n_u, where n_u = Σ_s n_{s,u} is private to no single
silo. The protocol lets the server aggregate Σ_s Σ_u (n_{s,u}/n_u)·clip(Δ_{s,u}) + noise without anyone learning the
histograms or a silo's message:
- every silo blinds its histogram with per-user masks r_u (shared by the silos, unknown to the server) and pairwise
  secure-aggregation masks; the server only learns B_u = r_u·n_u, and broadcasts Enc(B_u⁻¹) (Paillier), Enc(0) for
  a user with no records and, under user-level sampling (-ws), for every user it did not sample;
- silo s turns it into c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L} = Enc(L·n_{s,u}/n_u) (L = lcm(1..N̄) makes it an integer),
  raises c_u to each encoded coordinate ⌊Δ/P⌉ of its users' updates, multiplies over users, adds its encoded noise
  and pairwise masks in plaintext;
- the server multiplies the silos' ciphertexts (the masks cancel), decrypts, decodes centred, and divides by L/P.

Two implementations of the silo's weighting (`Silo.weighted_message`) decrypt to the same numbers (tested):
- `reference`, the published code's arithmetic (its `secure_weighting`): phe EncryptedNumber objects on a public key
  with max_int = n − 1, as the published code sets it; every round, for every user and every parameter tensor,
  c_u = ((Enc(B_u⁻¹)·n_{s,u})·r_u)·L as three scalar products, then one scalar product per coordinate and an
  addition per user. With max_int = n − 1 phe takes every scalar k ≥ 1 as "negative" and computes
  (Enc⁻¹)^{n−k}: the three products of c_u and every positive coordinate cost a full-size (3072-bit) exponentiation
  (a negative coordinate n − |x| costs a small one). This is what the paper timed: with it the published notebook's
  Fig 12 times (85 s per silo at 16 parameters, 287 s at 107 on 10 users) are ≈ (3·#tensors + #positive
  coordinates) × #users full exponentiations;
- `fast` (default), this project's: c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L mod n} once per user (one full-size
  exponentiation, r_u is a random element of Z_n: nothing smaller gives the same plaintext), kept across rounds
  while Enc(B_u⁻¹) and n_{s,u} are unchanged (every round of -w), and one multi-exponentiation per coordinate across
  the users with signed small exponents (c_u⁻¹ for negative coordinates).

The messages' encoding, masks and arithmetic are in dpfl.papers.kato2024.protocol.encoding; the silos' key exchange
(`key_exchange`: the keys of the pairwise masks and the seed R of the per-user masks r_u) in
dpfl.papers.kato2024.protocol.keys.

Security levels (`Security`; docs/papers/kato2024.md, 'Security of the private weighting protocol'):
- `paper`, the paper's protocol and its published code, which the figures time: the noise and the masks enter a
  silo's ciphertext only through (1+n)^{…} ≡ 1 mod n and nothing re-randomises it, so the server, which knows p and
  q, can read a silo's noise-free updates from the ciphertext mod n; R has 32 bits and, in this reproduction, comes
  from the run's seeded stream, so anyone with the configuration recomputes R, every r_u and so every n_u
  (tests/test_kato_protocol_attacks.py does both);
- `secure`: every ciphertext a silo sends is multiplied by a fresh r^n mod n², R has 256 bits from `secrets`, the pad
  of R and the pairwise masks use separate HKDF subkeys, each silo draws its noise as an exact discrete Gaussian from
  its own CSPRNG (`Silo.draw_noise`), and keys under 3072 bits or a seeded generator for these secrets are refused
  unless the run declares itself a simulation.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction

import gmpy2
import numpy as np

from dpfl.papers.kato2024.protocol.encoding import (
    PRECISION,
    RECORD_BOUND,
    ProtocolError,
    check_decoding,
    decode,
    encode,
    encode_noise,
    lcm_bound,
    multi_exp,
    pair_sign_masks,
)
from dpfl.papers.kato2024.protocol.security import PAPER, Security
from dpfl.privacy.discrete_gaussian import discrete_gaussians


class Server:
    """Holds the Paillier private key; sees only blinded histograms and encrypted, masked messages. `primes`: a chosen
    key (p, q) instead of a fresh one (tests; the secure mode accepts it only in a simulation)."""

    def __init__(self, n_silos: int, bits: int = 3072, record_bound: int = RECORD_BOUND, security: Security = PAPER,
                 primes: tuple[int, int] | None = None):
        import phe

        if primes is None:
            security.check_key_bits(bits)
            self.public, self._private = phe.generate_paillier_keypair(n_length=bits)
        else:
            p, q = (int(x) for x in primes)
            bits = (p * q).bit_length()
            security.check_chosen_key()
            security.check_key_bits(bits)
            self.public = phe.PaillierPublicKey(p * q)
            self._private = phe.PaillierPrivateKey(self.public, p, q)
        self.security = security
        self.n_silos, self.L, self.record_bound = n_silos, lcm_bound(record_bound), record_bound
        n = self.public.n
        if (self.L * 10 ** 12).bit_length() >= n.bit_length() - 2:
            raise ValueError(f"a {bits}-bit modulus cannot hold L = lcm(1..{record_bound}) ({self.L.bit_length()} "
                             f"bits) times the encoded values; use a larger modulus or a smaller record bound")
        self._inverse: list[int] | None = None

    def receive_histograms(self, histograms: dict[int, Sequence[int]]) -> None:
        """B_u = Σ_s h_{s,u} = r_u·n_u from every silo's blinded histogram, and B_u⁻¹ mod n (0 for a user with no
        records anywhere, B_u = 0). A missing silo leaves its masks uncancelled, so the round stops here."""
        missing = sorted(set(range(self.n_silos)) - set(histograms))
        if missing:
            raise ProtocolError(f"blinded histogram missing from silo(s) {missing}: the pairwise masks cannot cancel, "
                                f"so B_u would be wrong; the round stops")
        n = self.public.n
        sizes = {len(h) for h in histograms.values()}
        if len(sizes) != 1:
            raise ProtocolError(f"blinded histograms of different lengths {sorted(sizes)}")
        sums = [sum(h[u] for h in histograms.values()) % n for u in range(sizes.pop())]
        self._inverse = [int(gmpy2.invert(B, n)) if B else 0 for B in sums]

    def encrypted_weights(self, sampled: Sequence[bool] | None = None) -> list[int]:
        """What the server broadcasts (the paper's step (2)(a)): a fresh Enc(B_u⁻¹) per user, and Enc(0) for a user
        with no records anywhere and, under user-level sampling (-ws: `sampled` (U,) bool, drawn by the server), for
        every user not sampled. Every entry is a fresh Paillier encryption (a random r^n) of the same size, so a silo
        cannot tell a sampled user from an unsampled one, nor one with records elsewhere from one without."""
        if self._inverse is None:
            raise ProtocolError("no blinded histograms received yet")
        if sampled is not None and len(sampled) != len(self._inverse):
            raise ProtocolError(f"{len(sampled)} sampling decisions for {len(self._inverse)} users")
        return [self.public.raw_encrypt(b if sampled is None or sampled[u] else 0)
                for u, b in enumerate(self._inverse)]

    def inverse_weights(self, histograms: dict[int, Sequence[int]],
                        sampled: Sequence[bool] | None = None) -> list[int]:
        """`receive_histograms`, then `encrypted_weights`."""
        self.receive_histograms(histograms)
        return self.encrypted_weights(sampled)

    def aggregate(self, messages: dict[int, Sequence[int]], precision: float = PRECISION) -> np.ndarray:
        """Σ_s message_s decrypted: multiply the silos' ciphertexts (their pairwise masks cancel), decrypt, decode
        centred, divide by L and multiply by P."""
        missing = sorted(set(range(self.n_silos)) - set(messages))
        if missing:
            raise ProtocolError(f"message missing from silo(s) {missing}: the pairwise masks cannot cancel")
        n, n2 = self.public.n, self.public.nsquare
        dims = {len(m) for m in messages.values()}
        if len(dims) != 1:
            raise ProtocolError(f"messages of different lengths {sorted(dims)}")
        out, limit = [], self.L << 64
        for j in range(dims.pop()):
            c = gmpy2.mpz(1)
            for m in messages.values():
                c = c * m[j] % n2
            v = decode(int(self._private.raw_decrypt(int(c))), n)
            if abs(v) > limit:  # a legitimate sum is L·(a number of ≤ 64 bits); garbage is ≈ n/2 (odds ≈ 2^-120)
                raise ProtocolError(
                    f"coordinate {j} decrypts to a {abs(v).bit_length()}-bit value, far above L·2^64: L·n_su/n_u was "
                    f"not an integer for some user, i.e. a user holds more than N̄ = {self.record_bound} records (or "
                    f"a count whose prime-power factors exceed N̄); the round stops instead of producing a wrong model")
            out.append(v / self.L * precision)
        return np.array(out)


class Silo:
    """One silo: its users' record counts and clipped updates stay here; it sends a blinded histogram and an
    encrypted, masked message. `pair_keys`: a key shared with every other silo (the masks' keys); `masks`: the
    per-user r_u. `security`: the protocol's level; in the secure mode the silo holds its own CSPRNG (`secret_rng`,
    default a fresh `secrets.SystemRandom()`; a seeded one only in a simulation) for its noise and re-randomisers.
    `full_exponentiations`: how many full-size (≈ log2 n-bit exponent) modular exponentiations mod n² its last
    weighted message took, the hardware-independent cost of the weighting (small-exponent products not counted; the
    secure mode's re-randomisation adds one per coordinate)."""

    def __init__(self, index: int, public, pair_keys: dict[int, bytes], masks: Sequence[int],
                 record_bound: int = RECORD_BOUND, security: Security = PAPER,
                 secret_rng: random.Random | None = None):
        self.index, self.public, self.pair_keys, self.masks = index, public, dict(pair_keys), list(masks)
        self.L = lcm_bound(record_bound)
        self.security = security
        self._rng = security.secret_source(secret_rng) if security.secure else None
        self.full_exponentiations = 0

    def draw_noise(self, round_std: float, n_silos: int, dim: int, precision: float = PRECISION) -> np.ndarray:
        """The secure mode's noise of this silo, (D,) integers in the encoding's units: exact draws of the discrete
        Gaussian N_Z(0, σ_int²) with σ_int² = round_std²/(S·P²), from this silo's own CSPRNG
        (dpfl.privacy.discrete_gaussian, Canonne, Kamath and Steinke 2020).
        The scale: the paper's mode adds a real z ~ N(0, round_std²/S) as the integer ⌊z/P⌉ (times L, like every
        encoded value), which the server decodes back to ≈ z; drawing that integer directly from N_Z(0, σ_int²) gives
        the decoded noise k·P the same variance round_std²/S (the discrete Gaussian's variance is ≤ σ_int² and within
        10⁻¹² of it for σ_int ≥ 1), with no floating-point rounding of the noise. Summed over the S silos the round's
        noise has variance round_std² = (σC)², as the accountant assumes (docs/papers/kato2024.md, 'Security of the
        private weighting protocol', says why a sum of discrete Gaussians is as private here)."""
        if not self.security.secure:
            raise ProtocolError("the paper's mode draws the silos' noise from the run's generator, not here")
        sigma2 = Fraction(round_std) ** 2 / (n_silos * Fraction(precision) ** 2)
        return np.array(discrete_gaussians(sigma2, dim, self._rng), dtype=np.int64)

    def _obfuscator(self):
        """A fresh r^n mod n² (r uniform in Z_n*, from this silo's CSPRNG): multiplying a ciphertext by it leaves the
        plaintext and makes the ciphertext a uniformly random encryption of it."""
        n = self.public.n
        while True:
            r = self._rng.randrange(1, n)
            if math.gcd(r, n) == 1:
                return gmpy2.powmod(gmpy2.mpz(r), n, self.public.nsquare)

    def blinded_histogram(self, counts: Sequence[int], round_: int) -> list[int]:
        """h_{s,u} = n_{s,u}·r_u + Σ_{s'} ±mask mod n, for every user id (0 records: only masks)."""
        n = self.public.n
        pair = pair_sign_masks(self.index, self.pair_keys, f"{round_}/user_hist", len(counts), n)
        return [(int(c) * r + m) % n for c, r, m in zip(counts, self.masks, pair)]

    def weighted_message(self, counts: Sequence[int], clipped: np.ndarray, noise: np.ndarray,
                         enc_inverse: Sequence[int], round_: int, precision: float = PRECISION,
                         reference: bool = False, tensor_sizes: Sequence[int] | None = None) -> list[int]:
        """Enc(Σ_u L·(n_{s,u}/n_u)·⌊Δ_u/P⌉ + L·ζ) per coordinate, masked: `clipped` (U, D) the users' clipped
        updates (rows of users without records here are ignored), `noise` (D,) this silo's noise: real values (the
        paper's Gaussian z, encoded ζ = ⌊z/P⌉) or integers in the encoding's units (the secure mode's `draw_noise`).
        A user the server did not sample (-ws) is weighted like any other: its Enc(0) makes its c_u an encryption of
        0, so the silo never learns the sampling. In the secure mode every ciphertext sent is re-randomised.

        Both paths need c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L mod n}, one full-size exponentiation per user (r_u is a
        random element of Z_n: nothing smaller gives the same plaintext). `reference` follows the published code's
        arithmetic (module docstring): c_u recomputed every round per parameter tensor (`tensor_sizes`, the model's
        tensors in flat order; default: one tensor) and phe scalar products on a key with max_int = n − 1. The
        default keeps c_u for as long as Enc(B_u⁻¹) and n_{s,u} stay the same (every round of ULDP-AVG-w; -ws
        redraws them), and raises c_u or c_u⁻¹ (one inversion per user, when some coordinate is negative) to
        |⌊Δ/P⌉|, one multi-exponentiation per coordinate across the users (`multi_exp`)."""
        n2 = self.public.nsquare
        dim = clipped.shape[1]
        if reference:
            return self._reference_message(counts, clipped, noise, enc_inverse, round_, precision,
                                           tensor_sizes or [dim])
        cache = getattr(self, "_weights", {})
        fresh, bases, rows = {}, [], []
        self.full_exponentiations = 0
        for u, c in enumerate(counts):
            if not c:
                continue
            key = (u, int(c), enc_inverse[u])
            cu = cache.get(key)
            if cu is None:
                cu = self._weight(u, int(c), enc_inverse[u])
                self.full_exponentiations += 1
            fresh[key] = cu
            bases.append(cu)
            rows.append(u)
        self._weights = fresh
        exps = np.rint(np.asarray(clipped, dtype=np.float64)[rows] / precision) if rows else np.zeros((0, dim))
        return self._finish(multi_exp(bases, exps, n2), noise, round_, precision)

    def _weight(self, u: int, count: int, enc_inv: int | None):
        """c_u = Enc(B_u⁻¹)^{n_{s,u}·r_u·L} = Enc(L·n_{s,u}/n_u), one full-size exponentiation."""
        return gmpy2.powmod(gmpy2.mpz(self._enc_inverse(u, enc_inv)), count * self.masks[u] * self.L % self.public.n,
                            self.public.nsquare)

    def _enc_inverse(self, u: int, enc_inv: int | None) -> int:
        """Enc(B_u⁻¹) of a user with records here (the server sends a ciphertext for every user: a missing one stops
        the round)."""
        if enc_inv is None:
            raise ProtocolError(f"silo {self.index}: user {u} has records but no Enc(B_u⁻¹) from the server")
        return enc_inv

    def _reference_message(self, counts, clipped, noise, enc_inverse, round_, precision, tensor_sizes) -> list[int]:
        """The published code's weighting (its SecureLocalTrainer.secure_weighting and _sum_params): per user and
        parameter tensor c_u = ((Enc(B_u⁻¹)·n_{s,u})·r_u)·L, then ⌊Δ/P⌉ mod n times c_u per coordinate, summed over
        users, all as phe EncryptedNumber arithmetic on a public key with max_int = n − 1 (as published). The paper's
        mode sends the ciphertexts as computed (phe's be_secure=False, as published); the secure mode lets phe
        obfuscate each (be_secure=True: a fresh r^n from the system's CSPRNG, one full-size exponentiation each)."""
        import phe

        dim = clipped.shape[1]
        if sum(tensor_sizes) != dim:
            raise ValueError(f"tensor sizes {list(tensor_sizes)} do not add up to the {dim} coordinates")
        n = self.public.n
        public = phe.PaillierPublicKey(n)
        public.max_int = n - 1  # the published code's setting: phe's inverse trick for every scalar ≥ 1
        bounds = np.cumsum([0, *tensor_sizes])
        acc = None
        self.full_exponentiations = 0
        for u, c in enumerate(counts):
            if not c:
                continue
            enc = phe.EncryptedNumber(public, int(self._enc_inverse(u, enc_inverse[u])))
            terms = []
            for a, b in zip(bounds[:-1], bounds[1:]):
                cu = enc * int(c)
                cu = cu * self.masks[u]
                cu = cu * self.L
                coords = encode(clipped[u, a:b], precision)
                terms += [x % n * cu for x in coords]
                # the three products of c_u, and every positive coordinate (phe's inverse trick: exponent n − x)
                self.full_exponentiations += 3 + sum(x > 0 for x in coords)
            acc = terms if acc is None else [x + y for x, y in zip(acc, terms)]
        if acc is None:
            acc = [public.encrypt(0, r_value=1) for _ in range(dim)]
        secure = self.security.secure
        if secure:
            self.full_exponentiations += len(acc)  # phe's obfuscation of every coordinate
        return self._finish([gmpy2.mpz(a.ciphertext(be_secure=secure)) for a in acc], noise, round_, precision,
                            randomised=secure)

    def _finish(self, acc, noise, round_, precision, randomised: bool = False) -> list[int]:
        """Add the encoded noise L·ζ and this silo's pairwise masks in plaintext; in the secure mode multiply each
        ciphertext by a fresh r^n (unless `randomised` already). Without it the sum of plaintexts added here changes
        nothing mod n ((1+n)^p ≡ 1 mod n): the ciphertext mod n would be a function of the updates alone."""
        n, n2 = self.public.n, self.public.nsquare
        pair = pair_sign_masks(self.index, self.pair_keys, f"{round_}/update", len(acc), n)
        plain = [(self.L * z + m) % n for z, m in zip(encode_noise(noise, precision), pair)]
        # adding a plaintext p to a ciphertext: multiply by g^p = 1 + n·p (mod n²)
        out = [a * (1 + n * p) % n2 for a, p in zip(acc, plain)]
        if self.security.secure and not randomised:
            out = [c * self._obfuscator() % n2 for c in out]
            self.full_exponentiations += len(out)
        return [int(c) for c in out]


# ------------------------------------------------------------------------------------------ one private round


def secure_round(theta, fed, fm, hyper, *, noise_std: float, batch: int, gen, server: Server, silos: list[Silo],
                 round_: int, q: float = 1.0, sampled: np.ndarray | None = None, reference: bool = False,
                 optimizer: str = "sgd", times: dict | None = None, state: dict | None = None) -> tuple:
    """One ULDP-AVG-w(s) round of one run through the protocol (docs/papers/kato2024.md): θ (D,) →
    θ + η_g/(U·S·q)·Σ_s message_s, each message_s = Σ_u w_{s,u}·clip_C(Δ_{s,u}) + noise_s computed by silo s and
    decrypted only in sum, w_{s,u} = n_{s,u}/n_u for the users of the round (0 for the others). `hyper`: ULDP-AVG's
    typed block (dpfl.papers.kato2024.methods.PrivateLocalHyper: η_g, η_l, Q, C); `noise_std`: the std σC of the
    noise on the round's sum (the method's `round_noise_std`), each silo adding its 1/S share of the variance (the
    paper's mode: N(0, (σC)²/S) from `gen`; the secure mode: the silo's own discrete Gaussian, `Silo.draw_noise`).
    `fed`: the run's (silo, user) pairs (dpfl.papers.kato2024.federation.Federation, one run); `sampled` (U,) bool: the
    users the server sampled this round (-ws), which only the server knows: it sends Enc(0) for the others, and
    every silo trains and weights all its users alike; `optimizer`: the users' local optimizer (sgd, or adam: the
    published code's secure path, K7).
    `state`: a dict the caller keeps across the rounds of a run; the blinded histogram (the paper's setup steps
    (d)–(f)) runs once per run (the silos' counts do not change), and the server's broadcast of the encrypted
    weights with it under -w, every round under -ws (a fresh sample, fresh encryptions of every entry).
    Appends wall-clock seconds to `times` (perf_counter): "blinded histogram" (with the broadcast), "local training"
    (one entry per silo: its users' local SGD, clipping, encoding and encrypted weighting) and "aggregation"; each
    silo's weighting leaves its count in `Silo.full_exponentiations`. Checks the decoded sum against the plaintext
    one (`check_decoding`). Returns (θ', the plaintext Σ_s message_s from the same updates and noise)."""
    import time

    import torch

    from dpfl.fl.aggregate import clip_updates
    from dpfl.fl.local import local_sgd
    from dpfl.papers.kato2024.federation import subset

    times = {} if times is None else times
    S, U, dim = fed.n_silos, fed.n_users, theta.shape[0]
    counts = np.zeros((S, U), dtype=np.int64)
    counts[fed.silo, fed.user] = fed.count
    n_u = counts.sum(0)
    active = n_u > 0 if sampled is None else (n_u > 0) & np.asarray(sampled, bool)
    weights = np.where(active, 1.0, 0.0) * counts / np.maximum(n_u, 1)  # w_{s,u}: what the protocol computes
    clip = float(hyper.clip)

    state = {} if state is None else state
    tick = time.perf_counter()
    changed = state.get("counts") is None or not np.array_equal(state["counts"], counts)
    if changed:
        server.receive_histograms({s.index: s.blinded_histogram(counts[s.index], round_) for s in silos})
        state["counts"] = counts
    if changed or sampled is not None:
        state["enc_inv"] = server.encrypted_weights(sampled)
        times.setdefault("blinded histogram", []).append(time.perf_counter() - tick)
    enc_inv = state["enc_inv"]

    silo_of = torch.as_tensor(fed.silo, device=theta.device)
    user_of = torch.as_tensor(fed.user, device=theta.device)
    messages, plain = {}, np.zeros(dim)
    for silo in silos:
        tick = time.perf_counter()
        clipped = np.zeros((U, dim))
        for b in fed.buckets:
            keep = silo_of[b.pairs] == silo.index
            if not bool(keep.any()):
                continue
            part = subset(b, keep)
            start = theta[None].expand(len(part.pairs), dim)
            delta = local_sgd(fm, start, part, epochs=int(hyper.epochs), batch=batch, lr=float(hyper.eta_l),
                              gen=gen, optimizer=optimizer) - start
            delta, _ = clip_updates(delta, clip)
            clipped[user_of[part.pairs].cpu().numpy()] = delta.detach().cpu().double().numpy()
        if silo.security.secure:
            noise = silo.draw_noise(noise_std, S, dim)  # integers in the encoding's units
            real_noise = noise * PRECISION
        else:
            noise = (noise_std / math.sqrt(S)) * torch.randn(dim, generator=gen, dtype=torch.float64).numpy()
            real_noise = noise
        messages[silo.index] = silo.weighted_message(counts[silo.index], clipped, noise, enc_inv, round_,
                                                     reference=reference, tensor_sizes=fm.sizes)
        times.setdefault("local training", []).append(time.perf_counter() - tick)
        plain += weights[silo.index] @ clipped + real_noise

    tick = time.perf_counter()
    total = server.aggregate(messages)
    times.setdefault("aggregation", []).append(time.perf_counter() - tick)
    check_decoding(total, plain, int(active.sum()), S)
    scale = float(hyper.eta_g) / (U * S * q)
    new = theta + scale * torch.as_tensor(total, dtype=theta.dtype, device=theta.device)
    return new, plain
