"""kato2024's private weighting protocol (dpfl.papers.kato2024.protocol): the decrypted aggregate equals
the plaintext ULDP-AVG-w messages Σ_s (Σ_u (n_{s,u}/n_u)·clip_C(Δ_{s,u}) + noise_s) within 1e-8 relative (negative
coordinates and users absent from some silos included), the fast and the reference weighting decrypt alike, the masks
cancel exactly while every value the server sees is blinded, B_u⁻¹ is correct, and a missing silo stops the round.
Under user-level sampling (-ws) every user gets a fresh ciphertext (Enc(0) when unsampled or without records) and
silos train every user; the decoded sum stays within (U_a + S)·P/2 of the plaintext one, and a round outside it
stops. The secure mode: its discrete noise at the paper's scale, re-randomised messages that still decrypt right, a
256-bit seed and separate subkeys, and what it refuses outside a simulation. Most tests use a 1024-bit modulus with a
record bound of 30 so that they take seconds (L = lcm(1..30) fits with room to spare; the arithmetic is the same);
one runs the full 3072-bit path with N̄ = 2000. The attacks on the paper's mode: tests/test_kato_protocol_attacks.py."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
import torch

from dpfl.papers.kato2024.protocol.encoding import ProtocolError, decode, lcm_bound, user_masks
from dpfl.papers.kato2024.protocol.secure import Server, Silo
from reference_aggregate import silo_messages


def setup(counts: np.ndarray, bits: int, bound: int, seed: int = 0):
    """A server and the silos of a federation with record counts (S, U); pair keys and the mask seed as the key
    exchange will produce them (here: fixed bytes)."""
    S, U = counts.shape
    server = Server(S, bits=bits, record_bound=bound)
    keys = {(a, b): bytes([seed, a, b]) * 8 for a in range(S) for b in range(S) if a < b}
    masks = user_masks(b"mask-seed-%d" % seed, U, server.public.n)
    silos = [Silo(s, server.public, {o: keys[min(s, o), max(s, o)] for o in range(S) if o != s}, masks,
                  record_bound=bound) for s in range(S)]
    return server, silos, masks


def plaintext(counts, clipped, noise):
    n_u = counts.sum(0)
    w = np.where(counts > 0, counts / np.maximum(n_u, 1), 0.0)
    # the engine's per-silo messages without noise (C = 1 clips nothing here: the updates are far shorter), + noise
    return silo_messages(torch.tensor(clipped), torch.tensor(w), clip=1.0, sigma=0.0, noise=None).numpy() + noise


def run_round(server, silos, counts, clipped, noise, reference=False, round_=0):
    hist = {s.index: s.blinded_histogram(counts[s.index], round_) for s in silos}
    enc_inv = server.inverse_weights(hist)
    msgs = {s.index: s.weighted_message(counts[s.index], clipped[s.index], noise[s.index], enc_inv, round_,
                                        reference=reference) for s in silos}
    return server.aggregate(msgs), hist, msgs


def federation(S=3, U=5, D=4, seed=1):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 9, size=(S, U))
    counts[:, 0] = [3, 0, 4][:S]  # user 0 absent from silo 1
    counts[:, -1] = 0  # a user with no records anywhere (e.g. not sampled this round)
    clipped = rng.normal(scale=0.05, size=(S, U, D))  # negative coordinates too
    noise = rng.normal(scale=0.01, size=(S, D))
    return counts, clipped, noise


def test_decrypted_update_equals_the_plaintext_weighted_sum_and_the_reference_path():
    counts, clipped, noise = federation()
    server, silos, _ = setup(counts, bits=1024, bound=30)
    got, _, _ = run_round(server, silos, counts, clipped, noise)
    want = plaintext(counts, clipped, noise).sum(0)
    assert np.allclose(got, want, rtol=1e-8, atol=1e-9)
    ref, _, _ = run_round(server, silos, counts, clipped, noise, reference=True)
    assert np.array_equal(ref, got)  # the same integers decrypted, by either weighting


def test_masks_cancel_and_the_server_sees_only_blinded_values():
    counts, clipped, noise = federation()
    server, silos, masks = setup(counts, bits=1024, bound=30)
    n = server.public.n
    _, hist, msgs = run_round(server, silos, counts, clipped, noise)
    n_u = counts.sum(0)
    for u in range(counts.shape[1]):
        B = sum(h[u] for h in hist.values()) % n
        assert B == masks[u] * int(n_u[u]) % n  # the pairwise masks cancel exactly
        for s in range(counts.shape[0]):
            c = int(counts[s, u])
            assert hist[s][u] != c * masks[u] % n and hist[s][u] != c  # never in the clear
        if n_u[u]:
            assert int(gmpy2.invert(B, n)) * B % n == 1
    for m in msgs.values():  # ciphertexts mod n²: nothing the server can read without decrypting
        assert all(1 < c < server.public.nsquare for c in m)


def test_reference_weighting_does_the_published_codes_exponentiations(monkeypatch):
    """The reference is timed as the cost the paper measured, so it must do the published code's work: phe on a key
    with max_int = n − 1, c_u as three scalar products per parameter tensor (each a full-size exponentiation through
    phe's inverse trick), then one product per coordinate (full-size for a positive coordinate, small for a negative
    one, none for zero). Counted: phe's powmod calls with an exponent longer than half of n."""
    import phe.paillier

    counts, clipped, noise = federation(S=2, U=4, D=5, seed=3)
    clipped[:, :, 2] = 0.0  # a zero coordinate: powmod(c, 0)
    server, silos, _ = setup(counts, bits=1024, bound=30)
    hist = {s.index: s.blinded_histogram(counts[s.index], 0) for s in silos}
    enc_inv = server.inverse_weights(hist)
    half = server.public.n.bit_length() // 2
    calls = []
    real = phe.paillier.powmod
    monkeypatch.setattr(phe.paillier, "powmod",
                        lambda b, e, m: calls.append(int(e).bit_length() > half) or real(b, e, m))
    sizes = [3, 2]  # two parameter tensors
    for s in silos:
        calls.clear()
        s.weighted_message(counts[s.index], clipped[s.index], noise[s.index], enc_inv, 0, reference=True,
                           tensor_sizes=sizes)
        users = np.flatnonzero(counts[s.index])
        coords = np.rint(clipped[s.index][users] / 1e-10)
        assert sum(calls) == len(users) * 3 * len(sizes) + int((coords > 0).sum())
        assert len(calls) - sum(calls) == int((coords < 0).sum()) + int((coords == 0).sum())
        assert s.full_exponentiations == sum(calls)  # what the cell tables record
    # the fast path on the same inputs: one full-size exponentiation per user (c_u), none through phe
    calls.clear()
    msgs = {s.index: s.weighted_message(counts[s.index], clipped[s.index], noise[s.index], enc_inv, 0) for s in silos}
    assert calls == []
    assert [s.full_exponentiations for s in silos] == [int((counts[s.index] > 0).sum()) for s in silos]
    for s in silos:  # the next round of -w (same Enc(B_u⁻¹) and counts): c_u from the cache, no full-size ones
        s.weighted_message(counts[s.index], clipped[s.index], noise[s.index], enc_inv, 1)
        assert s.full_exponentiations == 0
    ref = {s.index: s.weighted_message(counts[s.index], clipped[s.index], noise[s.index], enc_inv, 0, reference=True,
                                       tensor_sizes=sizes) for s in silos}
    assert np.array_equal(server.aggregate(msgs), server.aggregate(ref))
    with pytest.raises(ValueError, match="do not add up"):
        silos[0].weighted_message(counts[0], clipped[0], noise[0], enc_inv, 0, reference=True, tensor_sizes=[2, 2])


def test_a_silo_that_drops_out_stops_the_round():
    counts, clipped, noise = federation()
    server, silos, _ = setup(counts, bits=1024, bound=30)
    hist = {s.index: s.blinded_histogram(counts[s.index], 0) for s in silos[:-1]}
    with pytest.raises(ProtocolError, match=r"blinded histogram missing from silo\(s\) \[2\]"):
        server.inverse_weights(hist)


def test_decode_centred_and_l():
    assert decode(7, 11) == -4 and decode(5, 11) == 5 and decode(-3, 11) == -3
    assert lcm_bound(10) == 2520 and all(lcm_bound(30) % k == 0 for k in range(1, 31))
    with pytest.raises(ValueError, match="cannot hold L"):
        Server(2, bits=512, record_bound=2000)


def test_full_3072_bit_path_with_the_spec_record_bound():
    counts, clipped, noise = federation(S=2, U=3, D=2, seed=4)
    server, silos, _ = setup(counts, bits=3072, bound=2000)
    got, _, _ = run_round(server, silos, counts, clipped, noise)
    assert np.allclose(got, plaintext(counts, clipped, noise).sum(0), rtol=1e-8, atol=1e-9)


def test_group_15_prime_is_the_rfc_3526_safe_prime():
    import mpmath

    from dpfl.papers.kato2024.protocol.keys import MODP_3072_PRIME

    mpmath.mp.prec = 3300
    want = 2**3072 - 2**3008 - 1 + 2**64 * (int(mpmath.floor(mpmath.mpf(2) ** 2942 * mpmath.pi)) + 1690314)
    assert MODP_3072_PRIME == want and gmpy2.is_prime(want, 30) and gmpy2.is_prime((want - 1) // 2, 30)


def test_key_exchange_gives_pairwise_keys_and_the_seed_to_every_silo_and_the_server_only_padded_values():
    from dpfl.papers.kato2024.protocol.keys import key_exchange

    keys, seeds, relayed = key_exchange(4, np.random.default_rng(3))
    for a in range(4):
        for b in range(a + 1, 4):
            assert keys[a][b] == keys[b][a] and len(keys[a][b]) == 32
    assert len({k for ks in keys for k in ks.values()}) == 6  # a different key per pair
    assert len(set(seeds)) == 1 and len(seeds[0]) == 4  # every silo recovers silo 0's R
    assert all(padded != seeds[0] for padded in relayed["seed"].values())  # the server relays R ⊕ K, not R
    again, _, _ = key_exchange(4, np.random.default_rng(3))
    assert again[0][1] != keys[0][1]  # fresh DH key pairs every setup


def test_protocol_with_exchanged_keys_and_seed():
    from dpfl.papers.kato2024.protocol.keys import key_exchange

    counts, clipped, noise = federation(S=3, U=4, D=3, seed=7)
    S, U = counts.shape
    server = Server(S, bits=1024, record_bound=30)
    keys, seeds, _ = key_exchange(S, np.random.default_rng(0))
    silos = [Silo(s, server.public, keys[s], user_masks(seeds[s], U, server.public.n), record_bound=30)
             for s in range(S)]
    got, _, _ = run_round(server, silos, counts, clipped, noise, round_=2)
    assert np.allclose(got, plaintext(counts, clipped, noise).sum(0), rtol=1e-8, atol=1e-9)


def test_a_private_round_of_uldp_avg_w_equals_its_plaintext_update_and_times_every_phase():
    """Heart-like data (linear logistic model), 2 silos, 6 users, one with records in one silo only; -ws sampling
    leaves a user out. θ' = θ + η_g/(U·S·q)·Σ_s message_s, the decrypted sum equal to the plaintext one."""
    from dpfl.fl.flat_model import FlatModel
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024.methods import BY_ID
    from dpfl.papers.kato2024.protocol.secure import secure_round
    from dpfl.papers.kato2024.federation import Federation

    rng = np.random.default_rng(0)
    n = 40
    run = {"X": rng.normal(size=(n, 13)).astype(np.float32), "y": (rng.random(n) < 0.5).astype(np.int64),
           "silo": rng.integers(0, 2, n), "user": rng.integers(0, 6, n)}
    run["silo"][run["user"] == 5] = 0
    fed = Federation.build([run], 2, 6, "user", 4, "cpu")
    fm = FlatModel(build_model("heart_logistic", 0), "bce")
    theta = fm.initial().double()
    fm = FlatModel(build_model("heart_logistic", 0, dtype=torch.float64), "bce")
    for bkt in fed.buckets:
        bkt.X = bkt.X.double()
    server = Server(2, bits=1024, record_bound=64)
    masks = user_masks(b"seed", 6, server.public.n)
    silos = [Silo(s, server.public, {1 - s: b"k" * 32}, masks, record_bound=64) for s in range(2)]
    hyper = BY_ID["uldp_avg_w"].hyper_params({"eta_g": 10.0, "eta_l": 0.001, "epochs": 2, "clip": 0.1})
    sampled = np.array([True, True, False, True, True, True])
    times = {}
    new, plain = secure_round(theta, fed, fm, hyper, noise_std=5.0 * 0.1, batch=4, gen=torch.Generator().manual_seed(1),
                              server=server, silos=silos, round_=0, q=0.5, sampled=sampled, times=times)
    want = theta + 10.0 / (6 * 2 * 0.5) * torch.as_tensor(plain)
    assert torch.allclose(new, want, rtol=1e-8, atol=1e-9) and not torch.allclose(new, theta)
    assert set(times) == {"blinded histogram", "local training", "aggregation"} and len(times["local training"]) == 2
    assert all(s.full_exponentiations >= 1 for s in silos)  # every silo computed c_u for its users this round


def test_the_weights_are_kept_across_rounds_only_while_the_histograms_are_unchanged(monkeypatch):
    """ULDP-AVG-w: the second round reuses c_u (no full-size exponentiation) and still decrypts to the plaintext
    sum; -ws: a user's changed count (or a new Enc(B_u⁻¹)) recomputes it."""
    counts, clipped, noise = federation(seed=4)
    server, silos, _ = setup(counts, bits=1024, bound=30)
    hist = {s.index: s.blinded_histogram(counts[s.index], 0) for s in silos}
    enc_inv = server.inverse_weights(hist)
    calls = []
    real = Silo._weight

    def counting(self, u, count, enc):  # called only for a c_u not in the silo's cache
        calls.append((self.index, u))
        return real(self, u, count, enc)

    monkeypatch.setattr(Silo, "_weight", counting)
    for round_, scale in ((0, 1.0), (1, -0.5)):
        msgs = {s.index: s.weighted_message(counts[s.index], scale * clipped[s.index], noise[s.index], enc_inv, round_)
                for s in silos}
        want = plaintext(counts, scale * clipped, noise).sum(0)
        np.testing.assert_allclose(server.aggregate(msgs), want, rtol=1e-8, atol=1e-9)  # P = 1e-10 per encoded term
        assert len(calls) == int((counts > 0).sum())  # round 1 added none
    sampled = counts.copy()
    sampled[:, 1] = 0  # -ws: user 1 not sampled, the others' n_u unchanged but Enc(B_u⁻¹) is redrawn
    enc_inv = server.inverse_weights({s.index: s.blinded_histogram(sampled[s.index], 2) for s in silos})
    calls.clear()
    msgs = {s.index: s.weighted_message(sampled[s.index], clipped[s.index], noise[s.index], enc_inv, 2) for s in silos}
    # P = 1e-10 per encoded term
    np.testing.assert_allclose(server.aggregate(msgs), plaintext(sampled, clipped, noise).sum(0), rtol=1e-8, atol=1e-9)
    assert len(calls) == int((sampled > 0).sum())


def test_a_user_above_the_record_bound_stops_the_round_instead_of_a_wrong_model():
    """L = lcm(1..N̄) cancels n_u only when n_u's prime powers are ≤ N̄: a user with 31 (prime) records under N̄ = 30
    makes L·n_su/n_u fractional; the decrypted value is then garbage mod n, which the server detects."""
    counts = np.array([[20, 3], [11, 2]])  # user 0: n_u = 31 > 30, prime
    rng = np.random.default_rng(5)
    clipped, noise = rng.normal(scale=0.05, size=(2, 2, 3)), np.zeros((2, 3))
    server, silos, _ = setup(counts, bits=1024, bound=30)
    with pytest.raises(ProtocolError, match="more than N̄ = 30 records"):
        run_round(server, silos, counts, clipped, noise)
    counts[1, 0] = 10  # n_u = 30 ≤ N̄: fine
    got, _, _ = run_round(server, silos, counts, clipped, noise)
    assert np.allclose(got, plaintext(counts, clipped, noise).sum(0), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("U,D,scale", [(1, 1, 5), (3, 7, 1e9), (12, 2, 3e10), (4, 5, 0)])
def test_multi_exp_equals_the_product_of_separate_powmods(U, D, scale):
    """Straus' interleaved windows with signed exponents (negatives through the inverse), zero exponents and
    all-zero columns: the same residues as ∏_u powmod(b_u, e_uj) (b_u⁻¹ for e_uj < 0). Modulus: a 1024-bit n²."""
    from dpfl.papers.kato2024.protocol.encoding import multi_exp

    rng = np.random.default_rng(U * 100 + D)
    server = Server(2, bits=1024, record_bound=30)
    n2 = server.public.nsquare
    bases = [server.public.raw_encrypt(int(rng.integers(1, 10**6))) for _ in range(U)]
    exps = np.rint(rng.normal(scale=scale, size=(U, D)))
    exps[0, 0] = 0
    got = multi_exp(bases, exps, n2)
    for j in range(D):
        want = 1
        for u in range(U):
            e = int(exps[u, j])
            b = bases[u] if e >= 0 else int(gmpy2.invert(bases[u], n2))
            want = want * pow(b, abs(e), n2) % n2
        assert int(got[j]) == want, (j, exps[:, j])
    assert [int(v) for v in multi_exp([], np.zeros((0, 3)), n2)] == [1, 1, 1]


# ------------------------------------------------------------------------------------------ user-level sampling (-ws)


def test_ws_every_user_gets_a_fresh_ciphertext_so_silos_cannot_tell_who_was_sampled():
    """The server sends a ciphertext for every user, Enc(B_u⁻¹) for the sampled ones and Enc(0) for the others and for
    users without records (never a cleartext marker): all are elements of Z_{n²}* of the same kind, and every round's
    are fresh, so what a silo receives is the same whichever users were sampled."""
    counts, _, _ = federation(S=3, U=6, seed=2)  # user 5 has no records anywhere
    server, silos, masks = setup(counts, bits=1024, bound=30)
    n, n2 = server.public.n, server.public.nsquare
    server.receive_histograms({s.index: s.blinded_histogram(counts[s.index], 0) for s in silos})
    seen = set()
    for sampled in ([True, False, True, True, False, True], [False, True, True, False, True, True], [True] * 6):
        sent = server.encrypted_weights(sampled)
        assert len(sent) == 6 and all(type(c) is int and 1 < c < n2 and gmpy2.gcd(c, n) == 1 for c in sent)
        assert not seen & set(sent)  # fresh encryptions: nothing repeats across rounds or users
        seen |= set(sent)
        plain = [server._private.raw_decrypt(c) for c in sent]
        for u in range(6):
            n_u = int(counts[:, u].sum())
            want = int(gmpy2.invert(masks[u] * n_u % n, n)) if sampled[u] and n_u else 0
            assert plain[u] == want, u
    with pytest.raises(ProtocolError, match="sampling decisions"):
        server.encrypted_weights([True] * 5)


def test_ws_round_trains_every_user_and_weights_the_unsampled_ones_by_zero(monkeypatch):
    """secure_round under -ws: the silos train all their users (they do not know the sample) and the unsampled users'
    Enc(0) makes their weight 0: the decrypted sum is the plaintext sum over the sampled users, in both modes. The
    blinded histogram runs once; the server's broadcast every round."""
    import dpfl.fl.local
    from dpfl.fl.flat_model import FlatModel
    from dpfl.models.nets import build_model
    from dpfl.papers.kato2024.federation import Federation
    from dpfl.papers.kato2024.methods import BY_ID
    from dpfl.papers.kato2024.protocol.secure import secure_round
    from dpfl.papers.kato2024.protocol.security import Security

    rng = np.random.default_rng(0)
    n = 40
    run = {"X": rng.normal(size=(n, 13)).astype(np.float32), "y": (rng.random(n) < 0.5).astype(np.int64),
           "silo": rng.integers(0, 2, n), "user": rng.integers(0, 6, n)}
    fed = Federation.build([run], 2, 6, "user", 4, "cpu")
    fm = FlatModel(build_model("heart_logistic", 0, dtype=torch.float64), "bce")
    theta = fm.initial().double()
    for bkt in fed.buckets:
        bkt.X = bkt.X.double()
    hyper = BY_ID["uldp_avg_w"].hyper_params({"eta_g": 10.0, "eta_l": 0.001, "epochs": 2, "clip": 0.1})
    trained = []
    real = dpfl.fl.local.local_sgd
    monkeypatch.setattr(dpfl.fl.local, "local_sgd", lambda fm_, start, part, **kw: trained.append(len(part.pairs))
                        or real(fm_, start, part, **kw))
    for security in (Security("paper"), Security("secure", simulation=True)):
        server = Server(2, bits=1024, record_bound=64, security=security)
        masks = user_masks(b"seed", 6, server.public.n)
        silos = [Silo(s, server.public, {1 - s: b"k" * 32}, masks, record_bound=64, security=security)
                 for s in range(2)]
        state, times = {}, {}
        for round_, sampled in enumerate(([True, True, False, True, False, True], [False] * 5 + [True])):
            trained.clear()
            new, plain = secure_round(theta, fed, fm, hyper, noise_std=0.5, batch=4,
                                      gen=torch.Generator().manual_seed(1), server=server, silos=silos,
                                      round_=round_, q=0.5, sampled=np.array(sampled), times=times, state=state)
            assert sum(trained) == len(fed.silo)  # every (silo, user) pair trained
            want = theta + 10.0 / (6 * 2 * 0.5) * torch.as_tensor(plain)
            assert torch.allclose(new, want, rtol=1e-8, atol=1e-9)
        assert len(times["blinded histogram"]) == 2 and len(times["local training"]) == 4


# ------------------------------------------------------------------------------------------ the decoding error bound


def test_decoding_check_at_its_edge():
    from dpfl.papers.kato2024.protocol.encoding import check_decoding, decoding_error_bound

    plain = np.array([0.3, -1.7, 2.5])
    bound = decoding_error_bound(4, 3)
    assert bound == pytest.approx(7 * 1e-10 / 2)
    assert check_decoding(plain + np.array([0, bound * (1 - 1e-6), 0]), plain, 4, 3) == pytest.approx(bound, rel=1e-5)
    with pytest.raises(ProtocolError, match=r"coordinate 1 decodes .* above the bound \(U_a \+ S\)·P/2 = \(4 \+ 3\)"):
        check_decoding(plain - np.array([0, bound * (1 + 1e-6), 0]), plain, 4, 3)


def test_decoding_error_reaches_the_bound_when_every_rounding_is_half_a_unit_and_one_more_unit_breaks_it():
    """Updates and noise at k + 0.499 encoding units: every ⌊·⌉ is off by 0.499, so the decoded sum is 0.499·(U_a + S)
    units from the plaintext one, just inside (U_a + S)/2; a message one unit (P) further, in the same direction, is
    outside and stops the round."""
    from dpfl.papers.kato2024.protocol.encoding import check_decoding, decoding_error_bound

    counts, _, _ = federation(S=3, U=5, D=4)  # user 4 has no records: U_a = 4
    k = np.random.default_rng(7).integers(10**6, 10**8, size=(3, 5, 4))
    clipped = (k + 0.499) * 1e-10
    noise = (k[:, 0, :] + 0.499) * 1e-10
    server, silos, _ = setup(counts, bits=1024, bound=30)
    got, _, msgs = run_round(server, silos, counts, clipped, noise)
    want = plaintext(counts, clipped, noise).sum(0)
    active = int((counts.sum(0) > 0).sum())
    err = check_decoding(got, want, active, 3)
    assert err == pytest.approx(0.499 * (active + 3) * 1e-10, rel=1e-3) and err < decoding_error_bound(active, 3)
    n, n2 = server.public.n, server.public.nsquare
    msgs[0][2] = msgs[0][2] * (1 + n * (n - server.L)) % n2  # silo 0's coordinate 2 minus one unit (L·1 encoded)
    with pytest.raises(ProtocolError, match="coordinate 2 decodes"):
        check_decoding(server.aggregate(msgs), want, active, 3)


# ------------------------------------------------------------------------------------------ the secure mode


def test_secure_mode_decrypts_to_the_plaintext_with_its_discrete_noise_and_re_randomised_messages():
    from dpfl.papers.kato2024.protocol.security import Security

    counts, clipped, _ = federation()
    secure = Security("secure", simulation=True)
    server = Server(3, bits=1024, record_bound=30, security=secure)
    masks = user_masks(b"mask-seed", 5, server.public.n)
    keys = {(a, b): bytes([a, b]) * 16 for a in range(3) for b in range(3) if a < b}
    silos = [Silo(s, server.public, {o: keys[min(s, o), max(s, o)] for o in range(3) if o != s}, masks,
                  record_bound=30, security=secure) for s in range(3)]
    noise = np.stack([s.draw_noise(0.05, 3, 4) for s in silos])
    assert noise.dtype == np.int64
    for reference in (False, True):
        got, _, msgs = run_round(server, silos, counts, clipped, noise, reference=reference)
        want = plaintext(counts, clipped, noise * 1e-10).sum(0)
        assert np.allclose(got, want, rtol=1e-8, atol=1e-9)
        again = {s.index: s.weighted_message(counts[s.index], clipped[s.index], noise[s.index],
                                             server.encrypted_weights(), 0, reference=reference) for s in silos}
        assert all(set(msgs[s]).isdisjoint(again[s]) for s in msgs)  # the same inputs, fresh ciphertexts


def test_secure_noise_has_the_papers_scale_in_the_models_units():
    """Silo s's discrete Gaussian is drawn in the encoding's units at σ_int = std/(√S·P): decoded (×P) its std is the
    paper's std/√S (2,000 draws: within ≈ 5 standard errors of the variance)."""
    from dpfl.papers.kato2024.protocol.security import Security

    server = Server(2, bits=1024, record_bound=30, security=Security("secure", simulation=True))
    silo = Silo(0, server.public, {1: b"k" * 32}, [1, 1], record_bound=30, security=server.security)
    draws = silo.draw_noise(0.5, 4, 2000) * 1e-10
    assert abs(draws.mean()) < 5 * 0.25 / np.sqrt(2000)
    assert draws.var() == pytest.approx(0.5**2 / 4, rel=5 * np.sqrt(2 / 2000))
    with pytest.raises(ProtocolError, match="paper's mode"):
        Silo(0, server.public, {1: b"k" * 32}, [1, 1], record_bound=30).draw_noise(0.5, 4, 2)


def test_secure_key_exchange_256_bit_seed_and_separate_subkeys():
    """The secure mode: R has 32 bytes, every silo recovers it, the server relays R ⊕ pad with a pad subkey that is not
    the masks' key; the paper's mode: R has 4 bytes from the seeded stream and the pad is the masks' key's first 4."""
    from dpfl.papers.kato2024.protocol.keys import key_exchange
    from dpfl.papers.kato2024.protocol.security import Security

    keys, seeds, relayed = key_exchange(3, security=Security("secure"))
    assert len(set(seeds)) == 1 and len(seeds[0]) == 32
    pad = bytes(a ^ b for a, b in zip(relayed["seed"][1], seeds[0]))  # what silos 0 and 1 padded R with
    assert len(pad) == 32 and pad != keys[0][1] and pad != keys[1][0]
    keys, seeds, relayed = key_exchange(3, np.random.default_rng(0))
    pad = bytes(a ^ b for a, b in zip(relayed["seed"][1], seeds[0]))
    assert len(seeds[0]) == 4 and pad == keys[0][1][:4]
    again, _, _ = key_exchange(3, np.random.default_rng(0))
    assert again[0][1] != keys[0][1]
    assert key_exchange(2, np.random.default_rng(0))[1][0] == seeds[0]  # the paper's R: the seeded stream's
    with pytest.raises(ValueError, match="seeded stream"):
        key_exchange(2)


def test_secure_mode_refuses_small_keys_chosen_primes_and_seeded_secrets_outside_a_simulation():
    import random

    from dpfl.papers.kato2024.protocol.security import Security

    secure = Security("secure")
    with pytest.raises(ValueError, match=r"refuses a 1024-bit Paillier key \(key_bits < 3072\).*simulation: true"):
        Server(2, bits=1024, record_bound=30, security=secure)
    with pytest.raises(ValueError, match="chosen primes are accepted only in a simulation"):
        Server(2, record_bound=30, security=secure, primes=(1000003, 1000033))
    with pytest.raises(ValueError, match="seeded generator is accepted only in a simulation"):
        secure.secret_source(random.Random(0))
    assert isinstance(secure.secret_source(), random.SystemRandom)
    sim = Security("secure", simulation=True)
    assert sim.secret_source(random.Random(0)).random() == random.Random(0).random()
    with pytest.raises(TypeError, match="random.Random"):
        sim.secret_source(np.random.default_rng(0))
    with pytest.raises(ValueError, match="not one of paper, secure"):
        Security("strong")
