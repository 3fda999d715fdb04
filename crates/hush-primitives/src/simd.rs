//! The one place that decides which SIMD kernels run.
//!
//! Every kernel with a vector path (AES in [`crate::aes`], the bit-matrix
//! [`crate::transpose`], the LPN / GGM kernels of `hush-correlations`, the
//! batched DCF evaluator of `hush-fss`, the bit-sliced AND layers of
//! `hush-replicated`) asks [`level()`] at the call, and runs the variant for
//! that [`Level`]:
//!
//! * [`Level::Avx512`] — AVX-512 F + BW, VAES, AES-NI, AVX2 and BMI2;
//! * [`Level::Avx2`] — AVX2 and AES-NI (the x86-64 CPUs of the last decade
//!   without AVX-512);
//! * [`Level::Portable`] — no intrinsics at all (any CPU, any architecture).
//!
//! The CPU's level is detected once ([`detected`]). The environment
//! variable `HUSH_SIMD=avx512|avx2|portable` lowers it for the whole
//! process (to measure or test the slower paths on a fast machine); asking
//! for a level the CPU lacks, or for an unknown level, is an error that
//! [`check_env`] reports (the `hush` binary calls it at start and exits
//! non-zero); [`level`] itself never fails — on a bad value it prints one
//! warning and keeps the detected level. [`with_level`] overrides the level
//! for one closure on the calling thread, so that one test process can run
//! every level the machine supports against the portable path.
//!
//! Soundness: a kernel compiled with `#[target_feature]` runs only when
//! `level() ≥` its level, and `level()` never exceeds [`detected()`], so
//! the instructions exist. Anything cached across calls (round keys and
//! the like) must not depend on the overridable level.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// A SIMD level, ordered: `Portable < Avx2 < Avx512`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Portable = 1,
    Avx2 = 2,
    Avx512 = 3,
}

impl Level {
    /// Every level, slowest first.
    pub const ALL: [Level; 3] = [Level::Portable, Level::Avx2, Level::Avx512];

    /// The name used by `HUSH_SIMD` and in benchmark records.
    pub fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }

    /// Parses a `HUSH_SIMD` value (case-insensitive).
    pub fn parse(s: &str) -> Option<Level> {
        match s.trim().to_ascii_lowercase().as_str() {
            "portable" | "none" | "scalar" => Some(Level::Portable),
            "avx2" => Some(Level::Avx2),
            "avx512" | "avx-512" => Some(Level::Avx512),
            _ => None,
        }
    }

    /// The CPU features this level requires (x86-64 names).
    pub fn features(self) -> &'static [&'static str] {
        match self {
            Level::Portable => &[],
            Level::Avx2 => &["avx2", "aes"],
            Level::Avx512 => &["avx2", "aes", "avx512f", "avx512bw", "vaes", "bmi2"],
        }
    }

    /// Whether this CPU runs the level's kernels.
    pub fn supported(self) -> bool {
        self <= detected()
    }

    fn from_u8(v: u8) -> Option<Level> {
        match v {
            1 => Some(Level::Portable),
            2 => Some(Level::Avx2),
            3 => Some(Level::Avx512),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a requested level cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimdError {
    /// `HUSH_SIMD` holds no known level name.
    Unknown(String),
    /// The CPU lacks a feature of the requested level.
    Unsupported { wanted: Level, detected: Level, missing: Vec<&'static str> },
}

impl fmt::Display for SimdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimdError::Unknown(v) => write!(f, "HUSH_SIMD={v:?} is not a SIMD level (use avx512, avx2 or portable)"),
            SimdError::Unsupported { wanted, detected, missing } => write!(
                f,
                "SIMD level {wanted} is not supported by this CPU (missing: {}; this CPU supports up to {detected})",
                missing.join(", ")
            ),
        }
    }
}

impl std::error::Error for SimdError {}

/// The features of `l` this CPU lacks.
fn missing(l: Level) -> Vec<&'static str> {
    l.features().iter().copied().filter(|f| !has(f)).collect()
}

#[cfg(target_arch = "x86_64")]
fn has(f: &str) -> bool {
    use std::arch::is_x86_feature_detected as d;
    match f {
        "avx2" => d!("avx2"),
        "aes" => d!("aes"),
        "avx512f" => d!("avx512f"),
        "avx512bw" => d!("avx512bw"),
        "vaes" => d!("vaes"),
        "bmi2" => d!("bmi2"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn has(_f: &str) -> bool {
    false
}

static DETECTED: AtomicU8 = AtomicU8::new(0);
static CHOSEN: AtomicU8 = AtomicU8::new(0);

thread_local! {
    static FORCED: Cell<u8> = const { Cell::new(0) };
}

/// The best level this CPU supports (detected once).
pub fn detected() -> Level {
    if let Some(l) = Level::from_u8(DETECTED.load(Ordering::Relaxed)) {
        return l;
    }
    let l = [Level::Avx512, Level::Avx2].into_iter().find(|&l| missing(l).is_empty()).unwrap_or(Level::Portable);
    DETECTED.store(l as u8, Ordering::Relaxed);
    l
}

/// The level `HUSH_SIMD` asks for (None when unset or empty), checked
/// against the CPU.
pub fn env_level() -> Result<Option<Level>, SimdError> {
    let Some(v) = std::env::var_os("HUSH_SIMD") else { return Ok(None) };
    let v = v.to_string_lossy().into_owned();
    if v.trim().is_empty() {
        return Ok(None);
    }
    let l = Level::parse(&v).ok_or(SimdError::Unknown(v))?;
    if !l.supported() {
        return Err(SimdError::Unsupported { wanted: l, detected: detected(), missing: missing(l) });
    }
    Ok(Some(l))
}

/// Checks `HUSH_SIMD`: Ok(the process-wide level), or the error to print.
/// Binaries call this at start so that a bad value stops them.
pub fn check_env() -> Result<Level, SimdError> {
    Ok(env_level()?.unwrap_or_else(detected))
}

/// The process-wide level: `HUSH_SIMD` if valid and supported, else the
/// detected one (with one warning on stderr for a bad value).
#[inline]
pub fn process_level() -> Level {
    // Fast path inlined into every kernel's dispatch (an out-of-line call
    // here was ~2 % of SilentFlow's profile at level avx2); the first call
    // reads the environment out of line.
    match Level::from_u8(CHOSEN.load(Ordering::Relaxed)) {
        Some(l) => l,
        None => choose_process_level(),
    }
}

#[cold]
#[inline(never)]
fn choose_process_level() -> Level {
    let l = match check_env() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hush: warning: {e}; using {}", detected());
            detected()
        }
    };
    // First writer wins (so that the warning is printed at most a few times
    // under a race, and every caller sees one value afterwards).
    match CHOSEN.compare_exchange(0, l as u8, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => l,
        Err(v) => Level::from_u8(v).unwrap_or(l),
    }
}

/// The level kernels use on this thread now: a [`with_level`] override,
/// else [`process_level`]. Never above [`detected`].
#[inline]
pub fn level() -> Level {
    match Level::from_u8(FORCED.with(|c| c.get())) {
        Some(l) => l,
        None => process_level(),
    }
}

/// Runs `f` with [`level`] = `l` on this thread (nested calls restore the
/// outer value; other threads are unaffected). Errs, without running `f`,
/// when the CPU lacks `l`.
pub fn with_level<R>(l: Level, f: impl FnOnce() -> R) -> Result<R, SimdError> {
    if !l.supported() {
        return Err(SimdError::Unsupported { wanted: l, detected: detected(), missing: missing(l) });
    }
    struct Restore(u8);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FORCED.with(|c| c.replace(l as u8)));
    Ok(f())
}

/// The levels this CPU supports, slowest first.
pub fn supported_levels() -> Vec<Level> {
    Level::ALL.into_iter().filter(|l| l.supported()).collect()
}

/// For tests: runs `f(level)` under every level in [`Level::ALL`] that this
/// CPU supports, printing a note for each one it skips.
pub fn for_each_level(what: &str, mut f: impl FnMut(Level)) {
    for l in Level::ALL {
        if let Err(e) = with_level(l, || f(l)) {
            println!("{what}: skipping SIMD level {l}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for l in Level::ALL {
            assert_eq!(Level::parse(l.name()), Some(l));
        }
        assert_eq!(Level::parse("AVX512"), Some(Level::Avx512));
        assert_eq!(Level::parse("sse9"), None);
        assert!(Level::Portable < Level::Avx2 && Level::Avx2 < Level::Avx512);
    }

    #[test]
    fn override_is_scoped_and_checked() {
        let outer = level();
        assert!(outer <= detected());
        assert!(Level::Portable.supported());
        let got = with_level(Level::Portable, || {
            let inner = with_level(detected(), level).unwrap();
            assert_eq!(inner, detected());
            level()
        })
        .unwrap();
        assert_eq!(got, Level::Portable);
        assert_eq!(level(), outer);
        for l in Level::ALL {
            let r = with_level(l, level);
            assert_eq!(r.is_ok(), l <= detected(), "{l}");
            if let Err(e) = r {
                assert!(e.to_string().contains("not supported"), "{e}");
            }
        }
        // Other threads keep the process level.
        with_level(Level::Portable, || {
            let t = std::thread::spawn(level).join().unwrap();
            assert_eq!(t, process_level());
        })
        .unwrap();
    }

    #[test]
    fn error_messages_name_the_problem() {
        let e = SimdError::Unknown("sse9".into());
        assert!(e.to_string().contains("sse9"));
        let e = SimdError::Unsupported { wanted: Level::Avx512, detected: Level::Avx2, missing: vec!["vaes"] };
        let s = e.to_string();
        assert!(s.contains("avx512") && s.contains("vaes") && s.contains("avx2"), "{s}");
    }
}
