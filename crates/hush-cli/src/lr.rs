//! `hush train`, `hush predict`, `hush bench paillier`, `hush bench lr`:
//! the flags (clap) and the glue that prints; the work is in `hush-lr`.

use hush_lr::bench::BenchLrOptions;
use hush_lr::party::{train_party_ids, PredictOptions};
use hush_lr::secure::Role;
use hush_lr::{Result, Sigmoid, TrainConfig};
use hush_transport::{LinkConfig, LinkFlags};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    /// labels (holds the labels and some features) or features.
    #[arg(long)]
    pub role: String,
    /// This party's data: libsvm/svmlight text or a SciPy sparse .npz (CSR,
    /// `scipy.sparse.save_npz`), samples aligned by row with the peer's file
    /// (the features party's labels are ignored); with --ids-column, a CSV
    /// file with a header whose rows are aligned by a PSI first.
    #[arg(long)]
    pub data: PathBuf,
    /// Rows are not aligned: --data is CSV with this ID column; an ECDH-PSI
    /// with the peer (see `hush psi`) keeps only the IDs both hold, in one
    /// shared order, then training runs on that intersection. Both parties
    /// must pass it. The peer learns this party's row count and which IDs
    /// are shared, nothing about the other IDs.
    #[arg(long, value_name = "NAME", conflicts_with = "labels")]
    pub ids_column: Option<String>,
    /// With --ids-column: the CSV column holding the labels (0/1 or −1/+1;
    /// labels party; a features party's column of that name is ignored).
    /// Every other column is a numeric feature.
    #[arg(long, value_name = "NAME", default_value = "label", requires = "ids_column")]
    pub label_column: String,
    /// Labels for a .npz --data (labels party): .npy (0/1 or -1/+1) or text,
    /// one per line.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Listen at this address (prints `fingerprint sha256:<hex>`) ...
    #[arg(long, conflicts_with = "peer")]
    pub listen: Option<String>,
    /// ... or connect to the peer at this address (needs --pin sha256:HEX).
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
    /// Epoch e uses lr / (1 + lr_decay·e).
    #[arg(long, default_value_t = 0.0)]
    pub lr_decay: f64,
    /// L2 regularisation λ.
    #[arg(long, default_value_t = 0.0)]
    pub l2: f64,
    /// Paillier modulus bits: 2048 or 3072.
    #[arg(long, default_value_t = 2048)]
    pub bits: u32,
    /// cubic (0.5 + 0.197z − 0.004z³) or linear (0.5 + z/4).
    #[arg(long, default_value = "cubic")]
    pub sigmoid: String,
    /// For slow links: the model shares go slot-packed in the forward pass
    /// and the backward pass balances the two directions (on SHAPER's
    /// shape, 41–50 MB per batch of 4,096 instead of 127 MB, ~10 % more
    /// CPU). Both parties must agree.
    #[arg(long)]
    pub low_bandwidth: bool,
    /// Add a constant-1 intercept column (labels party; default on).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub intercept: bool,
    /// Open the trained model to both parties and store it beside the
    /// shares (both parties must pass it; checked before training).
    #[arg(long)]
    pub reveal: bool,
    /// Seed of the batch order (both parties must agree).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Shard the training over this party's Ray cluster (`auto`, or the
    /// head's HOST:PORT): --workers actors, worker i linked to the peer's
    /// worker i at PORT + i of --listen/--peer. Runs from the Python
    /// package's `hush` (pip install 'hush[ray]'); both parties use it.
    #[arg(long, value_name = "ADDRESS")]
    pub ray: Option<String>,
    /// With --ray: workers (Ray actors) per party; both parties the same.
    #[arg(long, value_name = "K", default_value_t = 1, requires = "ray")]
    pub workers: u32,
    /// With --ray: write this party's shares here after every epoch
    /// (atomically, mode 0600) and resume after the last completed epoch
    /// when the file exists (both parties resume from the same epoch).
    #[arg(long, value_name = "FILE", requires = "ray")]
    pub checkpoint: Option<PathBuf>,
    #[command(flatten)]
    pub link: LinkFlags,
}

/// `hush train --ray ...` as the Python package's `hush` hands it to
/// `hush.ray`: the parsed flags and this party's data, loaded and checked
/// by the same code as `hush train`.
pub struct RaySpec {
    pub args: TrainArgs,
    pub data: hush_lr::data::Dataset,
    pub has_labels: bool,
    pub ids: Option<Vec<String>>,
}

#[derive(clap::Parser, Debug)]
#[command(name = "hush train")]
struct TrainCmd {
    #[command(flatten)]
    a: TrainArgs,
}

/// Parses `hush train` flags (`argv` after `train`) and loads the data.
pub fn ray_spec(argv: Vec<String>) -> std::result::Result<RaySpec, String> {
    use clap::Parser;
    let mut full = vec!["hush train".to_string()];
    full.extend(argv);
    let a = TrainCmd::try_parse_from(full).map_err(|e| e.render().to_string())?.a;
    if a.ray.is_none() {
        return Err("ray_spec is for `hush train --ray`".into());
    }
    let (data, has_labels, ids) = load_train_data(&a).map_err(|e| e.to_string())?;
    Ok(RaySpec { args: a, data, has_labels, ids })
}

fn load_train_data(a: &TrainArgs) -> Result<(hush_lr::data::Dataset, bool, Option<Vec<String>>)> {
    Ok(match &a.ids_column {
        Some(col) => {
            let (ds, has, ids) = hush_lr::data::load_csv_with_ids(&a.data, col, &a.label_column)?;
            (ds, has, Some(ids))
        }
        None => {
            let (ds, has) = hush_lr::data::load_with_labels(&a.data, a.labels.as_deref())?;
            (ds, has, None)
        }
    })
}

pub fn train_main(a: TrainArgs) -> Result<()> {
    if let Some(r) = &a.ray {
        return Err(hush_lr::Error::Config(format!(
            "--ray {r}: a sharded training drives Ray actors from Python; run the `hush` command of the Python package \
             (pip install 'hush[ray]'), which hands --ray to hush.ray"
        )));
    }
    let role = Role::parse(&a.role)?;
    let cfg = TrainConfig {
        epochs: a.epochs,
        batch: a.batch,
        lr: a.lr,
        lr_decay: a.lr_decay,
        l2: a.l2,
        sigmoid: Sigmoid::parse(&a.sigmoid)?,
        key_bits: a.bits,
        order_seed: a.seed,
        reveal: a.reveal,
        low_bandwidth: a.low_bandwidth,
    };
    let (ds, has_labels, ids) = load_train_data(&a)?;
    let link = LinkConfig::from_flags(&a.link)?;
    let o = train_party_ids(ds, ids.as_deref(), has_labels, role, &cfg, a.intercept, a.listen.as_deref(), a.peer.as_deref(), &link, Some(&a.out))?;
    if let Some(p) = &o.psi {
        eprintln!(
            "PSI: {} of this party's {} rows are shared with the peer's {} ({:.2} s, {} bytes); training on them",
            p.intersection, p.own_size, p.peer_size, p.wall_s, p.bytes
        );
    }
    eprintln!(
        "trained {} epochs in {:.2} s ({} bytes, {} rounds); shares written to {}",
        a.epochs,
        o.report.wall_s,
        o.bytes,
        o.rounds,
        a.out.display()
    );
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct PredictArgs {
    /// This party's model file from `hush train` (its role is read from it).
    #[arg(long)]
    pub model: PathBuf,
    /// Rows to score: this party's columns (libsvm or .npz), samples aligned
    /// by row with the peer's file. Without --listen/--peer: whole rows
    /// (the labels party's columns, then the features party's) scored
    /// locally with the revealed model.
    #[arg(long)]
    pub data: PathBuf,
    /// Labels for a .npz --data (only used to report accuracy).
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// Listen at this address (prints `fingerprint sha256:<hex>`) ...
    #[arg(long, conflicts_with = "peer")]
    pub listen: Option<String>,
    /// ... or connect to the peer at this address (needs --pin sha256:HEX).
    #[arg(long)]
    pub peer: Option<String>,
    /// Where the labels party (or a local run) writes the scores: CSV with
    /// a header `score,probability,prediction` (z = θ·x, σ(z), 1 if z > 0 else 0),
    /// one line per row, written atomically.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Paillier modulus bits of this session: 2048 or 3072 (both agree).
    #[arg(long, default_value_t = 2048)]
    pub bits: u32,
    #[command(flatten)]
    pub link: LinkFlags,
}

impl From<PredictArgs> for PredictOptions {
    fn from(a: PredictArgs) -> Self {
        PredictOptions { model: a.model, data: a.data, labels: a.labels, listen: a.listen, peer: a.peer, out: a.out, bits: a.bits, link: a.link }
    }
}

/// `hush predict`.
pub fn predict_main(a: PredictArgs) -> Result<()> {
    hush_lr::party::predict(a.into())
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

#[derive(clap::Args, Debug)]
pub struct BenchLrArgs {
    /// A real data set instead of synthetic data: `breast_cancer`
    /// (scikit-learn's, read through the environment's Python; features
    /// 0–14 and the labels at one party, 15–29 at the other; prints
    /// `accuracy` on the held-out half beside `sklearn_accuracy` and
    /// `plaintext_accuracy`).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Held-out fraction of --dataset (stratified split, seeded by --seed).
    #[arg(long, default_value_t = 0.5)]
    pub test_fraction: f64,
    /// Learning rate (default 0.5 synthetic, 1.0 breast_cancer).
    #[arg(long)]
    pub lr: Option<f64>,
    /// Epoch e uses lr / (1 + lr_decay·e) (default 0 synthetic, 1 breast_cancer).
    #[arg(long)]
    pub lr_decay: Option<f64>,
    /// L2 regularisation λ (default 0 synthetic, 0.03 breast_cancer;
    /// scikit-learn gets C = 1/(λ·n_train) on the same columns).
    #[arg(long)]
    pub l2: Option<f64>,
    #[arg(long, default_value_t = 2000)]
    pub samples: usize,
    /// SHAPER Table 6's shape: one epoch at 2·10^5 … 10^6 samples,
    /// 30,000 + 70,000 features, density 0.02 % (--samples, --features and
    /// --density are ignored). Each cell is extrapolated from one measured
    /// epoch of --measure-batches batches (cost per epoch is linear in the
    /// number of batches) and labelled so.
    #[arg(long)]
    pub table: bool,
    /// Batches in the measured epoch of --table.
    #[arg(long, default_value_t = 2)]
    pub measure_batches: usize,
    /// Features of the labels party and of the features party: A,B.
    #[arg(long, default_value = "30,70")]
    pub features: String,
    /// Fraction of non-zero entries.
    #[arg(long, default_value_t = 0.02)]
    pub density: f64,
    /// Epochs (default 1 synthetic, 20 breast_cancer).
    #[arg(long)]
    pub epochs: Option<u32>,
    /// Batch size (default 256 synthetic, 32 breast_cancer).
    #[arg(long)]
    pub batch: Option<u32>,
    #[arg(long, default_value_t = 2048)]
    pub bits: u32,
    #[arg(long, default_value = "cubic")]
    pub sigmoid: String,
    /// As `hush train --low-bandwidth`.
    #[arg(long)]
    pub low_bandwidth: bool,
    /// mem (in-process channel) or tcp (loopback, TLS).
    #[arg(long, default_value = "tcp")]
    pub transport: String,
    /// Emulated network between the two parties: none, lan, wan, mobile,
    /// or shaper (SHAPER's and CAESAR's evaluation network: 40 Mbps per
    /// direction, 40 ms one-way). Compute and communication overlap as
    /// they would on that link; `--table` then measures its epoch there.
    #[arg(long, default_value = "none")]
    pub net: String,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    #[arg(long)]
    pub json: bool,
}

impl From<BenchLrArgs> for BenchLrOptions {
    fn from(a: BenchLrArgs) -> Self {
        BenchLrOptions { dataset: a.dataset, test_fraction: a.test_fraction, lr: a.lr, lr_decay: a.lr_decay, l2: a.l2, samples: a.samples, table: a.table, measure_batches: a.measure_batches, features: a.features, density: a.density, epochs: a.epochs, batch: a.batch, bits: a.bits, sigmoid: a.sigmoid, low_bandwidth: a.low_bandwidth, transport: a.transport, net: a.net, seed: a.seed, json: a.json }
    }
}

