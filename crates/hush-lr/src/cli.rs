//! `hush train`, `hush bench paillier`, `hush bench lr`.

use crate::data::{synthetic, Dataset};
use crate::secure::{reveal, save_model, Report, Role, Session};
use crate::{Error, Result, Sigmoid, TrainConfig};
use hush_bench::Record;
use hush_paillier::{Integer, KeyPair};
use hush_transport::{Channel, ChannelOptions, LinkConfig, LinkFlags, MemChannel, TcpChannel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// labels (holds the labels and some features) or features.
    #[arg(long)]
    pub role: String,
    /// This party's data: libsvm/svmlight text, samples aligned by line with
    /// the peer's file (the features party's labels are ignored).
    #[arg(long)]
    pub data: PathBuf,
    /// Listen at this address (prints `fingerprint sha256:<hex>`) ...
    #[arg(long, conflicts_with = "peer")]
    pub listen: Option<String>,
    /// ... or connect to the peer at this address (needs --pin sha256:<hex>).
    #[arg(long)]
    pub peer: Option<String>,
    /// Where to write this party's model shares (JSON, written atomically).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 10)]
    pub epochs: u32,
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    #[arg(long, default_value_t = 0.5)]
    pub lr: f64,
    /// L2 regularisation λ.
    #[arg(long, default_value_t = 0.0)]
    pub l2: f64,
    /// Paillier modulus bits: 2048 or 3072.
    #[arg(long, default_value_t = 2048)]
    pub bits: u32,
    /// cubic (0.5 + 0.197z − 0.004z³) or linear (0.5 + z/4).
    #[arg(long, default_value = "cubic")]
    pub sigmoid: String,
    /// Add a constant-1 intercept column (labels party; default on).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub intercept: bool,
    /// Open the trained model to both parties and store it beside the shares.
    #[arg(long)]
    pub reveal: bool,
    /// Seed of the batch order (both parties must agree).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub link: LinkFlags,
}

/// Adds a constant column of ones.
pub fn with_intercept(ds: &Dataset) -> Dataset {
    let mut d = ds.clone();
    for r in &mut d.rows {
        r.push((ds.cols, 1.0));
    }
    d.cols += 1;
    d
}

pub fn train_main(a: TrainArgs) -> Result<()> {
    let role = Role::parse(&a.role)?;
    let cfg = TrainConfig {
        epochs: a.epochs,
        batch: a.batch,
        lr: a.lr,
        l2: a.l2,
        sigmoid: Sigmoid::parse(&a.sigmoid)?,
        key_bits: a.bits,
        order_seed: a.seed,
    };
    if a.bits != 2048 && a.bits != 3072 {
        return Err(Error::Config(format!("--bits {} (2048 or 3072)", a.bits)));
    }
    let mut ds = Dataset::load(&a.data)?;
    if role == Role::Labels && a.intercept {
        ds = with_intercept(&ds);
    }
    let x = ds.to_fixed()?;
    let link = LinkConfig::from_flags(&a.link)?;
    let opts = link.channel_options(ChannelOptions::default());
    let mut ch = match (&a.listen, &a.peer) {
        (Some(addr), None) => {
            let l = std::net::TcpListener::bind(addr).map_err(|e| Error::Config(format!("cannot listen at {addr}: {e}")))?;
            println!("{}", link.banner());
            println!("listening {}", l.local_addr()?);
            TcpChannel::accept_with(&l, opts, &link.accept_clients())?
        }
        (None, Some(addr)) => {
            if !link.is_tls() {
                eprintln!("{}", hush_transport::INSECURE_WARNING);
            }
            TcpChannel::connect_with(addr.as_str(), opts, &link.to_peer(addr)?)?
        }
        _ => return Err(Error::Config("give exactly one of --listen ADDR or --peer ADDR".into())),
    };
    let t0 = Instant::now();
    let mut rep = Report::default();
    let mut s = Session::start(&mut ch, role, ds.len(), ds.cols, &cfg)?;
    rep.setup_s = s.setup_s;
    let labels = (role == Role::Labels).then_some(ds.labels.as_slice());
    let m = s.train(&x, labels, &mut rep)?;
    let opened = if a.reveal { Some(reveal(&mut ch, &m)?) } else { None };
    save_model(&a.out, &m, opened.as_ref())?;
    let c = ch.cost();
    eprintln!(
        "trained {} epochs in {:.2} s ({} bytes, {} rounds); shares written to {}",
        a.epochs,
        t0.elapsed().as_secs_f64(),
        c.bytes_sent + c.bytes_recv,
        c.rounds,
        a.out.display()
    );
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct BenchPaillierArgs {
    /// 2048 or 3072.
    #[arg(long, default_value_t = 2048)]
    pub bits: u32,
    /// Operations per measurement.
    #[arg(long, default_value_t = 200)]
    pub iters: usize,
    /// Fixed-base window (bits).
    #[arg(long, default_value_t = 8)]
    pub window: u32,
    #[arg(long)]
    pub json: bool,
}

fn time_us(iters: usize, mut f: impl FnMut(usize)) -> f64 {
    let t = Instant::now();
    for i in 0..iters {
        f(i);
    }
    t.elapsed().as_secs_f64() * 1e6 / iters as f64
}

/// µs/op of Paillier on one core.
pub fn bench_paillier(bits: u32, iters: usize, window: u32) -> Result<Record> {
    let mut rng = StdRng::from_entropy();
    let t0 = Instant::now();
    let kp = KeyPair::generate_with_window(bits, window, &mut rng)?;
    let setup = t0.elapsed().as_secs_f64();
    let pk = kp.public().clone();
    let ms: Vec<Integer> = (0..iters).map(|_| Integer::from(rng.gen::<u64>())).collect();
    let t_all = Instant::now();
    let enc = time_us(iters, |i| {
        std::hint::black_box(kp.encrypt(&ms[i], &mut rng).unwrap());
    });
    let enc_pub = time_us(iters, |i| {
        std::hint::black_box(pk.encrypt(&ms[i], &mut rng).unwrap());
    });
    let cts: Vec<_> = ms.iter().map(|m| kp.encrypt(m, &mut rng).unwrap()).collect();
    let dec = time_us(iters, |i| {
        std::hint::black_box(kp.decrypt(&cts[i]));
    });
    let dec_iters = (iters / 10).max(3);
    let dec_nocrt = time_us(dec_iters, |i| {
        std::hint::black_box(kp.decrypt_no_crt(&cts[i]));
    });
    let k64: Vec<Integer> = (0..iters).map(|_| Integer::from(rng.gen::<u64>())).collect();
    let ctpt64 = time_us(iters, |i| {
        std::hint::black_box(pk.mul_plain(&cts[i], &k64[i]));
    });
    let k20: Vec<Integer> = (0..iters).map(|_| Integer::from(rng.gen_range(1u32..1 << 20))).collect();
    let ctpt20 = time_us(iters, |i| {
        std::hint::black_box(pk.mul_plain(&cts[i], &k20[i]));
    });
    let add = time_us(iters, |i| {
        std::hint::black_box(pk.add(&cts[i], &cts[(i + 1) % iters]));
    });
    let val = time_us(iters, |i| {
        pk.validate(cts[i].as_integer(), "bench").unwrap();
    });
    let wall = t_all.elapsed().as_secs_f64();
    let mut r = Record::new("paillier");
    r.set("wall_s", wall).set("bytes", 0).set("rounds", 0).set("setup_s", setup);
    r.set("bits", bits).set("path", hush_paillier::backend()).set("gmp_version", hush_paillier::gmp_version());
    r.set("threads", 1).set("window", window).set("short_exponent_bits", pk.short_exponent_bits());
    r.set("enc_us", enc).set("enc_public_us", enc_pub).set("dec_us", dec).set("dec_no_crt_us", dec_nocrt);
    r.set("ct_pt_us", ctpt64).set("ct_pt_20bit_us", ctpt20).set("ct_ct_us", add).set("validate_us", val);
    r.set("table_bytes_public", pk.table_bytes()).set("table_bytes_secret", kp.table_bytes());
    r.set("iters", iters);
    hush_bench::machine_fields(&mut r);
    Ok(r)
}

#[derive(clap::Args, Debug)]
pub struct BenchLrArgs {
    #[arg(long, default_value_t = 2000)]
    pub samples: usize,
    /// Features of the labels party and of the features party: A,B.
    #[arg(long, default_value = "30,70")]
    pub features: String,
    /// Fraction of non-zero entries.
    #[arg(long, default_value_t = 0.02)]
    pub density: f64,
    #[arg(long, default_value_t = 1)]
    pub epochs: u32,
    #[arg(long, default_value_t = 256)]
    pub batch: u32,
    #[arg(long, default_value_t = 2048)]
    pub bits: u32,
    #[arg(long, default_value = "cubic")]
    pub sigmoid: String,
    /// mem (in-process channel) or tcp (loopback, TLS).
    #[arg(long, default_value = "tcp")]
    pub transport: String,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
}

/// Runs both parties of a training in this process (one thread each).
pub fn run_pair<A: Channel + 'static, B: Channel + 'static>(
    mut ca: A,
    mut cb: B,
    dl: &Dataset,
    df: &Dataset,
    cfg: &TrainConfig,
) -> Result<(crate::secure::ModelShares, crate::secure::ModelShares, Report, u64, u32)> {
    let xl = dl.to_fixed()?;
    let xf = df.to_fixed()?;
    let (n, d_l, d_f) = (dl.len(), dl.cols, df.cols);
    let labels = dl.labels.clone();
    let t0 = Instant::now();
    let cfg2 = cfg.clone();
    let h = std::thread::spawn(move || -> Result<_> {
        let mut rep = Report::default();
        let mut s = Session::start(&mut cb, Role::Features, n, d_f, &cfg2)?;
        let m = s.train(&xf, None, &mut rep)?;
        Ok(m)
    });
    let mut rep = Report::default();
    let res = (|| -> Result<_> {
        let mut s = Session::start(&mut ca, Role::Labels, n, d_l, cfg)?;
        rep.setup_s = s.setup_s;
        s.train(&xl, Some(&labels), &mut rep)
    })();
    let mf = h.join().map_err(|_| Error::Peer("features thread panicked".into()))?;
    let ml = res?;
    let mf = mf?;
    rep.wall_s = t0.elapsed().as_secs_f64();
    let c = ca.cost();
    Ok((ml, mf, rep, c.bytes_sent + c.bytes_recv, c.rounds))
}

pub fn bench_lr(a: &BenchLrArgs) -> Result<Record> {
    let (fa, fb) = a
        .features
        .split_once(',')
        .and_then(|(x, y)| Some((x.trim().parse::<usize>().ok()?, y.trim().parse::<usize>().ok()?)))
        .ok_or_else(|| Error::Config(format!("--features {:?} (expected A,B)", a.features)))?;
    let (ds, _) = synthetic(a.samples, fa + fb, a.density, a.seed);
    let dl = ds.columns(0, fa);
    let df = ds.columns(fa, fa + fb);
    let cfg = TrainConfig {
        epochs: a.epochs,
        batch: a.batch,
        lr: 0.5,
        l2: 0.0,
        sigmoid: Sigmoid::parse(&a.sigmoid)?,
        key_bits: a.bits,
        order_seed: a.seed,
    };
    let nnz: usize = ds.rows.iter().map(|r| r.len()).sum();
    let (_, _, rep, bytes, rounds) = match a.transport.as_str() {
        "mem" => {
            let (x, y) = MemChannel::pair();
            run_pair(x, y, &dl, &df, &cfg)?
        }
        "tcp" => {
            let (x, y) = hush_transport::peering::loopback_pair(ChannelOptions::default(), true)?;
            run_pair(x, y, &dl, &df, &cfg)?
        }
        t => return Err(Error::Config(format!("--transport {t:?} (mem or tcp)"))),
    };
    let mut r = Record::new("lr");
    r.set("wall_s", rep.wall_s - rep.setup_s).set("bytes", bytes).set("rounds", rounds).set("setup_s", rep.setup_s);
    r.set("samples", a.samples).set("features_labels", fa).set("features_other", fb).set("density", a.density);
    r.set("nnz", nnz).set("epochs", a.epochs).set("batch", a.batch).set("bits", a.bits).set("sigmoid", cfg.sigmoid.name());
    r.set("epoch_s", rep.epoch_s.iter().sum::<f64>() / rep.epoch_s.len().max(1) as f64);
    r.set("triple_s", rep.triple_s).set("transport", a.transport.clone()).set("path", hush_paillier::backend());
    r.set("threads_per_party", 1);
    r.set(
        "data",
        "synthetic: entries non-zero w.p. density, values U[-1,1]; labels 1[w*.x + U(-0.1,0.1) > 0], w* = ±U[1,2]",
    );
    hush_bench::machine_fields(&mut r);
    Ok(r)
}
