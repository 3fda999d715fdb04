//! Cache sizes detected at run time (for kernels that choose a blocking or
//! a prefetch strategy by what fits in cache, and for benchmark records).

use std::sync::OnceLock;

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
    // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0006 is
    // checked against the highest extended leaf first.
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

/// One core's L2 in bytes (detected once; None when unknown).
pub fn l2_bytes() -> Option<u64> {
    static L2: OnceLock<Option<u64>> = OnceLock::new();
    *L2.get_or_init(|| cache_bytes(2))
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
    fn l2_is_plausible_when_known() {
        if let Some(b) = l2_bytes() {
            assert!((64 << 10..=64 << 20).contains(&b), "{b}");
        }
    }
}
