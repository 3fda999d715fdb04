import pytest

import hush


def test_version_and_names():
    assert hush.__version__
    assert set(hush.net_profiles()) == {"none", "lan", "wan", "mobile", "shaper"}
    assert "iknp" in hush.cot_sources()


def test_bench_cot_iknp_memory_and_tcp():
    for transport in ("mem", "tcp"):
        r = hush.bench_cot(n=10_000, transport=transport, seed=7)
        assert r["bench"] == "cot"
        assert r["source"] == "iknp"
        assert r["n"] == 10_000
        # IKNP: 128 bits per COT (10,000 rounded up to a multiple of 128), one flight.
        assert r["bytes"] == 128 * 10_112 // 8
        assert r["rounds"] == 1
        assert r["checked"] == 10_000
        assert r["wall_s"] > 0


def test_profile_changes_time_not_bytes():
    fast = hush.bench_cot(n=1000, net="none", transport="mem", seed=1)
    slow = hush.bench_cot(n=1000, net="mobile", transport="mem", seed=1)
    assert fast["bytes"] == slow["bytes"]
    # one one-way flight under an 80 ms latency profile cannot finish sooner
    assert slow["wall_s"] >= 0.08


def test_bad_arguments_raise_python_errors():
    with pytest.raises(ValueError):
        hush.bench_cot(n=0)
    with pytest.raises(ValueError):
        hush.bench_cot(net="moon")
    with pytest.raises(RuntimeError, match="unknown COT source"):
        hush.bench_cot(n=10, source="nope")


def test_bench_aes():
    r = hush.bench_aes(seconds=0.05)
    assert r["blocks_per_s"] > 0
