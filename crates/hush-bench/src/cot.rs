//! `hush bench cot`: n COTs from a named source, both parties in this
//! process, over loopback TCP (or memory) with an emulated network.

pub mod mem;

use crate::{connect_pair, machine_note, Error, Record, Result, Transport};
use hush_correlations::registry::{setup_receiver_info, setup_sender_info, SetupInfo, SourceConfig};
use hush_correlations::silentflow;
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, ClientProfile, Cost, CpuLimit, NetProfile, Throttled};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// COTs produced per call into the caller's buffer.
pub const BATCH: usize = 1 << 20;

/// What to run.
#[derive(Clone, Debug)]
pub struct CotBench {
    pub source: SourceConfig,
    pub n: usize,
    pub profile: NetProfile,
    pub transport: Transport,
    /// Seed for all randomness (deterministic runs); OS randomness if None.
    pub seed: Option<u64>,
    /// Run both parties at this SIMD level instead of the process's
    /// (`--table`'s avx2 column); None = the process level (`HUSH_SIMD` or
    /// the best the CPU has).
    pub level: Option<hush_primitives::simd::Level>,
}

struct PartyOut {
    info: SetupInfo,
    /// How the client profile's CPU limit was enforced on this party.
    limit_method: String,
    /// Module crossings / bytes (to+from) during generation (after setup).
    crossings: u64,
    module_bytes: u64,
    peak_mem: i64,
    setup_s: f64,
    start: Instant,
    end: Instant,
    /// The party thread's CPU time during generation.
    cpu_s: f64,
    /// The CPU the party thread was pinned to.
    cpu: Option<usize>,
    cost_setup: Cost,
    cost: Cost,
    last: Vec<Block>,
    choices: Option<BitVec>,
    delta: Option<Block>,
}

fn rng(seed: Option<u64>, party: u64) -> Prg {
    match seed {
        Some(s) => Prg::with_nonce(Block(s as u128), party),
        None => Prg::from_os(),
    }
}

/// Runs the benchmark and checks the COT relation on the last batch.
pub fn bench_cot(cfg: &CotBench) -> Result<Record> {
    bench_cot_profiled(cfg, &ClientProfile::none())
}

/// [`bench_cot`] with the receiver (the client's side, as in inference)
/// under a weak-client profile: its thread's CPU share limited (see
/// [`hush_transport::client_profile`]) and the profile's memory as the
/// per-party `max_mem` budget unless a smaller one is set.
pub fn bench_cot_profiled(cfg: &CotBench, client: &ClientProfile) -> Result<Record> {
    let mut cfg = cfg.clone();
    if let Some(m) = client.mem {
        cfg.source.max_mem = Some(cfg.source.max_mem.map_or(m as usize, |b| b.min(m as usize)));
    }
    let cfg = &cfg;
    let share = client.cpu_share();
    if cfg.n == 0 {
        return Err(Error::Invalid("--n must be at least 1".into()));
    }
    let (mut ca, cb) = connect_pair(cfg.transport, cfg.profile.clone())?;
    let barrier = Arc::new(Barrier::new(2));
    let n = cfg.n;
    let (b1, b2) = (barrier.clone(), barrier);
    let (s1, s2) = (cfg.source.clone(), cfg.source.clone());
    let seed = cfg.seed;
    let level = cfg.level;
    let sender = std::thread::spawn(move || at_level(level, move || -> Result<PartyOut> {
        mem::enter(0);
        let cpu = crate::pin_party(0);
        let t = Instant::now();
        let mut r = rng(seed, 0);
        let (mut src, info) = setup_sender_info(&s1, &mut *ca, &mut r)?;
        let setup_s = t.elapsed().as_secs_f64();
        let cost_setup = ca.cost();
        let m0 = info.module.as_ref().map(silentflow::stats).unwrap_or_default();
        // The caller's output buffer is allocated and touched before the
        // clock starts (it is the caller's, not the protocol's).
        let mut q = vec![Block::ONES; n.min(BATCH)];
        b1.wait();
        let c0 = thread_cpu_s();
        let start = Instant::now();
        let mut done = 0;
        while done < n {
            let m = (n - done).min(BATCH);
            src.send_cots(&mut *ca, &mut q[..m])?;
            done += m;
        }
        let end = Instant::now();
        let cpu_s = thread_cpu_s() - c0;
        let m = info.module.as_ref().map(silentflow::stats).unwrap_or_default() - m0;
        let last = (n - 1) % BATCH + 1;
        q.truncate(last);
        let delta = Some(src.delta());
        drop(src);
        Ok(PartyOut {
            info,
            limit_method: "none".into(),
            crossings: m.crossings,
            module_bytes: m.bytes_to_module + m.bytes_from_module,
            peak_mem: mem::peak(0),
            setup_s,
            start,
            end,
            cpu_s,
            cpu,
            cost_setup,
            cost: ca.cost(),
            last: q,
            choices: None,
            delta,
        })
    }));
    let receiver = std::thread::spawn(move || at_level(level, move || -> Result<PartyOut> {
        mem::enter(1);
        let cpu = crate::pin_party(1);
        // the client profile's CPU limit on this thread (and what it spawns,
        // such as a module process), lifted when the channel is dropped
        let limit = CpuLimit::apply(share);
        let limit_method = limit.method().to_string();
        let mut cb = Throttled { inner: cb, limit };
        let cb: &mut dyn Channel = &mut cb;
        let t = Instant::now();
        let mut r = rng(seed, 1);
        let (mut src, info) = setup_receiver_info(&s2, &mut *cb, &mut r)?;
        let setup_s = t.elapsed().as_secs_f64();
        let cost_setup = cb.cost();
        let m0 = info.module.as_ref().map(silentflow::stats).unwrap_or_default();
        let mut t = vec![Block::ONES; n.min(BATCH)];
        b2.wait();
        let c0 = thread_cpu_s();
        let start = Instant::now();
        let mut ch = BitVec::zeros(0);
        let mut done = 0;
        while done < n {
            let m = (n - done).min(BATCH);
            src.recv_cots(&mut *cb, &mut ch, &mut t[..m])?;
            done += m;
        }
        let end = Instant::now();
        let cpu_s = thread_cpu_s() - c0;
        let m = info.module.as_ref().map(silentflow::stats).unwrap_or_default() - m0;
        let last = (n - 1) % BATCH + 1;
        t.truncate(last);
        drop(src);
        Ok(PartyOut {
            info,
            limit_method,
            crossings: m.crossings,
            module_bytes: m.bytes_to_module + m.bytes_from_module,
            peak_mem: mem::peak(1),
            setup_s,
            start,
            end,
            cpu_s,
            cpu,
            cost_setup,
            cost: cb.cost(),
            last: t,
            choices: Some(ch),
            delta: None,
        })
    }));
    let s = sender.join().map_err(|_| Error::Panic)??;
    let r = receiver.join().map_err(|_| Error::Panic)??;
    // Check the COT relation on every output of the last batch.
    let delta = s.delta.unwrap_or_default();
    let ch = r.choices.as_ref().expect("receiver returns choices");
    for i in 0..s.last.len() {
        if r.last[i] != s.last[i] ^ delta.and_bit(ch.get(i)) {
            return Err(Error::Check(format!("COT relation fails at output {i} of the last batch")));
        }
    }
    let wall = s.end.max(r.end).duration_since(s.start.min(r.start)).as_secs_f64();
    let cs = s.cost - s.cost_setup;
    let cr = r.cost - r.cost_setup;
    let bytes = cs.bytes_sent + cr.bytes_sent;
    let mut rec = Record::new("cot");
    rec.set("source", cfg.source.name.as_str())
        .set("n", n as u64)
        .set("net", cfg.profile.name.as_str())
        .set("transport", cfg.transport.name())
        .set("link", crate::link_note(cfg.transport))
        .set("wall_s", wall)
        .set("setup_s", s.setup_s.max(r.setup_s))
        .set("bytes", bytes)
        .set("rounds", cs.rounds.max(cr.rounds))
        .set("cots_per_s", n as f64 / wall)
        .set("bits_per_cot", bytes as f64 * 8.0 / n as f64)
        .set("sender_s", s.end.duration_since(s.start).as_secs_f64())
        .set("receiver_s", r.end.duration_since(r.start).as_secs_f64())
        .set("sender_cpu_s", s.cpu_s)
        .set("receiver_cpu_s", r.cpu_s)
        .set("pinning", pinning(s.cpu, r.cpu).as_str())
        .set("sender_bytes_sent", cs.bytes_sent)
        .set("receiver_bytes_sent", cr.bytes_sent)
        .set("setup_bytes", s.cost_setup.bytes_sent + r.cost_setup.bytes_sent)
        .set("setup_rounds", s.cost_setup.rounds.max(r.cost_setup.rounds))
        .set("checked", s.last.len() as u64);
    match cfg.seed {
        Some(seed) => rec
            .set("deterministic", true)
            .set("seed", seed)
            .set("security_note", DETERMINISTIC_NOTE),
        None => rec.set("deterministic", false),
    };
    if let Some(p) = s.info.params {
        let usable = match cfg.source.name.as_str() {
            "ferret" => p.n - hush_correlations::ferret::reserve(&p),
            _ => p.n - p.k,
        };
        let batches = n.div_ceil(usable) as u64;
        rec.set("lpn_params", p.name)
            .set("lpn_n", p.n as u64)
            .set("lpn_k", p.k as u64)
            .set("lpn_t", p.t as u64)
            .set("lpn_h", p.h as u64)
            .set("lpn_security_bits", p.security_bits as u64)
            .set("batches", batches)
            .set("fused", cfg.source.fused);
        if s.info.module.is_some() {
            rec.set("tee_note", TEE_NOTE)
                .set("tee_module", s.info.module_desc.clone().unwrap_or_default())
                .set("sender_module_crossings", s.crossings)
                .set("receiver_module_crossings", r.crossings)
                .set("receiver_crossings_per_batch", r.crossings as f64 / batches as f64)
                .set("sender_module_bytes", s.module_bytes)
                .set("receiver_module_bytes", r.module_bytes);
        }
    }
    if let Some(m) = cfg.source.max_mem {
        rec.set("max_mem_bytes", m as u64);
    }
    rec.set("client_profile", client.name)
        .set("client_profile_desc", client.describe().as_str())
        .set("client_profile_method", r.limit_method.as_str())
        .set("client_party", "receiver");
    rec.set("sender_peak_mem_bytes", s.peak_mem)
        .set("receiver_peak_mem_bytes", r.peak_mem)
        .set("untagged_peak_bytes", mem::peak(2))
        .set("process_vm_hwm_bytes", mem::vm_hwm().unwrap_or(0))
        .set("peak_mem_method", mem::METHOD)
        .set("machine", machine_note());
    crate::machine_fields(&mut rec);
    if let Some(l) = cfg.level {
        rec.set("simd", l.name());
    }
    Ok(rec)
}

/// Runs `f` at SIMD level `l` on this thread (the process level if None).
fn at_level<R>(l: Option<hush_primitives::simd::Level>, f: impl FnOnce() -> Result<R>) -> Result<R> {
    match l {
        Some(l) => hush_primitives::simd::with_level(l, f).map_err(|e| Error::Invalid(e.to_string()))?,
        None => f(),
    }
}

/// What every record and table of a tee-mode (SilentFlow) run says about
/// the module on this machine.
pub const TEE_NOTE: &str = "tee mode: trusted module simulated — gives no hardware protection";

/// What a record of a run with `--seed` says: all randomness (base OTs,
/// module seeds, Δ, choice bits) derives from the public seed, so anyone
/// who knows it can recompute every secret of the run.
pub const DETERMINISTIC_NOTE: &str = "fixed seed: deterministic run, offers no security (every secret is derivable from the seed)";

/// The paper's Table III (seconds for 10^7 COTs), for reference in `--table`.
const PAPER: &[(&str, [f64; 3])] = &[
    ("QuietOT (paper)", [36.24, 43.89, 48.48]),
    ("SilentOT (paper)", [17.32, 24.97, 29.56]),
    ("Ferret (paper)", [9.703, 17.02, 21.64]),
    ("SSOT (paper)", [6.33, 13.98, 18.57]),
    ("SilentFlow FPGA (paper)", [1.230, 1.231, 1.227]),
];

/// `hush bench cot --table`: SilentFlow Table III's shape — n COTs (10^7 in
/// the paper) under LAN / WAN / mobile for SilentFlow, Ferret and IKNP in one
/// run. Each cell is the median `wall_s` of `repeat` runs (sources
/// interleaved, so that slow phases of a shared machine hit all of them).
/// Returns every run's record and the printed table (hush's rows with the
/// speedup of SilentFlow over each, then the paper's rows). `progress` is
/// called before each run with (runs done, runs in all, the run's cell).
pub fn cot_table(
    n: usize,
    max_mem: Option<usize>,
    transport: Transport,
    seed: Option<u64>,
    repeat: usize,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<(Vec<Record>, String)> {
    let nets = ["lan", "wan", "mobile"];
    let sources = ["silent", "ferret", "iknp"];
    let repeat = repeat.max(1);
    let mut recs = Vec::new();
    let mut runs = vec![vec![Vec::new(); 3]; 3];
    for (j, net) in nets.iter().enumerate() {
        for _ in 0..repeat {
            for (i, src) in sources.iter().enumerate() {
                progress(recs.len(), nets.len() * repeat * sources.len(), &format!("{src} {net}"));
                let mut sc = SourceConfig::named(src);
                sc.max_mem = max_mem;
                let cfg = CotBench { source: sc, n, profile: crate::profile(net)?, transport, seed, level: None };
                let r = bench_cot(&cfg)?;
                runs[i][j].push(r.f64("wall_s"));
                recs.push(r);
            }
        }
    }
    let mut wall = [[0f64; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            let v = &mut runs[i][j];
            v.sort_by(f64::total_cmp);
            wall[i][j] = v[v.len() / 2];
        }
    }
    let mut out = String::new();
    out.push_str(&format!(
        "COT generation, n = {n} (seconds, median of {repeat} run(s); both parties on this machine; one-time setup excluded)\n"
    ));
    out.push_str(&format!("({TEE_NOTE})\n"));
    if seed.is_some() {
        out.push_str(&format!("({DETERMINISTIC_NOTE})\n"));
    }
    out.push_str(&format!("{:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "protocol", "LAN", "speedup", "WAN", "speedup", "mobile", "speedup"));
    let names = ["hush SilentFlow (tee)", "hush Ferret", "hush IKNP"];
    for i in 0..3 {
        let mut line = format!("{:<26}", names[i]);
        for j in 0..3 {
            let sp = if i == 0 { "-".to_string() } else { format!("{:.2}x", wall[i][j] / wall[0][j]) };
            line.push_str(&format!(" {:>9.4} {:>9}", wall[i][j], sp));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("paper, Table III (10^7 COTs; speedup = protocol / SilentFlow FPGA):\n");
    let fpga = PAPER[PAPER.len() - 1].1;
    for (name, t) in PAPER {
        let mut line = format!("{:<26}", name);
        for j in 0..3 {
            line.push_str(&format!(" {:>9.3} {:>8.2}x", t[j], t[j] / fpga[j]));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("hush SilentFlow vs the paper's FPGA:");
    for j in 0..3 {
        out.push_str(&format!(" {} {:.1}x", nets[j], fpga[j] / wall[0][j]));
    }
    out.push('\n');
    if repeat > 1 {
        out.push_str("hush SilentFlow min-max over the runs:");
        for j in 0..3 {
            let v = &runs[0][j];
            out.push_str(&format!(" {} {:.4}-{:.4}", nets[j], v[0], v[v.len() - 1]));
        }
        out.push('\n');
    }
    // Compute-bound comparison across SIMD levels in the same run: `none`
    // at the process level and, where the CPU has more, forced to AVX2.
    use hush_primitives::simd::{self, Level};
    let native = simd::process_level();
    let mut levels = vec![native];
    if native > Level::Avx2 && Level::Avx2.supported() {
        levels.push(Level::Avx2);
    }
    let mut none = vec![vec![0f64; levels.len()]; 3];
    for (li, &l) in levels.iter().enumerate() {
        for (i, src) in sources.iter().enumerate() {
            let mut v = Vec::new();
            for _ in 0..repeat {
                let mut sc = SourceConfig::named(src);
                sc.max_mem = max_mem;
                let cfg = CotBench { source: sc, n, profile: crate::profile("none")?, transport, seed, level: Some(l) };
                let r = bench_cot(&cfg)?;
                v.push(r.f64("wall_s"));
                recs.push(r);
            }
            v.sort_by(f64::total_cmp);
            none[i][li] = v[v.len() / 2];
        }
    }
    out.push_str(&format!("\nnet none (compute-bound), by SIMD level, same run (seconds, median of {repeat}):\n"));
    out.push_str(&format!("{:<26}", "protocol"));
    for l in &levels {
        out.push_str(&format!(" {:>9} {:>9}", l.name(), "speedup"));
    }
    out.push('\n');
    for i in 0..3 {
        out.push_str(&format!("{:<26}", names[i]));
        for li in 0..levels.len() {
            let sp = if i == 0 { "-".to_string() } else { format!("{:.2}x", none[i][li] / none[0][li]) };
            out.push_str(&format!(" {:>9.4} {:>9}", none[i][li], sp));
        }
        out.push('\n');
    }
    Ok((recs, out))
}

/// Parses a memory size: a number of bytes with an optional suffix
/// KiB/MiB/GiB (or K/M/G, powers of two) or KB/MB/GB (powers of ten).
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num.parse().map_err(|_| Error::Invalid(format!("bad size '{s}'")))?;
    let mul = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        u => return Err(Error::Invalid(format!("unknown size unit '{u}' in '{s}'"))),
    };
    Ok((x * mul) as usize)
}

/// Parses `--tee`: auto, in-process, out-of-process.
pub fn parse_tee(s: &str) -> Result<hush_correlations::registry::TeeBackend> {
    use hush_correlations::registry::TeeBackend;
    match s {
        "auto" => Ok(TeeBackend::Auto),
        "in-process" => Ok(TeeBackend::InProcess),
        "out-of-process" => Ok(TeeBackend::OutOfProcess),
        _ => Err(Error::Invalid(format!("unknown --tee '{s}' (auto, in-process, out-of-process)"))),
    }
}

/// CPU time of the calling thread (s): a party's compute, against which its
/// wall time shows how much it waited (peer, network emulation, module,
/// or another tenant of the machine).
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn pinning(s: Option<usize>, r: Option<usize>) -> String {
    match (s, r) {
        (Some(a), Some(b)) => format!("party threads pinned: sender to cpu {a}, receiver to cpu {b}"),
        _ => "party threads not pinned (fewer than 2 cpus, or HUSH_BENCH_NO_PIN set)".to_string(),
    }
}
