//! `hush bench nonlinear`: one nonlinear operation in one comparison
//! family, both parties as two threads of this process over the in-memory
//! pair (default) or TCP loopback, with an emulated network profile.
//!
//! Online (`wall_s`, `bytes`, `rounds`) is timed separately from offline
//! (`offline_s`, `offline_bytes`: COT extension / triple generation for
//! `cf2`; `dealt_bytes`: what the modules released for `tami`/`fss`). The
//! result is checked element by element against plaintext. One-time setup
//! (base OTs, seed agreement) is excluded from both. Both parties share this
//! machine's cores. Targets are documented in the issue, not enforced here.

use crate::{connect_pair, machine_note, Record, Transport};
use hush_2pc::beaver::OtSession;
use hush_2pc::nonlinear::{PoolShape, Proto, Session};
use hush_2pc::share::{ArithShare, BoolShare};
use hush_2pc::tee::Dealer;
use hush_2pc::{cf2, fss, tami, Error, Result};
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg, Ring};
use hush_transport::{Channel, Cost};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// Arguments of `hush bench nonlinear`.
#[derive(clap::Args, Clone, Debug)]
pub struct NonlinearArgs {
    /// millionaire, drelu, relu, maxpool or trunc; or a transformer
    /// operator along the last axis of --shape: gelu, softmax, layernorm.
    #[arg(long, default_value = "millionaire")]
    pub op: String,
    /// Shape of a transformer operator's input, AxBxC (the operator runs
    /// along the last axis), e.g. 128x768 or 12x128x128.
    #[arg(long)]
    pub shape: Option<String>,
    /// Correlation provider of a transformer operator: tee (in-process
    /// trusted modules), dealer (a dealer service in this process) or
    /// interactive (no trusted party: COTs from --source, cf2 comparisons).
    #[arg(long, default_value = "tee")]
    pub mode: String,
    /// Transformer operators: compute polynomial powers with Beaver
    /// products (⌈log2 K⌉ rounds) instead of TAMI's one-round product.
    #[arg(long)]
    pub no_one_round: bool,
    /// cf2 (interactive CrypTFlow2), tami (TAMI-MPC, tee) or fss (DCF gates, tee).
    #[arg(long, default_value = "tami")]
    pub proto: String,
    /// COT source for cf2: iknp, ferret or silent.
    #[arg(long, default_value = "iknp")]
    pub source: String,
    /// Number of elements (comparisons; MaxPool: input elements).
    #[arg(long, default_value_t = 200_000)]
    pub n: usize,
    /// Ring width ℓ.
    #[arg(long, default_value_t = 32)]
    pub bits: u32,
    /// Network profile: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    pub net: String,
    /// One JSON object per run.
    #[arg(long)]
    pub json: bool,
    /// Print TAMI Table 2 / Table 3 shaped comparisons of all families.
    #[arg(long)]
    pub table: bool,
    /// Chunk width k (tami ≤ 5, cf2 ≤ 8). Default: the family's library
    /// default (tami 5 = `tami::DEFAULT_K`, cf2 4 = `cf2::DEFAULT_K`).
    #[arg(long)]
    pub k: Option<u32>,
    /// TAMI merge arity.
    #[arg(long, default_value_t = 8)]
    pub arity: u32,
    /// Truncation shift f.
    #[arg(long, default_value_t = 12)]
    pub frac: u32,
    /// mem or tcp.
    #[arg(long, default_value = "mem")]
    pub transport: String,
    /// LPN parameter set of a ferret or silent COT source (cf2), by name:
    /// ferret-main, lpn-b13, lpn-b12, lpn-b11, lpn-b10 (each documented at
    /// 128-bit LPN security in `hush_correlations::lpn`). Default: the
    /// source's largest set (ferret-main for ferret).
    #[arg(long)]
    pub lpn: Option<String>,
    /// fss, tami (tee): deal and evaluate in chunks of this many gates, each
    /// chunk's keys or tables dealt, used and dropped before the next (the
    /// tee-mode total with one chunk's memory; fss: one message per chunk,
    /// tami: its flights per chunk). 0: deal
    /// the whole batch offline, then run the online phase.
    #[arg(long, default_value_t = 0)]
    pub stream: usize,
    /// tami with --stream: deal the next chunk on a second thread while
    /// the current chunk's flights run.
    #[arg(long)]
    pub overlap: bool,
    /// gelu, softmax and layernorm: a proven bound on |x| (real units, at least the
    /// benchmark's input range): comparisons on the fewest bits exact
    /// inside it (`gelu_within`, `softmax_within`; `layernorm_within`: no clip
    /// for a bound ≤ 2^11), as the encoder graphs
    /// run them with the bounds the importer proves. Default: no bound
    /// (full-width comparisons)
    #[arg(long)]
    pub bound: Option<f64>,
}

impl Default for NonlinearArgs {
    fn default() -> Self {
        NonlinearArgs {
            op: "millionaire".into(),
            shape: None,
            mode: "tee".into(),
            no_one_round: false,
            proto: "tami".into(),
            source: "iknp".into(),
            n: 200_000,
            bits: 32,
            net: "none".into(),
            json: false,
            table: false,
            k: None,
            arity: 8,
            frac: 12,
            transport: "mem".into(),
            lpn: None,
            stream: 0,
            overlap: false,
            bound: None,
        }
    }
}

impl NonlinearArgs {
    /// The chunk width of `proto`'s runs: `--k`, or the family's default.
    pub fn k(&self, proto: Proto) -> u32 {
        self.k.unwrap_or(if proto == Proto::Cf2 { cf2::DEFAULT_K } else { tami::DEFAULT_K })
    }
}

struct PartyOut {
    /// One-time setup (base OTs, or module seed agreement).
    setup_s: f64,
    offline_s: f64,
    start: Instant,
    end: Instant,
    offline: Cost,
    online: Cost,
    dealt: u64,
    crossings: u64,
    /// Streamed runs: seconds spent dealing inside the timed window.
    stream_deal_s: f64,
    /// Output share, input share (or dealt input), as plain vectors.
    out: Vec<u64>,
    inp: Vec<u64>,
}

fn bits_vec(b: &BoolShare) -> Vec<u64> {
    (0..b.n).map(|i| b.get(i) as u64).collect()
}

/// The cf2 COT source with `--lpn`'s parameter set, if one is given.
fn source_config(a: &NonlinearArgs) -> Result<SourceConfig> {
    let mut c = SourceConfig::named(&a.source);
    if let Some(name) = &a.lpn {
        let sets: &[hush_correlations::lpn::LpnParams] = match a.source.as_str() {
            "ferret" => &hush_correlations::lpn::FERRET_SETS,
            "silent" => &hush_correlations::lpn::SILENT_SETS,
            other => return Err(Error::Invalid(format!("--lpn applies to the ferret and silent sources, not {other}"))),
        };
        let p = sets.iter().find(|p| p.name == name.as_str()).copied().ok_or_else(|| {
            let names: Vec<&str> = sets.iter().map(|p| p.name).collect();
            Error::Invalid(format!("unknown --lpn {name} for {} ({})", a.source, names.join(", ")))
        })?;
        c.params = Some(p);
    }
    Ok(c)
}

fn party(a: &NonlinearArgs, proto: Proto, ch: &mut dyn Channel, p: u8, barrier: Arc<Barrier>) -> Result<PartyOut> {
    let ring = Ring::new(a.bits).ok_or_else(|| Error::Invalid("bits".into()))?;
    let n = a.n;
    // Protocol randomness (base OTs, OT extension) from the OS; only the
    // benchmark's inputs come from a fixed public seed (test data, so that
    // every family compares the same values).
    let mut rng = Prg::from_os();
    let mut inputs = Prg::with_nonce(Block(0x5eed), p as u64);
    let lm = ring.mask();
    // Setup (excluded from wall_s, reported as setup_s).
    let ts = Instant::now();
    let (mut dealer, mut ot) = (None, None);
    match proto {
        Proto::Cf2 => ot = Some(OtSession::setup(ch, p, &source_config(a)?, &mut rng)?),
        _ => dealer = Some(Dealer::in_process(ch, p)?),
    }
    let setup_s = ts.elapsed().as_secs_f64();
    let mut inp: Vec<u64> = (0..n).map(|_| inputs.next_u64() & lm).collect();
    if a.op == "maxpool" {
        // MaxPool's valid range |x| < 2^(ℓ−2): share in-range plaintexts.
        let q = 1i64 << (a.bits - 2);
        let mut common = Prg::new(Block(0xfeed));
        inp = (0..n)
            .map(|_| {
                let v = ring.from_signed(ring.to_signed(common.next_u64() & lm) % q);
                let r = common.next_u64() & lm;
                if p == 0 { ring.sub(v, r) } else { r }
            })
            .collect();
    }
    let c0 = ch.cost();
    let t0 = Instant::now();
    let op = a.op.as_str();
    let f = a.frac;
    // Offline.
    enum Pre {
        Tami(tami::TamiBatch),
        Fss(fss::FssBatch),
        Cf2(cf2::Cf2Pre),
        Session(Session),
        Stream(fss::FssShape),
        TamiStream(tami::TamiShape),
    }
    let pre = match (proto, op) {
        (Proto::Fss, "relu" | "drelu" | "millionaire" | "trunc") if a.stream > 0 => {
            let gate = match op {
                "millionaire" => fss::FssGate::Millionaire,
                "drelu" => fss::FssGate::Drelu,
                "relu" => fss::FssGate::Relu,
                _ => fss::FssGate::Trunc { f },
            };
            Pre::Stream(fss::FssShape { bits: a.bits, gate })
        }
        (Proto::Tami, "relu" | "drelu" | "millionaire" | "trunc") if a.stream > 0 => {
            let flavor = match op {
                "millionaire" => tami::Flavor::Millionaire,
                "drelu" => tami::Flavor::Drelu,
                "relu" => tami::Flavor::Relu,
                _ => tami::Flavor::Trunc { f },
            };
            Pre::TamiStream(tami::TamiShape::new(a.bits, a.k(proto), a.arity, flavor))
        }
        (_, "maxpool") => Pre::Session(match proto {
            Proto::Cf2 => Session::interactive(p, ot.take().expect("ot")),
            _ => Session::tee(p, proto, dealer.take().expect("dealer")),
        }),
        (Proto::Tami, _) => {
            let flavor = match op {
                "millionaire" => tami::Flavor::Millionaire,
                "drelu" => tami::Flavor::Drelu,
                "relu" => tami::Flavor::Relu,
                "trunc" => tami::Flavor::Trunc { f },
                o => return Err(Error::Invalid(format!("unknown op {o}"))),
            };
            Pre::Tami(tami::deal(dealer.as_mut().expect("dealer"), p, n, tami::TamiShape::new(a.bits, a.k(proto), a.arity, flavor))?)
        }
        (Proto::Fss, _) => {
            let gate = match op {
                "millionaire" => fss::FssGate::Millionaire,
                "drelu" => fss::FssGate::Drelu,
                "relu" => fss::FssGate::Relu,
                "trunc" => fss::FssGate::Trunc { f },
                o => return Err(Error::Invalid(format!("unknown op {o}"))),
            };
            Pre::Fss(fss::deal(dealer.as_mut().expect("dealer"), p, n, fss::FssShape { bits: a.bits, gate })?)
        }
        (Proto::Cf2, _) => {
            let (cb, mux) = match op {
                "millionaire" => (a.bits, 0),
                "drelu" => (a.bits - 1, 0),
                "relu" => (a.bits - 1, n),
                "trunc" => (a.bits, n),
                o => return Err(Error::Invalid(format!("unknown op {o}"))),
            };
            Pre::Cf2(cf2::prepare(ot.as_mut().expect("ot"), ch, p, n, cb, a.k(proto), mux)?)
        }
    };
    let offline_s = t0.elapsed().as_secs_f64();
    let c1 = ch.cost();
    barrier.wait();
    let start = Instant::now();
    let mut pre = pre;
    let mut stream_deal_s = 0.0;
    let out: Vec<u64> = match &mut pre {
        Pre::Stream(shape) => {
            let mine = inp.clone();
            let y = (p == 0).then_some(&mine[..]);
            let s = fss::streamed(
                ch,
                dealer.as_mut().expect("dealer"),
                p,
                n,
                *shape,
                y,
                a.stream,
            )?;
            if p == 1 {
                inp = s.dealt_input.clone();
            }
            stream_deal_s = s.deal_s;
            match s.out {
                fss::FssOut::Bits(x) => bits_vec(&x),
                fss::FssOut::Arith(x) => x.v.clone(),
            }
        }
        Pre::TamiStream(shape) => {
            let mine = inp.clone();
            let y = (p == 0).then_some(&mine[..]);
            let s = tami::streamed(ch, dealer.as_mut().expect("dealer"), p, n, *shape, y, a.stream, a.overlap)?;
            if p == 1 {
                inp = s.dealt_input.clone();
            }
            stream_deal_s = s.deal_s;
            match s.out {
                tami::TamiOut::Bits(x) => bits_vec(&x),
                tami::TamiOut::Arith(x) => x.v.clone(),
            }
        }
        Pre::Tami(b) => {
            let mine = inp.clone();
            let y = (p == 0).then_some(&mine[..]);
            if p == 1 {
                inp = b.dealt_input().to_vec();
            }
            match tami::online(ch, b, y)? {
                tami::TamiOut::Bits(x) => bits_vec(&x),
                tami::TamiOut::Arith(x) => x.v.clone(),
            }
        }
        Pre::Fss(b) => {
            let mine = inp.clone();
            let y = (p == 0).then_some(&mine[..]);
            if p == 1 {
                inp = b.dealt_input().to_vec();
            }
            match fss::online(ch, b, y, false)? {
                fss::FssOut::Bits(x) => bits_vec(&x),
                fss::FssOut::Arith(x) => x.v.clone(),
            }
        }
        Pre::Cf2(pre) => {
            let x = ArithShare::new(ring, inp.clone());
            match op {
                "millionaire" => bits_vec(&cf2::millionaire_online(ch, p, pre, &inp)?),
                "drelu" => {
                    let c = cf2::millionaire_online(ch, p, pre, &cf2::drelu_input(p, ring, &inp))?;
                    bits_vec(&cf2::drelu_finish(p, ring, &inp, c))
                }
                "relu" => {
                    let c = cf2::millionaire_online(ch, p, pre, &cf2::drelu_input(p, ring, &inp))?;
                    let b = cf2::drelu_finish(p, ring, &inp, c);
                    cf2::mux_online(ch, p, pre, &b, &x)?.v.clone()
                }
                _ => {
                    let w = cf2::millionaire_online(ch, p, pre, &cf2::trunc_input(p, ring, &inp))?;
                    let cx = ArithShare::new(ring, vec![if p == 0 { ring.neg(1u64 << (a.bits - f)) } else { 0 }; n]);
                    let z = cf2::mux_online(ch, p, pre, &w, &cx)?;
                    cf2::trunc_finish(p, ring, &inp, f, &z).v.clone()
                }
            }
        }
        Pre::Session(s) => {
            let x = ArithShare::new(ring, inp.clone());
            let out = s.maxpool(ch, &x, &pool_shape(n))?.v.clone();
            dealer = s.dealer.take();
            out
        }
    };
    let end = Instant::now();
    // Dropping (and scrubbing) the used correlations is not online latency.
    drop(pre);
    let c2 = ch.cost();
    let (dealt, crossings) = dealer.as_ref().map_or((0, 0), |d| (d.dealt_bytes, d.stats().crossings));
    Ok(PartyOut { setup_s, offline_s, start, end, offline: c1 - c0, online: c2 - c1, dealt, crossings, stream_deal_s, out, inp })
}

/// MaxPool benchmark shape: channels of 16×16, 2×2 windows, stride 2.
pub fn pool_shape(n: usize) -> PoolShape {
    PoolShape { c: (n / 256).max(1), h: 16, w: 16, k: 2, stride: 2, pad: 0 }
}

fn check(a: &NonlinearArgs, proto: Proto, s: &PartyOut, r: &PartyOut) -> Result<usize> {
    let ring = Ring::new(a.bits).expect("checked");
    let n = a.n;
    let masked = proto != Proto::Cf2;
    let x: Vec<u64> = (0..n).map(|i| ring.add(s.inp[i], r.inp[i])).collect();
    let bad = |what: &str, i: usize| Error::Bench(format!("result check failed: {what} at element {i}"));
    match a.op.as_str() {
        "millionaire" => {
            for i in 0..n {
                let got = (s.out[i] ^ r.out[i]) == 1;
                if got != (s.inp[i] > r.inp[i]) {
                    return Err(bad("millionaire", i));
                }
            }
        }
        "drelu" => {
            for i in 0..n {
                if ((s.out[i] ^ r.out[i]) == 1) != !ring.msb(x[i]) {
                    return Err(bad("drelu", i));
                }
            }
        }
        "relu" => {
            for i in 0..n {
                if ring.add(s.out[i], r.out[i]) != hush_2pc::share::reference::relu(ring, x[i]) {
                    return Err(bad("relu", i));
                }
            }
        }
        "trunc" => {
            for i in 0..n {
                let got = ring.to_signed(ring.add(s.out[i], r.out[i]));
                let want = ring.to_signed(x[i]) >> a.frac;
                if got != want && got != want - 1 {
                    return Err(bad("trunc", i));
                }
            }
        }
        _ => {
            let want = pool_shape(n).reference(ring, &x)?;
            for i in 0..want.len() {
                if ring.add(s.out[i], r.out[i]) != want[i] {
                    let w = &pool_shape(n).windows()?[i];
                    eprintln!("got {} want {} window {:?}", ring.to_signed(ring.add(s.out[i], r.out[i])), ring.to_signed(want[i]), w.iter().map(|&j| ring.to_signed(x[j])).collect::<Vec<_>>());
                    return Err(bad("maxpool", i));
                }
            }
            return Ok(want.len());
        }
    }
    let _ = masked;
    Ok(n)
}

/// Runs one configuration and returns its record.
pub fn bench_nonlinear(a: &NonlinearArgs) -> Result<Record> {
    if crate::transformer::OPS.contains(&a.op.as_str()) {
        return crate::transformer::bench_transformer(a);
    }
    if a.shape.is_some() || a.mode != "tee" || a.no_one_round {
        return Err(Error::Invalid("--shape, --mode and --no-one-round apply to the transformer operators (gelu, softmax, layernorm)".into()));
    }
    let proto = Proto::by_name(&a.proto).ok_or_else(|| Error::Invalid(format!("unknown --proto {} (cf2, tami, fss)", a.proto)))?;
    if !["millionaire", "drelu", "relu", "maxpool", "trunc"].contains(&a.op.as_str()) {
        return Err(Error::Invalid(format!("unknown --op {} (millionaire, drelu, relu, maxpool, trunc, gelu, softmax, layernorm)", a.op)));
    }
    if a.n == 0 || !(2..=64).contains(&a.bits) {
        return Err(Error::Invalid("--n must be ≥ 1 and --bits in 2..=64".into()));
    }
    if a.bound.is_some() {
        return Err(Error::Invalid("--bound applies to --op gelu and --op softmax".into()));
    }
    if a.overlap && (a.stream == 0 || proto != Proto::Tami) {
        return Err(Error::Invalid("--overlap applies to --proto tami with --stream".into()));
    }
    if a.stream > 0 && (proto == Proto::Cf2 || a.op == "maxpool") {
        return Err(Error::Invalid(
            "--stream applies to --proto fss and tami (millionaire, drelu, relu, trunc)".into(),
        ));
    }
    if proto == Proto::Cf2 {
        source_config(a)?;
    } else if a.lpn.is_some() {
        return Err(Error::Invalid("--lpn applies to cf2's ferret and silent sources".into()));
    }
    if a.op == "maxpool" && a.n % 256 != 0 {
        return Err(Error::Invalid("maxpool: --n must be a multiple of 256 (16×16 channels)".into()));
    }
    let profile = crate::profile(&a.net).map_err(|e| Error::Invalid(e.to_string()))?;
    let transport = Transport::by_name(&a.transport).ok_or_else(|| Error::Invalid("--transport mem or tcp".into()))?;
    let (mut ca, mut cb) = connect_pair(transport, profile).map_err(|e| Error::Bench(e.to_string()))?;
    let barrier = Arc::new(Barrier::new(2));
    let (b1, b2) = (barrier.clone(), barrier);
    let (a1, a2) = (a.clone(), a.clone());
    let t0 = std::thread::spawn(move || party(&a1, proto, &mut *ca, 0, b1));
    let t1 = std::thread::spawn(move || party(&a2, proto, &mut *cb, 1, b2));
    let s = t0.join().map_err(|_| Error::Bench("party 0 panicked".into()))??;
    let r = t1.join().map_err(|_| Error::Bench("party 1 panicked".into()))??;
    let checked = check(a, proto, &s, &r)?;
    let wall = s.end.max(r.end).duration_since(s.start.min(r.start)).as_secs_f64();
    let bytes = s.online.bytes_sent + r.online.bytes_sent;
    let mut rec = Record::new("nonlinear");
    rec.set("op", a.op.as_str())
        .set("proto", proto.name())
        .set("source", if proto == Proto::Cf2 { a.source.as_str() } else { "tee" })
        .set("lpn", if proto == Proto::Cf2 { a.lpn.as_deref().unwrap_or("default") } else { "none" })
        .set("n", a.n as u64)
        .set("bits", a.bits as u64)
        .set("net", a.net.as_str())
        .set("transport", transport.name())
        .set("wall_s", wall)
        .set("bytes", bytes)
        .set("rounds", s.online.rounds.max(r.online.rounds) as u64)
        .set("bits_per_op", bytes as f64 * 8.0 / a.n as f64)
        .set("setup_s", s.setup_s.max(r.setup_s))
        .set("offline_s", s.offline_s.max(r.offline_s))
        .set("offline_bytes", s.offline.bytes_sent + r.offline.bytes_sent)
        .set("dealt_bytes", s.dealt + r.dealt)
        .set("dealt_bytes_party0", s.dealt)
        .set("dealt_bytes_party1", r.dealt)
        .set("module_crossings", s.crossings + r.crossings)
        .set("party0_bytes_sent", s.online.bytes_sent)
        .set("party1_bytes_sent", r.online.bytes_sent)
        .set("checked", checked as u64);
    if a.stream > 0 {
        // Dealing happens inside the timed window: wall_s is the tee total.
        rec.set("stream", a.stream as u64)
            .set("overlap", a.overlap)
            .set("total_s", wall)
            .set("deal_s_in_wall", s.stream_deal_s.max(r.stream_deal_s))
            .set("stream_note", "dealing and online interleaved per chunk: wall_s = total_s includes the dealing; offline_s is the (empty) phase before it");
    }
    if proto == Proto::Tami {
        rec.set("k", a.k(proto) as u64).set("arity", a.arity as u64);
        if a.op != "maxpool" {
            let flavor = match a.op.as_str() {
                "millionaire" => tami::Flavor::Millionaire,
                "drelu" => tami::Flavor::Drelu,
                "relu" => tami::Flavor::Relu,
                _ => tami::Flavor::Trunc { f: a.frac },
            };
            let (d0, d1) = hush_2pc::deal::tami::dealt_bits_per_cmp(&tami::TamiShape::new(a.bits, a.k(proto), a.arity, flavor));
            rec.set("dealt_bits_per_op_party0", d0 as u64).set("dealt_bits_per_op_party1", d1 as u64);
        }
    }
    if proto != Proto::Cf2 {
        rec.set("tee_note", "tee mode: trusted module simulated — gives no hardware protection");
    }
    if a.op == "maxpool" {
        rec.set("note", "maxpool: general-form shares; tee dealing happens inside the timed online phase");
    }
    rec.set("machine", machine_note());
    crate::machine_fields(&mut rec);
    Ok(rec)
}

/// Entry point for the CLI.
pub fn bench_nonlinear_main(a: NonlinearArgs) -> Result<()> {
    if a.table {
        return table(&a);
    }
    let r = bench_nonlinear(&a)?;
    if a.json {
        println!("{}", r.json());
    } else {
        println!("hush bench nonlinear ({} / {}{})", a.op, a.proto, a.shape.as_deref().map(|s| format!(" / {s}")).unwrap_or_default());
        print!("{}", r.table());
    }
    Ok(())
}

fn log2c(x: u32) -> u32 {
    32 - (x.max(1) - 1).leading_zeros()
}

/// TAMI Table 2 and Table 3 shapes, measured in one run.
fn table(a: &NonlinearArgs) -> Result<()> {
    let l = a.bits;
    // one k for every family, as the paper's tables compare them (default
    // 4, cf2's)
    let k = a.k.unwrap_or(cf2::DEFAULT_K);
    let nc = l.div_ceil(k);
    let mut rows: Vec<(String, Result<Record>)> = Vec::new();
    let mut run = |label: &str, proto: &str, source: &str| {
        let mut c = a.clone();
        c.k = Some(k);
        c.op = "millionaire".into();
        c.proto = proto.into();
        c.source = source.into();
        c.table = false;
        rows.push((label.to_string(), bench_nonlinear(&c)));
    };
    run("tami", "tami", "iknp");
    run("fss", "fss", "iknp");
    for s in ["iknp", "ferret", "silent"] {
        run(&format!("cf2+{s}"), "cf2", s);
    }
    if a.json {
        for (_, r) in &rows {
            match r {
                Ok(r) => println!("{}", r.json()),
                Err(e) => println!("{{\"bench\":\"nonlinear\",\"error\":{:?}}}", e.to_string()),
            }
        }
        return Ok(());
    }
    println!("Millionaires' on n = {} comparisons of ℓ = {l} bits, k = {k} ({nc} chunks), net {}", a.n, a.net);
    println!("(both parties on this machine; tee module simulated — gives no hardware protection)\n");
    println!("Table 2 shape — online communication per comparison (bits) and rounds, measured vs paper formula");
    println!("  {:<12} {:>14} {:>16} {:>8} {:>14} {:>18}", "family", "measured bits", "paper bits", "rounds", "paper rounds", "offline/dealt B");
    let cf2_bits = nc * (k + (1 << k)) + 8 * (nc - 1);
    for (label, r) in &rows {
        let (pb, pr) = if label == "tami" {
            (format!("{}", nc * k + nc - 1), "1+1".to_string())
        } else if label == "fss" {
            (format!("{l} (x̂)"), "1".to_string())
        } else {
            (format!("{cf2_bits}"), format!("2+{}", log2c(nc)))
        };
        match r {
            Ok(r) => {
                let off = if label.starts_with("cf2") { r.f64("offline_bytes") } else { r.f64("dealt_bytes") } / a.n as f64;
                println!("  {:<12} {:>14.1} {:>16} {:>8} {:>14} {:>18.1}", label, r.f64("bits_per_op"), pb, r.f64("rounds"), pr, off);
            }
            Err(e) => println!("  {:<12} error: {e}", label),
        }
    }
    println!("\nTable 3 shape — online latency of {} millionaires' (paper: TAMI FPGA 179.9 ms, Cheetah 608 ms)", a.n);
    println!("  {:<12} {:>12} {:>12} {:>22}", "family", "online ms", "offline ms", "speedup vs this family");
    let base: Vec<(String, f64)> = rows.iter().filter_map(|(l, r)| r.as_ref().ok().map(|r| (l.clone(), r.f64("wall_s")))).collect();
    for (label, r) in &rows {
        if let Ok(r) = r {
            let w = r.f64("wall_s");
            let sp: Vec<String> = base
                .iter()
                .filter(|(l, _)| l.starts_with("cf2"))
                .map(|(l, b)| format!("{:.1}× over {l}", b / w))
                .collect();
            println!("  {:<12} {:>12.2} {:>12.1} {}", label, w * 1e3, r.f64("offline_s") * 1e3, if label.starts_with("cf2") { String::new() } else { sp.join(", ") });
        }
    }
    Ok(())
}
