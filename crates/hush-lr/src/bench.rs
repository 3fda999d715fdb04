//! `hush bench paillier` and `hush bench lr` from plain options (the flags
//! are in `hush-cli`), and the in-process two-party runner the tests share.

use crate::data::{synthetic, Dataset};
use crate::secure::{Report, Role, Session};
use crate::{Error, Result, Sigmoid, TrainConfig};
use hush_bench::Record;
use hush_paillier::{Integer, KeyPair};
use hush_transport::{Channel, ChannelOptions, MemChannel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::time::Instant;

fn time_us(iters: usize, mut f: impl FnMut(usize)) -> f64 {
    let t = Instant::now();
    for i in 0..iters {
        f(i);
    }
    t.elapsed().as_secs_f64() * 1e6 / iters as f64
}

/// µs/op of Paillier on one core, with a small-subgroup key (the default
/// key generation); `dec_djn_us` / `dec_batch_djn_us` time the same
/// decryptions under a standard DJN key (full exponents) in the same run,
/// `setup_s` / `setup_djn_s` the two key generations.
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
    let enc_batch = time_us(iters.div_ceil(8), |i| {
        let lo = (8 * i).min(iters);
        std::hint::black_box(kp.encrypt_batch(&ms[lo..(lo + 8).min(iters)], &mut rng).unwrap());
    }) / 8.0;
    let cts: Vec<_> = ms.iter().map(|m| kp.encrypt(m, &mut rng).unwrap()).collect();
    let dec = time_us(iters, |i| {
        std::hint::black_box(kp.decrypt(&cts[i]));
    });
    let dec_batch = time_us(iters.div_ceil(8), |i| {
        let lo = (8 * i).min(iters);
        std::hint::black_box(kp.decrypt_batch(&cts[lo..(lo + 8).min(iters)]));
    }) / 8.0;
    // the same decryptions under a standard DJN key (full exponents p − 1,
    // q − 1: the key generation before small-subgroup keys), for comparison
    let t0 = Instant::now();
    let djn = KeyPair::generate_kind(bits, window, hush_paillier::KeyKind::Djn, &mut rng)?;
    let setup_djn = t0.elapsed().as_secs_f64();
    let cts_djn: Vec<_> = ms.iter().map(|m| djn.public().encrypt(m, &mut rng).unwrap()).collect();
    let dec_djn = time_us(iters, |i| {
        std::hint::black_box(djn.decrypt(&cts_djn[i]));
    });
    let dec_batch_djn = time_us(iters.div_ceil(8), |i| {
        let lo = (8 * i).min(iters);
        std::hint::black_box(djn.decrypt_batch(&cts_djn[lo..(lo + 8).min(iters)]));
    }) / 8.0;
    drop(djn);
    let dec_iters = (iters / 10).max(3);
    let dec_nocrt = time_us(dec_iters, |i| {
        std::hint::black_box(kp.decrypt_no_crt(&cts[i]));
    });
    // scalars as the peers' benchmark draws them (shared/peers/paillier_bench.py):
    // 64 random bits with the top one set
    let k64u: Vec<u64> = (0..iters).map(|_| rng.gen::<u64>() | 1 << 63).collect();
    let k64: Vec<Integer> = k64u.iter().map(|&k| Integer::from(k)).collect();
    let ctpt64 = time_us(iters, |i| {
        std::hint::black_box(pk.mul_plain(&cts[i], &k64[i]));
    });
    let k20u: Vec<u64> = (0..iters).map(|_| rng.gen_range(1u64 << 19..1 << 20)).collect();
    let k20: Vec<Integer> = k20u.iter().map(|&k| Integer::from(k)).collect();
    let ctpt20 = time_us(iters, |i| {
        std::hint::black_box(pk.mul_plain(&cts[i], &k20[i]));
    });
    // the same, eight at a time (PublicKey::mul_u64_batch: one lane each;
    // its per-key IFMA context is made by a warm-up call, once per key)
    std::hint::black_box(pk.mul_u64_batch(&[(&cts[0], 3), (&cts[1 % iters], 5)]));
    let batch = |ks: &[u64]| {
        let pairs: Vec<(&hush_paillier::Ciphertext, u64)> = cts.iter().zip(ks).map(|(c, &k)| (c, k)).collect();
        let t = Instant::now();
        for chunk in pairs.chunks(8) {
            std::hint::black_box(pk.mul_u64_batch(chunk));
        }
        t.elapsed().as_secs_f64() * 1e6 / iters as f64
    };
    let ctpt_batch = batch(&k64u);
    let ctpt20_batch = batch(&k20u);
    // four more passes over the same pairs: the fastest of the five is the
    // figure of a pass no other process interrupted (`ct_pt_batch_us`
    // stays the first pass's, as before)
    let ctpt_batch_min = (0..4).map(|_| batch(&k64u)).fold(ctpt_batch, f64::min);
    // the evaluator's fresh h_s^a factors: one by one (GMP, fixed base)
    // and eight at a time (PublicKey::rerandomize_batch; the public table's
    // Montgomery form is made by a warm-up call, once per key)
    let rerand = time_us(iters, |i| {
        std::hint::black_box(pk.rerandomize(&cts[i], &mut rng));
    });
    std::hint::black_box(pk.rerandomize_batch(&cts[..2.min(iters)], &mut rng));
    let rerand_batch = time_us(iters.div_ceil(8), |i| {
        let lo = (8 * i).min(iters);
        std::hint::black_box(pk.rerandomize_batch(&cts[lo..(lo + 8).min(iters)], &mut rng));
    }) / 8.0;
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
    r.set("dec_batch_us", dec_batch).set("dec_batch_path", hush_paillier::dec_batch_path());
    r.set("key_kind", format!("{:?}", kp.kind()).to_lowercase()).set("dec_exponent_bits", kp.decryption_exponent_bits());
    r.set("setup_djn_s", setup_djn).set("dec_djn_us", dec_djn).set("dec_batch_djn_us", dec_batch_djn);
    r.set("enc_batch_us", enc_batch).set("enc_batch_path", hush_paillier::dec_batch_path());
    r.set("ct_pt_batch_us", ctpt_batch).set("ct_pt_batch_bits", 64).set("ct_pt_20bit_batch_us", ctpt20_batch);
    r.set("ct_pt_batch_path", hush_paillier::dec_batch_path());
    r.set("ct_pt_batch_min_us", ctpt_batch_min).set("ct_pt_batch_passes", 5);
    r.set("ct_pt_us", ctpt64).set("ct_pt_20bit_us", ctpt20).set("ct_ct_us", add).set("validate_us", val);
    r.set("rerandomize_us", rerand).set("rerandomize_batch_us", rerand_batch);
    r.set("table_bytes_public", pk.table_bytes()).set("table_bytes_secret", kp.table_bytes());
    r.set("iters", iters);
    hush_bench::machine_fields(&mut r);
    Ok(r)
}

/// The options of [`bench_lr`] (the flags of `hush bench lr`, parsed in `hush-cli`).
#[derive(Debug, Clone)]
pub struct BenchLrOptions {
    /// A real data set instead of synthetic data: `breast_cancer`
    /// (scikit-learn's, read through the environment's Python; features
    /// 0–14 and the labels at one party, 15–29 at the other; prints
    /// `accuracy` on the held-out half beside `sklearn_accuracy` and
    /// `plaintext_accuracy`).
    pub dataset: Option<String>,
    /// Held-out fraction of --dataset (stratified split, seeded by --seed).
    pub test_fraction: f64,
    /// Learning rate (default 0.5 synthetic, 1.0 breast_cancer).
    pub lr: Option<f64>,
    /// Epoch e uses lr / (1 + lr_decay·e) (default 0 synthetic, 1 breast_cancer).
    pub lr_decay: Option<f64>,
    /// L2 regularisation λ (default 0 synthetic, 0.03 breast_cancer;
    /// scikit-learn gets C = 1/(λ·n_train) on the same columns).
    pub l2: Option<f64>,
    pub samples: usize,
    /// SHAPER Table 6's shape: one epoch at 2·10^5 … 10^6 samples,
    /// 30,000 + 70,000 features, density 0.02 % (--samples, --features and
    /// --density are ignored). Each cell is extrapolated from one measured
    /// epoch of --measure-batches batches (cost per epoch is linear in the
    /// number of batches) and labelled so.
    pub table: bool,
    /// Batches in the measured epoch of --table.
    pub measure_batches: usize,
    /// Features of the labels party and of the features party: A,B.
    pub features: String,
    /// Fraction of non-zero entries.
    pub density: f64,
    /// Epochs (default 1 synthetic, 20 breast_cancer).
    pub epochs: Option<u32>,
    /// Batch size (default 256 synthetic, 32 breast_cancer).
    pub batch: Option<u32>,
    pub bits: u32,
    pub sigmoid: String,
    /// As `hush train --low-bandwidth`.
    pub low_bandwidth: bool,
    /// mem (in-process channel) or tcp (loopback, TLS).
    pub transport: String,
    /// Emulated network between the two parties: none, lan, wan, mobile,
    /// or shaper (SHAPER's and CAESAR's evaluation network: 40 Mbps per
    /// direction, 40 ms one-way). Compute and communication overlap as
    /// they would on that link; `--table` then measures its epoch there.
    pub net: String,
    pub seed: u64,
    pub json: bool,
}

/// What [`run_pair_test`] returns: both parties' shares, the labels
/// party's report, bytes and rounds, and the opened held-out scores z.
pub type PairRun = (crate::secure::ModelShares, crate::secure::ModelShares, Report, u64, u32, Option<Vec<f64>>);

/// Runs both parties of a training in this process (one thread each).
pub fn run_pair<A: Channel + 'static, B: Channel + 'static>(
    ca: A,
    cb: B,
    dl: &Dataset,
    df: &Dataset,
    cfg: &TrainConfig,
) -> Result<(crate::secure::ModelShares, crate::secure::ModelShares, Report, u64, u32)> {
    let (ml, mf, rep, bytes, rounds, _) = run_pair_test(ca, cb, dl, df, None, cfg)?;
    Ok((ml, mf, rep, bytes, rounds))
}

/// [`run_pair`], then (if `test` = (labels party's rows, features party's
/// rows) is given) the shared model scores the held-out rows in the same
/// session, z opened to the labels party only. `bytes`/`rounds` cover the
/// training only.
pub fn run_pair_test<A: Channel + 'static, B: Channel + 'static>(
    mut ca: A,
    mut cb: B,
    dl: &Dataset,
    df: &Dataset,
    test: Option<(&Dataset, &Dataset)>,
    cfg: &TrainConfig,
) -> Result<PairRun> {
    let xl = dl.to_fixed()?;
    let xf = df.to_fixed()?;
    let tl = test.map(|(t, _)| t.to_fixed()).transpose()?;
    let tf = test.map(|(_, t)| t.to_fixed()).transpose()?;
    let (n, d_l, d_f) = (dl.len(), dl.cols, df.cols);
    let labels = dl.labels.clone();
    let t0 = Instant::now();
    let cfg2 = cfg.clone();
    let h = std::thread::spawn(move || -> Result<_> {
        let mut rep = Report::default();
        let mut s = Session::start(&mut cb, Role::Features, n, d_f, &cfg2)?;
        let m = s.train(&xf, None, &mut rep)?;
        if let Some(tf) = &tf {
            s.predict(tf, &m)?;
        }
        Ok(m)
    });
    let mut rep = Report::default();
    let mut cost = (0, 0);
    let res = (|| -> Result<_> {
        let mut s = Session::start(&mut ca, Role::Labels, n, d_l, cfg)?;
        rep.setup_s = s.setup_s;
        let m = s.train(&xl, Some(&labels), &mut rep)?;
        rep.wall_s = t0.elapsed().as_secs_f64();
        let c = s.cost();
        cost = (c.bytes_sent + c.bytes_recv, c.rounds);
        (rep.bytes_from_labels, rep.bytes_to_labels) = (c.bytes_sent, c.bytes_recv);
        let z = match &tl {
            Some(tl) => s.predict(tl, &m)?,
            None => None,
        };
        Ok((m, z))
    })();
    let mf = h.join().map_err(|_| Error::Peer("features thread panicked".into()))?;
    let (ml, z) = res?;
    let mf = mf?;
    Ok((ml, mf, rep, cost.0, cost.1, z))
}

/// The Python that `--dataset` uses: `HUSH_PYTHON`, else the active
/// virtual environment's (`$VIRTUAL_ENV/bin/python`).
pub fn python() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HUSH_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        let p = PathBuf::from(v).join("bin").join("python");
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::Config(
        "--dataset needs Python with scikit-learn: activate the environment (. .venv/bin/activate) or set HUSH_PYTHON"
            .into(),
    ))
}

/// Loads scikit-learn's breast_cancer (shipped inside the package, no
/// network), splits it (stratified, `seed`), and fits scikit-learn's
/// LogisticRegression on the same preprocessed columns as ours: every
/// column scaled to [−1, 1] by the training rows' min/max, a constant-1
/// column, `fit_intercept=False` (so the intercept is regularised as ours
/// is), C = 1/(λ·n_train) (our loss is the mean log-loss + λ/2·‖θ‖²).
const BREAST_CANCER_PY: &str = r#"
import json, sys
import numpy as np
import sklearn
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.linear_model import LogisticRegression
seed, lam, test = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
X, y = load_breast_cancer(return_X_y=True)
Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test, random_state=seed, stratify=y)
lo, hi = Xtr.min(0), Xtr.max(0)
span = np.where(hi > lo, hi - lo, 1.0)
f = lambda A: np.hstack([np.where(hi > lo, 2 * (A - lo) / span - 1, 0.0), np.ones((len(A), 1))])
m = LogisticRegression(C=1.0 / (lam * len(ytr)), fit_intercept=False, max_iter=100000, tol=1e-10).fit(f(Xtr), ytr)
acc = float((m.predict(f(Xte)) == yte).mean())
json.dump({"x_train": Xtr.tolist(), "y_train": ytr.tolist(), "x_test": Xte.tolist(), "y_test": yte.tolist(),
           "sklearn_accuracy": acc, "sklearn_version": sklearn.__version__}, sys.stdout)
"#;

/// breast_cancer as (train, test) data sets (raw values) + scikit-learn's
/// held-out accuracy and version.
pub fn breast_cancer(seed: u64, l2: f64, test_fraction: f64) -> Result<(Dataset, Dataset, f64, String)> {
    if !(l2 > 0.0) {
        return Err(Error::Config("--dataset breast_cancer needs --l2 > 0 (scikit-learn's C = 1/(λ·n))".into()));
    }
    if !(test_fraction > 0.0 && test_fraction < 1.0) {
        return Err(Error::Config(format!("--test-fraction {test_fraction} (between 0 and 1)")));
    }
    let py = python()?;
    let out = std::process::Command::new(&py)
        .args(["-c", BREAST_CANCER_PY, &(seed % (1 << 31)).to_string(), &l2.to_string(), &test_fraction.to_string()])
        .output()
        .map_err(|e| Error::Config(format!("cannot run {} ({e}); set HUSH_PYTHON to a Python with scikit-learn", py.display())))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr);
        let line = msg.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        return Err(Error::Config(format!("{} could not load breast_cancer with scikit-learn: {line}", py.display())));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::Data(format!("breast_cancer from {}: {e}", py.display())))?;
    let rows = |k: &str| -> Result<Vec<Vec<(usize, f64)>>> {
        let a = v[k].as_array().ok_or_else(|| Error::Data(format!("breast_cancer: no {k}")))?;
        a.iter()
            .map(|r| {
                let r = r.as_array().filter(|r| r.len() == 30).ok_or_else(|| Error::Data("breast_cancer: rows of 30".into()))?;
                r.iter()
                    .enumerate()
                    .map(|(c, x)| x.as_f64().map(|x| (c, x)).ok_or_else(|| Error::Data("breast_cancer: a value".into())))
                    .filter(|r| !matches!(r, Ok((_, x)) if *x == 0.0))
                    .collect()
            })
            .collect()
    };
    let labels = |k: &str| -> Result<Vec<f64>> {
        v[k].as_array()
            .ok_or_else(|| Error::Data(format!("breast_cancer: no {k}")))?
            .iter()
            .map(|y| y.as_f64().filter(|y| *y == 0.0 || *y == 1.0).ok_or_else(|| Error::Data("breast_cancer: a label".into())))
            .collect()
    };
    let train = Dataset { rows: rows("x_train")?, cols: 30, labels: labels("y_train")? };
    let test = Dataset { rows: rows("x_test")?, cols: 30, labels: labels("y_test")? };
    if train.rows.len() != train.labels.len() || test.rows.len() != test.labels.len() || train.is_empty() || test.is_empty() {
        return Err(Error::Data("breast_cancer: inconsistent split".into()));
    }
    let acc = v["sklearn_accuracy"].as_f64().ok_or_else(|| Error::Data("breast_cancer: no sklearn_accuracy".into()))?;
    Ok((train, test, acc, v["sklearn_version"].as_str().unwrap_or("?").to_string()))
}

/// One party's columns [lo, hi) of train and test, scaled to [−1, 1] by
/// that party's own training rows (plus the intercept column at the labels
/// party): what each party would do locally before `hush train`.
fn party_columns(train: &Dataset, test: &Dataset, lo: usize, hi: usize, intercept: bool) -> (Dataset, Dataset) {
    let (a, b) = (train.columns(lo, hi), test.columns(lo, hi));
    let sc = a.range_scaler();
    let (a, b) = (a.scale_sym(&sc), b.scale_sym(&sc));
    if intercept {
        (crate::party::with_intercept(&a), crate::party::with_intercept(&b))
    } else {
        (a, b)
    }
}

fn channel_pair(transport: &str, net: &str) -> Result<(Box<dyn Channel>, Box<dyn Channel>)> {
    let profile = hush_transport::NetProfile::by_name(net).ok_or_else(|| {
        Error::Config(format!("--net {net:?} (one of {})", hush_transport::NetProfile::names().join(", ")))
    })?;
    let opts = ChannelOptions { profile, ..ChannelOptions::default() };
    Ok(match transport {
        "mem" => {
            let (x, y) = MemChannel::pair_with(opts);
            (Box::new(x), Box::new(y))
        }
        "tcp" => {
            let (x, y) = hush_transport::peering::loopback_pair(opts, true)?;
            (Box::new(x), Box::new(y))
        }
        t => return Err(Error::Config(format!("--transport {t:?} (mem or tcp)"))),
    })
}

fn bench_breast_cancer(a: &BenchLrOptions) -> Result<Record> {
    let cfg = TrainConfig {
        epochs: a.epochs.unwrap_or(20),
        batch: a.batch.unwrap_or(32),
        lr: a.lr.unwrap_or(1.0),
        lr_decay: a.lr_decay.unwrap_or(1.0),
        l2: a.l2.unwrap_or(0.03),
        sigmoid: Sigmoid::parse(&a.sigmoid)?,
        key_bits: a.bits,
        order_seed: a.seed,
        reveal: false,
        low_bandwidth: a.low_bandwidth,
    };
    let (train, test, sk_acc, sk_version) = breast_cancer(a.seed, cfg.l2, a.test_fraction)?;
    let (dl, tl) = party_columns(&train, &test, 0, 15, true);
    let (df, tf) = party_columns(&train, &test, 15, 30, false);
    let (x, y) = channel_pair(&a.transport, &a.net)?;
    let (_, _, rep, bytes, rounds, z) = run_pair_test(x, y, &dl, &df, Some((&tl, &tf)), &cfg)?;
    let z = z.ok_or_else(|| Error::Peer("no held-out scores".into()))?;
    let ok = z.iter().zip(&test.labels).filter(|(z, y)| (**z > 0.0) == (**y > 0.5)).count();
    let acc = ok as f64 / test.len() as f64;
    // the same mini-batch algorithm in plaintext on the joined columns
    let wp = crate::plain::train(&dl.hjoin(&df), &cfg);
    let plain_acc = crate::accuracy(&tl.hjoin(&tf), &wp, 0.0);
    let mut r = Record::new("lr");
    r.set("wall_s", rep.wall_s - rep.setup_s).set("bytes", bytes).set("rounds", rounds).set("setup_s", rep.setup_s);
    r.set("dataset", "breast_cancer").set("samples_train", train.len()).set("samples_test", test.len());
    r.set("features_labels", 15).set("features_other", 15).set("intercept", "labels party");
    r.set("accuracy", acc).set("sklearn_accuracy", sk_acc).set("plaintext_accuracy", plain_acc);
    r.set("accuracy_scope", "held-out split, secure prediction with the shared model (z opened to the labels party)");
    r.set("sklearn_version", sk_version).set("sklearn_model", "LogisticRegression(C=1/(l2*n_train), fit_intercept=False, lbfgs) on the same columns incl. the constant one");
    r.set("preprocessing", "each party scales its columns to [-1,1] by its training rows' min/max");
    r.set("split", format!("sklearn train_test_split(test_size={}, stratify=y, random_state={})", a.test_fraction, a.seed % (1 << 31)));
    r.set("epochs", cfg.epochs).set("batch", cfg.batch).set("lr", cfg.lr).set("lr_decay", cfg.lr_decay).set("l2", cfg.l2);
    r.set("bits", a.bits).set("sigmoid", cfg.sigmoid.name()).set("transport", a.transport.clone()).set("net", a.net.clone()).set("path", hush_paillier::backend());
    r.set("epoch_s", rep.epoch_s.iter().sum::<f64>() / rep.epoch_s.len().max(1) as f64).set("triple_s", rep.triple_s);
    r.set("threads_per_party", 1);
    hush_bench::machine_fields(&mut r);
    Ok(r)
}

/// SHAPER Table 6 (minutes, whole training; the number of epochs is not
/// stated there): CAESAR on CPU with Paillier and with OU, SHAPER on FPGA.
const SHAPER_TABLE6: [(usize, f64, f64, f64); 5] =
    [(200_000, 615.0, 66.0, 11.0), (400_000, 1239.0, 133.0, 17.0), (600_000, 1862.0, 200.0, 23.0), (800_000, 2477.0, 266.0, 28.0), (1_000_000, 3101.0, 333.0, 33.0)];

fn bench_lr_table(a: &BenchLrOptions) -> Result<Record> {
    let (fa, fb, density) = (30_000usize, 70_000usize, 0.0002);
    let batch = a.batch.unwrap_or(4096);
    if a.measure_batches == 0 || batch == 0 {
        return Err(Error::Config("--measure-batches and --batch must be positive".into()));
    }
    let n_meas = a.measure_batches * batch as usize;
    let (ds, _) = synthetic(n_meas, fa + fb, density, a.seed);
    let (dl, df) = (ds.columns(0, fa), ds.columns(fa, fa + fb));
    let nnz: usize = ds.rows.iter().map(|r| r.len()).sum();
    let cfg = TrainConfig {
        epochs: 1,
        batch,
        lr: a.lr.unwrap_or(0.5),
        lr_decay: 0.0,
        l2: a.l2.unwrap_or(0.0),
        sigmoid: Sigmoid::parse(&a.sigmoid)?,
        key_bits: a.bits,
        order_seed: a.seed,
        reveal: false,
        low_bandwidth: a.low_bandwidth,
    };
    let (x, y) = channel_pair(&a.transport, &a.net)?;
    let (_, _, rep, bytes, rounds) = run_pair(x, y, &dl, &df, &cfg)?;
    let epoch_meas = rep.epoch_s.first().copied().unwrap_or(rep.wall_s - rep.setup_s);
    let per_sample = epoch_meas / n_meas as f64;
    let bytes_per_sample = bytes as f64 / n_meas as f64;
    let label = format!(
        "extrapolated: one epoch measured at {n_meas} samples ({} batches of {batch}), scaled linearly in samples",
        a.measure_batches
    );
    let mut text = String::new();
    text.push_str(&format!(
        "vertical LR, one epoch, {fa} + {fb} features, density 0.02 %, batch {batch}, Paillier-{} ({}), {} sigmoid, both parties on this machine ({}, loopback {}, emulated network: {}), minutes\n",
        a.bits,
        hush_paillier::backend(),
        cfg.sigmoid.name(),
        hush_bench::cpu_model(),
        if a.transport == "tcp" { "TLS" } else { "in-memory" },
        match a.net.as_str() {
            "none" => "none".to_string(),
            "shaper" => "shaper = SHAPER's 40 Mbps per direction, 40 ms one-way".to_string(),
            n => n.to_string(),
        }
    ));
    text.push_str(&format!("{:<34}", "design / samples"));
    let cols: Vec<usize> = std::iter::once(100_000).chain(SHAPER_TABLE6.iter().map(|c| c.0)).collect();
    for n in &cols {
        text.push_str(&format!("{:>10}", format!("{}K", n / 1000)));
    }
    text.push('\n');
    let mut recs = Vec::new();
    text.push_str(&format!("{:<34}", "hush, per epoch (extrapolated)"));
    for &n in &cols {
        let min = per_sample * n as f64 / 60.0;
        text.push_str(&format!("{:>10.1}", min));
        let mut r = Record::new("lr_table");
        r.set("samples", n).set("features_labels", fa).set("features_other", fb).set("density", density);
        r.set("batch", batch).set("bits", a.bits).set("sigmoid", cfg.sigmoid.name()).set("path", hush_paillier::backend());
        r.set("epoch_min", min).set("bytes_per_epoch", bytes_per_sample * n as f64);
        r.set("comm_min_at_40mbps", bytes_per_sample * n as f64 * 8.0 / 40e6 / 60.0);
        let busier = rep.bytes_from_labels.max(rep.bytes_to_labels) as f64 / n_meas as f64;
        r.set("comm_min_at_40mbps_busier_direction", busier * n as f64 * 8.0 / 40e6 / 60.0);
        r.set("net", a.net.clone());
        r.set("extrapolated", true).set("basis", label.clone()).set("measured_samples", n_meas);
        r.set("threads_per_party", 1).set("transport", a.transport.clone()).set("net", a.net.clone());
        hush_bench::machine_fields(&mut r);
        recs.push(r);
    }
    text.push('\n');
    text.push_str(&format!("{:<34}", "  of which triples (extrapolated)"));
    for &n in &cols {
        text.push_str(&format!("{:>10.1}", rep.triple_s / n_meas as f64 * n as f64 / 60.0));
    }
    text.push('\n');
    text.push_str(&format!("{:<34}", "  all bytes at 40 Mbps, not hidden"));
    for &n in &cols {
        text.push_str(&format!("{:>10.1}", bytes_per_sample * n as f64 * 8.0 / 40e6 / 60.0));
    }
    text.push('\n');
    // each direction has its own 40 Mbps: the busier one bounds an epoch
    // from below however well computation hides it
    let busier = rep.bytes_from_labels.max(rep.bytes_to_labels) as f64 / n_meas as f64;
    text.push_str(&format!("{:<34}", "  busier direction at 40 Mbps"));
    for &n in &cols {
        text.push_str(&format!("{:>10.1}", busier * n as f64 * 8.0 / 40e6 / 60.0));
    }
    text.push('\n');
    for (name, k) in [("CAESAR Paillier, CPU (paper, total)", 1), ("CAESAR OU, CPU (paper, total)", 2), ("SHAPER, FPGA (paper, total)", 3)] {
        text.push_str(&format!("{name:<34}{:>10}", "-"));
        for c in SHAPER_TABLE6 {
            text.push_str(&format!("{:>10.0}", [c.1, c.2, c.3][k - 1]));
        }
        text.push('\n');
    }
    text.push_str(&format!("({label}; the paper's rows are whole trainings, 40 Mbps / 40 ms, epochs not stated)\n"));
    if a.json {
        for r in &recs {
            println!("{}", r.json());
        }
    } else {
        print!("{text}");
    }
    let mut r = Record::new("lr");
    r.set("wall_s", rep.wall_s - rep.setup_s).set("bytes", bytes).set("rounds", rounds).set("setup_s", rep.setup_s);
    r.set("samples", n_meas).set("features_labels", fa).set("features_other", fb).set("density", density).set("nnz", nnz);
    r.set("epochs", 1).set("batch", batch).set("bits", a.bits).set("sigmoid", cfg.sigmoid.name()).set("epoch_s", epoch_meas);
    r.set("triple_s", rep.triple_s).set("transport", a.transport.clone()).set("net", a.net.clone()).set("path", hush_paillier::backend());
    r.set("bytes_labels_to_features", rep.bytes_from_labels).set("bytes_features_to_labels", rep.bytes_to_labels);
    r.set("threads_per_party", 1).set("table_basis", "the measured epoch the table rows are extrapolated from");
    hush_bench::machine_fields(&mut r);
    Ok(r)
}

pub fn bench_lr(a: &BenchLrOptions) -> Result<Record> {
    if a.table {
        return bench_lr_table(a);
    }
    match a.dataset.as_deref() {
        None => {}
        Some("breast_cancer") => return bench_breast_cancer(a),
        Some(d) => return Err(Error::Config(format!("--dataset {d:?} (only breast_cancer)"))),
    }
    let (fa, fb) = a
        .features
        .split_once(',')
        .and_then(|(x, y)| Some((x.trim().parse::<usize>().ok()?, y.trim().parse::<usize>().ok()?)))
        .ok_or_else(|| Error::Config(format!("--features {:?} (expected A,B)", a.features)))?;
    let (ds, _) = synthetic(a.samples, fa + fb, a.density, a.seed);
    let dl = ds.columns(0, fa);
    let df = ds.columns(fa, fa + fb);
    let cfg = TrainConfig {
        epochs: a.epochs.unwrap_or(1),
        batch: a.batch.unwrap_or(256),
        lr: a.lr.unwrap_or(0.5),
        lr_decay: a.lr_decay.unwrap_or(0.0),
        l2: a.l2.unwrap_or(0.0),
        sigmoid: Sigmoid::parse(&a.sigmoid)?,
        key_bits: a.bits,
        order_seed: a.seed,
        reveal: false,
        low_bandwidth: a.low_bandwidth,
    };
    let nnz: usize = ds.rows.iter().map(|r| r.len()).sum();
    let (x, y) = channel_pair(&a.transport, &a.net)?;
    let (_, _, rep, bytes, rounds) = run_pair(x, y, &dl, &df, &cfg)?;
    let mut r = Record::new("lr");
    r.set("wall_s", rep.wall_s - rep.setup_s).set("bytes", bytes).set("rounds", rounds).set("setup_s", rep.setup_s);
    r.set("samples", a.samples).set("features_labels", fa).set("features_other", fb).set("density", a.density);
    r.set("nnz", nnz).set("epochs", cfg.epochs).set("batch", cfg.batch).set("bits", a.bits).set("sigmoid", cfg.sigmoid.name());
    r.set("epoch_s", rep.epoch_s.iter().sum::<f64>() / rep.epoch_s.len().max(1) as f64);
    r.set("triple_s", rep.triple_s).set("transport", a.transport.clone()).set("net", a.net.clone()).set("path", hush_paillier::backend());
    r.set("bytes_labels_to_features", rep.bytes_from_labels).set("bytes_features_to_labels", rep.bytes_to_labels);
    r.set("threads_per_party", 1);
    r.set(
        "data",
        "synthetic: entries non-zero w.p. density, values U[-1,1]; labels 1[w*.x + U(-0.1,0.1) > 0], w* = ±U[1,2]",
    );
    hush_bench::machine_fields(&mut r);
    Ok(r)
}
