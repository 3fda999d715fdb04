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

/// Size in bytes of CPU 0's unified (or data) cache of `level`: sysfs,
/// else CPUID (extended leaf 0x8000_0006), else None.
pub fn cache_bytes(level: u32) -> Option<u64> {
    sysfs_cache(level).or_else(|| cpuid_cache(level))
}

fn sysfs_cache(level: u32) -> Option<u64> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let read = |p: &std::path::Path, f: &str| std::fs::read_to_string(p.join(f)).ok().map(|s| s.trim().to_string());
    for e in dir.flatten() {
        let p = e.path();
        if !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("index")) {
            continue;
        }
        if read(&p, "level").and_then(|l| l.parse::<u32>().ok()) != Some(level) {
            continue;
        }
        if !matches!(read(&p, "type").as_deref(), Some("Unified") | Some("Data")) {
            continue;
        }
        if let Some(b) = read(&p, "size").and_then(|s| parse_size(&s)) {
            return Some(b);
        }
    }
    None
}

/// "1024K", "32M", "512" → bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mul)
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn cpuid_cache(level: u32) -> Option<u64> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: as in `cpuid_brand`.
    unsafe {
        if __cpuid(0x8000_0000).eax < 0x8000_0006 {
            return None;
        }
        let r = __cpuid(0x8000_0006);
        let b = match level {
            2 => (r.ecx >> 16) as u64 * 1024,
            // Units of 512 KiB (AMD; 0 on CPUs that do not report it here).
            3 => (r.edx >> 18) as u64 * 512 * 1024,
            _ => 0,
        };
        (b > 0).then_some(b)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_cache(_level: u32) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("48"), Some(48));
        assert_eq!(parse_size("x"), None);
    }

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
