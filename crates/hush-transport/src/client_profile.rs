//! Weak-client profiles: emulate the small client devices the papers
//! measure on, as [`crate::NetProfile`] emulates their networks.
//!
//! * `weak` — TAMI-MPC's client: an 800 MHz core with 512 MiB;
//! * `tiny` — SilentFlow's client: a 500 MHz core with 256 MiB;
//! * `none` — no limit.
//!
//! **CPU.** A profile's clock becomes a CPU *share* of one core of this
//! machine: share = profile MHz ÷ this core's MHz, where this core's clock
//! is the `cpu MHz` line of `/proc/cpuinfo` (the clock the kernel reports —
//! on a VM the host's nominal clock; turbo may run faster, so the share is,
//! if anything, generous to the client). It is a share of time, not a
//! frequency: memory latency and caches are this machine's, so an
//! emulated 800 MHz client is faster than a real one on memory-bound work.
//! [`CpuLimit::apply`] limits the *calling thread* (and whatever it
//! spawns afterwards, such as an out-of-process module), trying in order:
//! 1. cgroup v2 (`cpu.max` on a threaded child cgroup, the thread moved
//!    there through `cgroup.threads`) where the v2 hierarchy has the `cpu`
//!    controller;
//! 2. cgroup v1 (`cpu.cfs_quota_us` on a child of the thread's `cpu`
//!    cgroup, the thread moved there through `tasks`, which takes thread
//!    ids in v1);
//! 3. a duty-cycle throttle: the thread sleeps, at each [`CpuLimit::tick`]
//!    (the throttled channel of [`Throttled`] ticks on every send and
//!    receive), for `cpu·(1/share − 1)` where `cpu` is the thread CPU time
//!    it used since the last tick — as a core `1/share` times slower would
//!    have needed. Only the calling thread is throttled this way.
//!
//! [`CpuLimit::method`] says which one ran; the limit is lifted (the thread
//! moved back, the cgroup removed) when the [`CpuLimit`] is dropped.
//!
//! **Memory.** A profile's memory is a byte budget; the callers enforce it
//! as measured peak (inference: `--max-mem`; COT: the per-party batch
//! budget), not here.

use crate::{Channel, Cost, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A client device to emulate.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientProfile {
    pub name: &'static str,
    /// Clock to emulate (MHz); `None` = unlimited.
    pub mhz: Option<f64>,
    /// Memory of the device (bytes); `None` = unlimited.
    pub mem: Option<u64>,
    /// Where the figures come from.
    pub source: &'static str,
}

impl ClientProfile {
    pub fn none() -> Self {
        ClientProfile { name: "none", mhz: None, mem: None, source: "no limit" }
    }
    /// TAMI-MPC's client (800 MHz, 512 MB).
    pub fn weak() -> Self {
        ClientProfile { name: "weak", mhz: Some(800.0), mem: Some(512 << 20), source: "TAMI-MPC's client: 800 MHz, 512 MB" }
    }
    /// SilentFlow's client (500 MHz, 256 MB).
    pub fn tiny() -> Self {
        ClientProfile { name: "tiny", mhz: Some(500.0), mem: Some(256 << 20), source: "SilentFlow's client: 500 MHz, 256 MB" }
    }
    pub fn by_name(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::none()),
            "weak" => Some(Self::weak()),
            "tiny" => Some(Self::tiny()),
            _ => None,
        }
    }
    pub fn names() -> &'static [&'static str] {
        &["none", "weak", "tiny"]
    }
    /// The CPU share of one core of this machine (profile MHz ÷ this
    /// core's MHz, at most 1), or `None` for no limit.
    pub fn cpu_share(&self) -> Option<f64> {
        let mhz = self.mhz?;
        Some((mhz / host_mhz().unwrap_or(mhz)).clamp(0.01, 1.0))
    }
    /// One line for records: the profile, its share and how the host clock was read.
    pub fn describe(&self) -> String {
        match (self.mhz, self.mem) {
            (Some(m), mem) => format!(
                "{} ({}): CPU share {:.3} of one core = {m:.0} MHz / {:.0} MHz (this core's `cpu MHz` in /proc/cpuinfo){}",
                self.name,
                self.source,
                self.cpu_share().unwrap_or(1.0),
                host_mhz().unwrap_or(m),
                mem.map(|b| format!(", memory budget {} MiB", b >> 20)).unwrap_or_default()
            ),
            _ => "none: no limit".into(),
        }
    }
}

/// This core's clock in MHz, from `/proc/cpuinfo` (first `cpu MHz` line).
pub fn host_mhz() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines().find(|l| l.starts_with("cpu MHz")).and_then(|l| l.split(':').nth(1)).and_then(|v| v.trim().parse().ok())
}

/// How a CPU limit is enforced.
#[derive(Debug)]
enum How {
    None,
    /// A cgroup we made (its folder) and where the thread was before.
    Cgroup { dir: PathBuf, back: PathBuf },
    DutyCycle { share: f64, last_cpu: f64, debt: f64 },
}

/// A CPU limit on one thread (see the module doc); lifted on drop.
#[derive(Debug)]
pub struct CpuLimit {
    how: How,
    method: String,
    tid: u64,
}

/// The quota's period: short, so that a run shorter than a period (a small
/// model's whole inference) is throttled too — CFS lets a cgroup burst
/// through its quota within one period.
const PERIOD_US: u64 = 10_000;

fn tid() -> u64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

/// Thread CPU time of the calling thread (seconds).
pub fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn write(p: &Path, s: &str) -> std::io::Result<()> {
    std::fs::write(p, s)
}

/// The calling thread's cgroup path for a v1 controller (or "" for v2).
fn own_cgroup(controller: Option<&str>) -> Option<String> {
    let s = std::fs::read_to_string("/proc/thread-self/cgroup").ok()?;
    for l in s.lines() {
        let mut it = l.splitn(3, ':');
        let (_, ctrls, path) = (it.next()?, it.next()?, it.next()?);
        match controller {
            None if ctrls.is_empty() => return Some(path.to_string()),
            Some(c) if ctrls.split(',').any(|x| x == c) => return Some(path.to_string()),
            _ => {}
        }
    }
    None
}

/// Mount point of the v2 hierarchy with the cpu controller, or of the v1 cpu controller.
fn mount_of(v2: bool) -> Option<PathBuf> {
    let s = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for l in s.lines() {
        let (pre, post) = l.split_once(" - ")?;
        let mut f = post.split_whitespace();
        let fstype = f.next()?;
        let _src = f.next();
        let opts = f.next().unwrap_or("");
        let mnt = pre.split_whitespace().nth(4)?;
        if v2 && fstype == "cgroup2" {
            let ctl = std::fs::read_to_string(Path::new(mnt).join("cgroup.controllers")).unwrap_or_default();
            if ctl.split_whitespace().any(|c| c == "cpu") {
                return Some(PathBuf::from(mnt));
            }
        }
        if !v2 && fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") {
            return Some(PathBuf::from(mnt));
        }
    }
    None
}

fn try_v2(share: f64, t: u64) -> std::result::Result<(PathBuf, PathBuf), String> {
    let mnt = mount_of(true).ok_or("no cgroup v2 hierarchy with the cpu controller")?;
    let own = own_cgroup(None).ok_or("no v2 cgroup in /proc/thread-self/cgroup")?;
    let base = mnt.join(own.trim_start_matches('/'));
    let dir = base.join(format!("hush-client-{}-{t}", std::process::id()));
    let e = |w: &str, x: std::io::Error| format!("{w}: {x}");
    std::fs::create_dir(&dir).map_err(|x| e("mkdir", x))?;
    let r = (|| {
        write(&dir.join("cgroup.type"), "threaded").map_err(|x| e("cgroup.type", x))?;
        let _ = write(&base.join("cgroup.subtree_control"), "+cpu");
        write(&dir.join("cpu.max"), &format!("{} {PERIOD_US}", ((share * PERIOD_US as f64) as u64).max(1000))).map_err(|x| e("cpu.max", x))?;
        write(&dir.join("cgroup.threads"), &t.to_string()).map_err(|x| e("cgroup.threads", x))
    })();
    match r {
        Ok(()) => Ok((dir, base.join("cgroup.threads"))),
        Err(m) => {
            let _ = std::fs::remove_dir(&dir);
            Err(m)
        }
    }
}

fn try_v1(share: f64, t: u64) -> std::result::Result<(PathBuf, PathBuf), String> {
    let mnt = mount_of(false).ok_or("no cgroup v1 cpu controller mounted")?;
    let own = own_cgroup(Some("cpu")).ok_or("no v1 cpu cgroup in /proc/thread-self/cgroup")?;
    let base = mnt.join(own.trim_start_matches('/'));
    let dir = base.join(format!("hush-client-{}-{t}", std::process::id()));
    let e = |w: &str, x: std::io::Error| format!("{w}: {x}");
    std::fs::create_dir(&dir).map_err(|x| e("mkdir", x))?;
    let r = (|| {
        write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string()).map_err(|x| e("cpu.cfs_period_us", x))?;
        write(&dir.join("cpu.cfs_quota_us"), &((share * PERIOD_US as f64) as u64).max(1000).to_string()).map_err(|x| e("cpu.cfs_quota_us", x))?;
        write(&dir.join("tasks"), &t.to_string()).map_err(|x| e("tasks", x))
    })();
    match r {
        Ok(()) => Ok((dir, base.join("tasks"))),
        Err(m) => {
            let _ = std::fs::remove_dir(&dir);
            Err(m)
        }
    }
}

impl CpuLimit {
    /// No limit.
    pub fn none() -> Self {
        CpuLimit { how: How::None, method: "none".into(), tid: 0 }
    }

    /// Limits the calling thread to `share` of one core (see the module
    /// doc for the methods tried); `None` = no limit. Set
    /// `HUSH_CPU_LIMIT=duty-cycle` to skip the cgroups.
    pub fn apply(share: Option<f64>) -> Self {
        let force_duty = std::env::var("HUSH_CPU_LIMIT").map(|v| v == "duty-cycle").unwrap_or(false);
        Self::apply_with(share, force_duty)
    }

    /// [`CpuLimit::apply`], with the cgroups skipped when `duty_cycle_only`.
    pub fn apply_with(share: Option<f64>, force_duty: bool) -> Self {
        let Some(share) = share else { return Self::none() };
        let t = tid();
        let mut why = Vec::new();
        if !force_duty {
            for (name, f) in [("cgroup v2", try_v2 as fn(f64, u64) -> _), ("cgroup v1", try_v1)] {
                match f(share, t) {
                    Ok((dir, back)) => {
                        let quota = ((share * PERIOD_US as f64) as u64).max(1000);
                        let method = format!(
                            "{name} CPU quota {quota} µs per {PERIOD_US} µs on the client thread ({}; threads and processes it spawns inherit it)",
                            dir.display()
                        );
                        return CpuLimit { how: How::Cgroup { dir, back }, method, tid: t };
                    }
                    Err(m) => why.push(format!("{name}: {m}")),
                }
            }
        } else {
            why.push("HUSH_CPU_LIMIT=duty-cycle".into());
        }
        CpuLimit {
            how: How::DutyCycle { share, last_cpu: thread_cpu_s(), debt: 0.0 },
            method: format!(
                "duty-cycle throttle: the client thread sleeps cpu·(1/{share:.3} − 1) after each message (its thread CPU time since the last one); cgroups unavailable ({})",
                why.join("; ")
            ),
            tid: t,
        }
    }

    /// How the limit is enforced (for records).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Duty-cycle throttle: sleeps for the CPU time used since the last
    /// tick times (1/share − 1). A no-op for the other methods. Call from
    /// the limited thread.
    pub fn tick(&mut self) {
        if let How::DutyCycle { share, last_cpu, debt } = &mut self.how {
            let now = thread_cpu_s();
            *debt += (now - *last_cpu).max(0.0) * (1.0 / *share - 1.0);
            *last_cpu = now;
            if *debt >= 0.001 {
                let t0 = Instant::now();
                std::thread::sleep(Duration::from_secs_f64(*debt));
                *debt -= t0.elapsed().as_secs_f64();
            }
        }
    }
}

impl Drop for CpuLimit {
    fn drop(&mut self) {
        if let How::Cgroup { dir, back } = &self.how {
            // move the thread back (by id: works from any thread, v1 and v2
            // alike), and anything it spawned that is still in the cgroup
            // (a module process that outlives the limit by a moment), then
            // remove the empty cgroup
            let _ = write(back, &self.tid.to_string());
            let list = if back.ends_with("cgroup.threads") { "cgroup.threads" } else { "tasks" };
            for _ in 0..50 {
                for t in std::fs::read_to_string(dir.join(list)).unwrap_or_default().split_whitespace() {
                    let _ = write(back, t);
                }
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A channel whose every send and receive first ticks a [`CpuLimit`]
/// (the duty-cycle throttle; free for the cgroup methods).
pub struct Throttled<C> {
    pub inner: C,
    pub limit: CpuLimit,
}

impl<C: Channel> Channel for Throttled<C> {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        self.limit.tick();
        self.inner.send(payload)
    }
    fn recv(&mut self) -> Result<Vec<u8>> {
        self.limit.tick();
        self.inner.recv()
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, timeout: Duration) {
        self.inner.set_timeout(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(secs: f64) {
        let c0 = thread_cpu_s();
        let mut x = 0u64;
        while thread_cpu_s() - c0 < secs {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
        }
        std::hint::black_box(x);
    }

    #[test]
    fn profiles() {
        assert_eq!(ClientProfile::by_name("weak").unwrap().mem, Some(512 << 20));
        assert_eq!(ClientProfile::by_name("tiny").unwrap().mhz, Some(500.0));
        assert!(ClientProfile::none().cpu_share().is_none());
        assert!(ClientProfile::by_name("fast").is_none());
        let s = ClientProfile::weak().cpu_share().unwrap();
        assert!(s > 0.0 && s <= 1.0);
    }

    /// Whatever method the machine allows, a thread limited to a quarter
    /// of a core needs about four times the wall time for its CPU work.
    #[test]
    fn limit_stretches_wall_time() {
        for force in [false, true] {
            let h = std::thread::spawn(move || {
                let mut l = CpuLimit::apply_with(Some(0.25), force);
                let method = l.method().to_string();
                let t = Instant::now();
                for _ in 0..20 {
                    spin(0.01);
                    l.tick();
                }
                (t.elapsed().as_secs_f64(), method)
            });
            let (wall, method) = h.join().unwrap();
            // 0.2 s of CPU at a quarter share ≈ 0.8 s (other load only adds)
            eprintln!("{method}: {wall:.3} s");
            assert!(wall > 0.5, "{method}: {wall} s");
        }
    }
}
