//! `hush bench deal`: the trusted module's dealing throughput per kind,
//! against the AES limit of this core (issue 35).
//!
//! A kind is one of the two-party dealing descriptions the modules serve
//! (`hush_2pc::deal::kinds`, FSS keys from `hush_fss::deal`), called
//! exactly as a module calls it: `Description::deal(key, party, n,
//! params)` per request, in the request sizes the protocols use (FSS:
//! `hush_2pc::fss::DEAL_CHUNK` gates per crossing; TAMI, triples and
//! truncation pairs: the whole batch in one crossing). Each party's share
//! is timed on its own (in a run both modules deal at once, one per
//! party, so the dealing phase lasts as long as the slower one:
//! `module_s`).
//!
//! **The AES-call bound.** Every dealing kind is PRG work (AES-128 in
//! counter mode under the batch keys) plus fixed-key AES (the FSS trees'
//! MMO hash). A first pass deals a sample on one thread and reads the
//! thread's AES block meter (`hush_primitives::aes::blocks_counted`): the
//! AES calls per item of each party's share. The same run measures this
//! core's AES rate (fixed-key, 4096-block buffers, one thread), and the
//! bound of a party's share is `n × calls per item ÷ rate`; `bound_ratio`
//! is `module_s` over the slower party's bound. Key expansion of the
//! per-request PRG keys is not counted (it is a few AES-equivalents per
//! request of thousands of items). A kind may build its share on every
//! core (rayon; `threads` in the record): the bound stays one core's.
//!
//! **Paths** (`--path`). `bytes` (the default, and every record before
//! 2026-11-29 17:00 UTC): the share as the module releases it, its wire
//! bytes. `direct`: the in-process module's direct path
//! (`Description::deal_into`) — the share written straight into the host's
//! structure (truncation kinds: `trunc::TruncSink`'s arrays; one-DCF FSS
//! gates: `hush_fss::deal::FssSink`'s evaluation layout), reserved once for
//! all `n` items and erased (dropped) inside the timing, as the byte path's
//! buffers are. `decoded`: the bytes, then decoded into that same sink
//! (what a host does with a module process's or a dealer's share, without
//! the pipe). A kind with no sink (TAMI, triples, …) deals bytes on every
//! path; the record's `path` says what was timed.
//!
//! The module is a simulation here (**attestation simulated — gives no
//! hardware protection**); its dealing code is the same as a hardware
//! module's would be.

use crate::{Error, Record, Result};
use hush_2pc::deal::{powers, subset, tami, triples, trunc};
use hush_deal::Description;
use hush_fss::deal::{FssGate, FssKeys, FssShape};
use hush_primitives::{aes, Block};
use std::time::Instant;

/// The kinds `--kind` takes: (name, what it deals).
pub const KINDS: &[(&str, &str)] = &[
    ("fss-relu", "FSS ReLU gate keys (one two-lane (ℓ−1)-bit DCF each), 2pc/fss"),
    ("fss-drelu", "FSS DReLU gate keys (one-bit DCF, early termination), 2pc/fss"),
    ("fss-millionaire", "FSS comparison keys, 2pc/fss"),
    ("fss-trunc", "FSS exact truncation keys (two DCFs), 2pc/fss"),
    ("tami-relu", "TAMI-MPC ReLU tables and subset products, 2pc/tami"),
    ("tami-millionaire", "TAMI-MPC comparison tables and subset products, 2pc/tami"),
    ("triples", "elementwise Beaver triples over Z_2^ℓ, 2pc/arith-triples"),
    ("and-triples", "bit-packed AND triples, 2pc/bit-triples"),
    ("trunc-pairs", "truncation pairs (r, r >> f, msb r), 2pc/trunc-pairs"),
    ("trunc-squares", "truncation pairs with (r >> f)² and (r >> f)·msb r, 2pc/trunc-squares"),
    ("trunc-muls", "truncation pairs with a mask s and (r >> f)·s, msb r·s, 2pc/trunc-muls"),
    ("power-tuples", "power tuples r, r², …, r^K (--power K), 2pc/power-tuples"),
    ("subset-products", "products of every subset of D masks (--factors D), 2pc/subset-products"),
];

/// Arguments of `hush bench deal`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = kinds_help())]
pub struct DealArgs {
    /// Dealing kind (see the list below), or `all`.
    #[arg(long, default_value = "fss-relu")]
    pub kind: String,
    /// Items (gates, comparisons, triples, pairs) per run.
    #[arg(long, default_value_t = 200_000)]
    pub n: u32,
    /// Ring width ℓ.
    #[arg(long, default_value_t = 32)]
    pub bits: u32,
    /// TAMI chunk width k (default `tami::DEFAULT_K`, the library's).
    #[arg(long, default_value_t = hush_2pc::tami::DEFAULT_K)]
    pub k: u32,
    /// TAMI merge arity.
    #[arg(long, default_value_t = 8)]
    pub arity: u32,
    /// Truncation shift f.
    #[arg(long, default_value_t = 12)]
    pub frac: u32,
    /// Power tuples: the highest power K.
    #[arg(long, default_value_t = 4)]
    pub power: u32,
    /// Subset products: the number of factors D.
    #[arg(long, default_value_t = 3)]
    pub factors: u32,
    /// Timed repetitions (the fastest is reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// What is timed: `bytes` (the share's wire bytes, as a module
    /// releases them), `direct` (the share written into the host's
    /// structure, the in-process module's path) or `decoded` (the bytes,
    /// then decoded into that structure). Kinds without a direct path
    /// deal bytes on every path.
    #[arg(long, default_value = "bytes")]
    pub path: String,
    /// One JSON object per kind.
    #[arg(long)]
    pub json: bool,
}

fn kinds_help() -> String {
    let mut s = String::from("Kinds:\n");
    for (k, d) in KINDS {
        s.push_str(&format!("  {k:<18} {d}\n"));
    }
    s.push_str("\nThe module is simulated (attestation gives no hardware protection).");
    s
}

/// What one kind's requests are: the description, its parameters and
/// items per request.
struct Job {
    desc: &'static dyn Description,
    params: Vec<u8>,
    per_request: u32,
    /// Items are bits (AND triples): bytes per item are per bit.
    unit: &'static str,
    /// The host structure of the direct path, if the kind has one.
    sink: Option<SinkOps>,
}

/// A kind's host structure, behind `Any` as `Description::deal_into` takes it.
type AnySink = Box<dyn std::any::Any>;

/// How the bench makes and fills a kind's host structure.
#[derive(Clone, Copy)]
struct SinkOps {
    /// An empty structure for `n` items of these parameters.
    new: fn(usize, &[u8]) -> Option<AnySink>,
    /// Appends a share of `m` items that crossed as bytes.
    extend: fn(&mut dyn std::any::Any, &[u8], usize) -> std::result::Result<(), String>,
}

fn trunc_sink<S: trunc::TruncArrays>() -> SinkOps {
    fn new<S: trunc::TruncArrays>(n: usize, params: &[u8]) -> Option<AnySink> {
        let (bits, f) = trunc::TruncPairs::params(params).ok()?;
        Some(Box::new(trunc::TruncSink::<S>::new(n, bits, f)))
    }
    fn extend<S: trunc::TruncArrays>(s: &mut dyn std::any::Any, b: &[u8], m: usize) -> std::result::Result<(), String> {
        let s = s.downcast_mut::<trunc::TruncSink<S>>().ok_or("not a truncation sink")?;
        s.extend_bytes(b, m).map_err(|e| e.to_string())
    }
    SinkOps { new: new::<S>, extend: extend::<S> }
}

fn fss_sink() -> SinkOps {
    fn new(n: usize, params: &[u8]) -> Option<AnySink> {
        let shape = hush_deal::parse_params(params, "FSS parameters", FssShape::decode).ok()?;
        Some(Box::new(hush_fss::deal::FssSink::new(n, shape)?))
    }
    fn extend(s: &mut dyn std::any::Any, b: &[u8], m: usize) -> std::result::Result<(), String> {
        let s = s.downcast_mut::<hush_fss::deal::FssSink>().ok_or("not an FSS sink")?;
        s.extend_bytes(b, m).map_err(|e| e.to_string())
    }
    SinkOps { new, extend }
}

fn job(a: &DealArgs, kind: &str) -> Result<Job> {
    let fss = |gate| -> Result<Job> {
        let shape = FssShape { bits: a.bits, gate };
        shape.validate().map_err(Error::Invalid)?;
        let params = FssKeys::request(0, 1, &shape).params;
        Ok(Job { desc: &hush_fss::deal::FSS_KEYS, params, per_request: hush_2pc::fss::DEAL_CHUNK as u32, unit: "gate", sink: Some(fss_sink()) })
    };
    let tami = |flavor| -> Result<Job> {
        let shape = tami::TamiShape::new(a.bits, a.k, a.arity, flavor);
        shape.validate().map_err(Error::Invalid)?;
        let params = tami::TamiTables::request(0, 1, &shape).params;
        Ok(Job { desc: &tami::TAMI_TABLES, params, per_request: hush_deal::MAX_DEAL_N, unit: "comparison", sink: None })
    };
    match kind {
        "fss-relu" => fss(FssGate::Relu),
        "fss-drelu" => fss(FssGate::Drelu),
        "fss-millionaire" => fss(FssGate::Millionaire),
        "fss-trunc" => fss(FssGate::Trunc { f: a.frac }),
        "tami-relu" => tami(tami::Flavor::Relu),
        "tami-millionaire" => tami(tami::Flavor::Millionaire),
        "triples" => Ok(Job {
            desc: &triples::ARITH_TRIPLES,
            params: triples::ArithTriples::request(0, 1, a.bits).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "triple",
            sink: None,
        }),
        "and-triples" => Ok(Job {
            desc: &triples::BIT_TRIPLES,
            params: triples::BitTriples::request(0, 1).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "bit triple",
            sink: None,
        }),
        "trunc-pairs" => Ok(Job {
            desc: &trunc::TRUNC_PAIRS,
            params: trunc::TruncPairs::request(0, 1, a.bits, a.frac).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "pair",
            sink: Some(trunc_sink::<trunc::TruncShare>()),
        }),
        "trunc-squares" => Ok(Job {
            desc: &trunc::TRUNC_SQUARES,
            params: trunc::TruncSquares::request(0, 1, a.bits, a.frac).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "pair",
            sink: Some(trunc_sink::<trunc::TruncSqShare>()),
        }),
        "trunc-muls" => Ok(Job {
            desc: &trunc::TRUNC_MULS,
            params: trunc::TruncMuls::request(0, 1, a.bits, a.frac).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "pair",
            sink: Some(trunc_sink::<trunc::TruncMulShare>()),
        }),
        "power-tuples" => Ok(Job {
            desc: &powers::POWER_TUPLES,
            params: powers::PowerTuples::request(0, 1, a.bits, a.power).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "tuple",
            sink: None,
        }),
        "subset-products" => Ok(Job {
            desc: &subset::SUBSET_PRODUCTS,
            params: subset::SubsetProducts::request(0, 1, a.bits, a.factors).params,
            per_request: hush_deal::MAX_DEAL_N,
            unit: "tuple",
            sink: None,
        }),
        k => Err(Error::Invalid(format!(
            "unknown dealing kind '{k}' (known: {}, all)",
            KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The request sizes of `n` items.
fn sizes(n: u32, per: u32) -> impl Iterator<Item = u32> {
    (0..n.div_ceil(per)).map(move |i| (n - i * per).min(per))
}

/// What `hush bench deal --path` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Bytes,
    Direct,
    Decoded,
}

impl Path {
    fn parse(s: &str) -> Result<Self> {
        match s {
            "bytes" => Ok(Path::Bytes),
            "direct" => Ok(Path::Direct),
            "decoded" => Ok(Path::Decoded),
            p => Err(Error::Invalid(format!("unknown --path '{p}' (bytes, direct, decoded)"))),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Path::Bytes => "bytes",
            Path::Direct => "direct",
            Path::Decoded => "decoded",
        }
    }
}

/// The path `path` means for `job` (bytes when the kind has no sink for
/// these parameters).
fn effective(job: &Job, path: Path) -> Path {
    match job.sink {
        Some(ops) if path != Path::Bytes && (ops.new)(1, &job.params).is_some() => path,
        _ => Path::Bytes,
    }
}

/// Party `p`'s shares of `n` items, request by request: (bytes, seconds).
fn deal_party(job: &Job, p: u8, n: u32, path: Path) -> Result<(u64, f64)> {
    let inv = |e: String| Error::Invalid(e);
    let t = Instant::now();
    let mut bytes = 0u64;
    let ops = job.sink.filter(|_| path != Path::Bytes);
    let mut sink = match ops {
        Some(o) => Some((o.new)(n as usize, &job.params).ok_or_else(|| inv("no sink for these parameters".into()))?),
        None => None,
    };
    for (i, m) in sizes(n, job.per_request).enumerate() {
        // One key per request, as a module derives one per batch.
        let key = Block(0xdea1_0000_0000 + i as u128);
        if let (Path::Direct, Some(s)) = (path, sink.as_mut()) {
            let b = job.desc.deal_into(key, p, m, &job.params, s.as_mut()).map_err(|e| inv(e.to_string()))?;
            bytes += b.ok_or_else(|| inv(format!("{}: the direct path refused the sink", job.desc.kind())))? as u64;
            continue;
        }
        let mut share = job.desc.deal(key, p, m, &job.params).map_err(|e| inv(e.to_string()))?;
        bytes += share.len() as u64;
        let r = match (ops, sink.as_mut()) {
            (Some(o), Some(s)) => (o.extend)(s.as_mut(), &share, m as usize),
            _ => Ok(()),
        };
        // The consumer's erasure, as the hosts do it (on every core).
        hush_deal::wipe_vec_par(&mut share);
        r.map_err(inv)?;
    }
    // the host's structure is erased and freed inside the timing, as the
    // byte path's buffers are
    drop(sink);
    Ok((bytes, t.elapsed().as_secs_f64()))
}

/// AES blocks per item of party `p`'s share, from one request of up to
/// `sample` items dealt on this thread.
fn aes_per_item(job: &Job, p: u8, sample: u32) -> Result<f64> {
    let m = sample.min(job.per_request).max(1);
    // The meter is per thread: deal inside a one-thread pool, so that a
    // kind that builds its share in parallel (rayon) runs wholly on the
    // thread that reads the meter.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().map_err(|e| Error::Invalid(e.to_string()))?;
    pool.install(|| {
        let c0 = aes::blocks_counted();
        let mut share = job.desc.deal(Block(0xc0_47), p, m, &job.params).map_err(|e| Error::Invalid(e.to_string()))?;
        let c = aes::blocks_counted().wrapping_sub(c0);
        hush_primitives::wipe::wipe_vec(&mut share);
        Ok(c as f64 / m as f64)
    })
}

/// This core's fixed-key AES rate (blocks/s), 4096-block buffers.
pub fn aes_rate(seconds: f64) -> f64 {
    let a = aes::fixed_key();
    let mut buf: Vec<Block> = (0..4096u128).map(Block).collect();
    a.encrypt_blocks(&mut buf);
    let t = Instant::now();
    let mut blocks = 0u64;
    while t.elapsed().as_secs_f64() < seconds {
        for _ in 0..16 {
            a.encrypt_blocks(&mut buf);
        }
        blocks += 16 * 4096;
    }
    std::hint::black_box(&buf);
    blocks as f64 / t.elapsed().as_secs_f64()
}

/// One record per kind (`--kind all`: every kind).
pub fn bench_deal(a: &DealArgs) -> Result<Vec<Record>> {
    if a.n == 0 || a.n > 1 << 26 || a.repeat == 0 {
        return Err(Error::Invalid("--n must be in 1..=2^26 and --repeat positive".into()));
    }
    let kinds: Vec<&str> = if a.kind == "all" { KINDS.iter().map(|(k, _)| *k).collect() } else { vec![a.kind.as_str()] };
    let jobs = kinds.iter().map(|k| job(a, k)).collect::<Result<Vec<_>>>()?;
    let path = Path::parse(&a.path)?;
    let rate = aes_rate(0.5);
    let mut out = Vec::new();
    for (kind, job) in kinds.iter().zip(&jobs) {
        let per_item = [aes_per_item(job, 0, 4096)?, aes_per_item(job, 1, 4096)?];
        let path = effective(job, path);
        let mut best = [(0u64, f64::INFINITY); 2];
        for _ in 0..a.repeat {
            for p in 0..2u8 {
                let (b, s) = deal_party(job, p, a.n, path)?;
                if s < best[p as usize].1 {
                    best[p as usize] = (b, s);
                }
            }
        }
        let module_s = best[0].1.max(best[1].1);
        let bound = [a.n as f64 * per_item[0] / rate, a.n as f64 * per_item[1] / rate];
        let bound_s = bound[0].max(bound[1]);
        let dealt = best[0].0 + best[1].0;
        let mut r = Record::new("deal");
        r.set("deal_kind", *kind)
            .set("dealing_kind", job.desc.kind())
            .set("unit", job.unit)
            .set("n", a.n as u64)
            .set("bits", a.bits as u64)
            .set("per_request", job.per_request.min(a.n) as u64)
            .set("wall_s", module_s)
            .set("setup_s", 0.0)
            .set("bytes", dealt)
            .set("rounds", 0)
            .set("module_s", module_s)
            .set("party0_s", best[0].1)
            .set("party1_s", best[1].1)
            .set("items_per_s", a.n as f64 / module_s)
            .set("dealt_bytes", dealt)
            .set("dealt_bytes_party0", best[0].0)
            .set("dealt_bytes_party1", best[1].0)
            .set("dealt_bytes_per_s", dealt as f64 / module_s)
            .set("aes_per_item_party0", per_item[0])
            .set("aes_per_item_party1", per_item[1])
            .set("aes_blocks_per_s", rate)
            .set("bound_s", bound_s)
            .set("bound_ratio", module_s / bound_s)
            .set("repeat", a.repeat as u64)
            .set("threads", rayon::current_num_threads() as u64)
            .set("path", path.name())
            .set("machine", "each party's share dealt on its own in this process; module_s = the slower party");
        if kind.starts_with("tami") {
            r.set("k", a.k as u64).set("arity", a.arity as u64);
        }
        if matches!(*kind, "fss-trunc" | "trunc-pairs" | "trunc-squares" | "trunc-muls") {
            r.set("frac", a.frac as u64);
        }
        if *kind == "power-tuples" {
            r.set("power", a.power as u64);
        }
        if *kind == "subset-products" {
            r.set("factors", a.factors as u64);
        }
        r.set("note", "trusted module simulated — gives no hardware protection");
        crate::machine_fields(&mut r);
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(kind: &str) -> DealArgs {
        DealArgs { kind: kind.into(), n: 300, bits: 16, k: 4, arity: 4, frac: 5, power: 3, factors: 3, repeat: 1, path: "bytes".into(), json: true }
    }

    #[test]
    fn every_kind_deals_and_prices_itself() {
        let recs = bench_deal(&args("all")).unwrap();
        assert_eq!(recs.len(), KINDS.len());
        for r in &recs {
            assert!(r.f64("dealt_bytes") > 0.0, "{}", r.json());
            // every kind draws from a PRG: a positive AES price per item
            assert!(r.f64("aes_per_item_party0") > 0.0 && r.f64("aes_per_item_party1") > 0.0, "{}", r.json());
            assert!(r.f64("bound_s") > 0.0, "{}", r.json());
        }
        let e = bench_deal(&args("nope")).unwrap_err().to_string();
        assert!(e.contains("unknown dealing kind 'nope'"), "{e}");
    }

    /// Every path deals the same bytes' worth for a kind with a direct
    /// path (truncation kinds, the one-DCF FSS gates) and says which path
    /// it timed; kinds without one fall back to bytes; a wrong path name
    /// is refused.
    #[test]
    fn paths_deal_the_same_share_sizes() {
        for kind in ["trunc-pairs", "trunc-squares", "trunc-muls", "fss-relu", "fss-trunc", "triples"] {
            let mut sizes = Vec::new();
            for path in ["bytes", "direct", "decoded"] {
                let mut a = args(kind);
                a.path = path.into();
                let r = bench_deal(&a).unwrap().pop().unwrap();
                let has = !matches!(kind, "fss-trunc" | "triples");
                let want = if has { path } else { "bytes" };
                assert_eq!(r.get("path").and_then(|v| v.as_str()), Some(want), "{kind} {path}");
                sizes.push((r.f64("dealt_bytes_party0"), r.f64("dealt_bytes_party1")));
            }
            assert!(sizes.iter().all(|s| *s == sizes[0]), "{kind}: {sizes:?}");
        }
        let mut a = args("trunc-pairs");
        a.path = "pipes".into();
        assert!(bench_deal(&a).unwrap_err().to_string().contains("unknown --path 'pipes'"));
    }

    #[test]
    fn fss_relu_price_matches_the_tree() {
        // ℓ = 16: 15 levels × 8 blocks + 2 leaf blocks per key pair, plus
        // the PRG draws (roots 2, value draws 2, four shares 4).
        let r = bench_deal(&args("fss-relu")).unwrap().pop().unwrap();
        let per = r.f64("aes_per_item_party0");
        assert!((15.0 * 8.0 + 2.0..=15.0 * 8.0 + 12.0).contains(&per), "{per}");
    }
}
