//! Fixed-point configurations come from untrusted places (a server's
//! hello, the CLI): out-of-range values are errors, never wrapped into
//! range. Regression for a fuzzing find (`tests/corpus/peer_inference_client/hello-frac-overflow`):
//! `2·frac + 2` overflowed u32, so in release builds a hello with
//! frac = 2^31 passed validation.

use hush_inference::FixedConfig;

#[test]
fn huge_fraction_bits_are_refused() {
    for frac in [1u32 << 31, (1 << 31) - 1, u32::MAX, u32::MAX - 1, 1 << 30, 64, 32, 18] {
        assert!(FixedConfig::new(37, frac).is_err(), "frac {frac}");
        assert!(FixedConfig::new(64, frac).is_err() || frac <= 31, "frac {frac}");
    }
    for bits in [u32::MAX, 65, 1 << 31] {
        assert!(FixedConfig::new(bits, 12).is_err(), "bits {bits}");
    }
    assert!(FixedConfig::new(37, 12).is_ok());
    assert!(FixedConfig::new(64, 31).is_ok());
    assert!(FixedConfig::new(64, 32).is_err());
}
