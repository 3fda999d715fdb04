//! What every benchmark record says about the machine: the CPU model, the
//! SIMD level the kernels ran at, and the L2 / L3 sizes.

use crate::Record;
use serde_json::Value;

/// Adds `cpu`, `simd`, `l2_bytes`, `l3_bytes` to `rec` (the cache sizes
/// are per instance — one core's L2, one L3 slice as the OS reports it —
/// and null when unknown).
pub fn machine_fields(rec: &mut Record) {
    rec.set("cpu", cpu_model())
        .set("simd", hush_primitives::simd::level().name())
        .set("l2_bytes", cache_bytes(2).map_or(Value::Null, Value::from))
        .set("l3_bytes", cache_bytes(3).map_or(Value::Null, Value::from));
}

/// The CPU's model name: `/proc/cpuinfo`, else the CPUID brand string,
/// else "unknown".
pub fn cpu_model() -> String {
    if let Ok(s) = std::fs::read_to_string("/proc/cpuinfo") {
        for line in s.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == "model name" && !v.trim().is_empty() {
                    return v.trim().to_string();
                }
            }
        }
    }
    cpuid_brand().unwrap_or_else(|| "unknown".into())
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn cpuid_brand() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 CPU; the brand leaves are
    // checked against the highest extended leaf first.
    unsafe {
        if __cpuid(0x8000_0000).eax < 0x8000_0004 {
            return None;
        }
        let mut b = Vec::with_capacity(48);
        for leaf in 0x8000_0002u32..=0x8000_0004 {
            let r = __cpuid(leaf);
            for w in [r.eax, r.ebx, r.ecx, r.edx] {
                b.extend_from_slice(&w.to_le_bytes());
            }
        }
        let s = String::from_utf8_lossy(&b).trim_matches(char::from(0)).trim().to_string();
        (!s.is_empty()).then_some(s)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_brand() -> Option<String> {
    None
}

pub use hush_primitives::cache::cache_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_present() {
        let mut r = Record::new("t");
        machine_fields(&mut r);
        for k in ["cpu", "simd", "l2_bytes", "l3_bytes"] {
            assert!(r.get(k).is_some(), "{k}");
        }
        assert!(!r.get("cpu").unwrap().as_str().unwrap().is_empty());
        println!("{}", r.json());
    }
}
