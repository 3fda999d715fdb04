//! One party of a vertical LR training or prediction over TCP (+ TLS with
//! pinned identities): what `hush train` / `hush predict` (in `hush-cli`)
//! and `hush.train_vertical` run.

use crate::data::Dataset;
use crate::secure::{reveal, save_model, Report, Role, Session};
use crate::{Error, Result, TrainConfig};
use hush_transport::{Channel, LinkConfig, LinkFlags, TcpChannel};
use std::path::PathBuf;
use std::time::Instant;

/// Opens the link to the peer: listen (prints the fingerprint and the
/// address) or connect ([`hush_transport::peering::connect_party`]).
pub fn connect(listen: Option<&str>, peer: Option<&str>, link: &LinkConfig) -> Result<TcpChannel> {
    hush_transport::peering::connect_party(listen, peer, link, Error::Config)
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

/// What one party's [`train_party`] ends with.
pub struct PartyOutcome {
    pub shares: crate::secure::ModelShares,
    /// The opened model, if both parties chose to reveal.
    pub opened: Option<crate::secure::Opened>,
    pub report: Report,
    pub bytes: u64,
    pub rounds: u32,
    /// The PSI that aligned the rows (with `ids`).
    pub psi: Option<PsiReport>,
}

/// What the PSI before a training did.
#[derive(Clone, Debug)]
pub struct PsiReport {
    pub own_size: usize,
    pub peer_size: usize,
    pub intersection: usize,
    /// This party's rows, in the order trained on.
    pub rows: Vec<usize>,
    pub wall_s: f64,
    pub bytes: u64,
}

/// One party of a training over TCP (the `hush train` command and
/// `hush.train_vertical`): checks the inputs, connects, trains, reveals
/// if `cfg.reveal` (both parties must agree; checked in the handshake),
/// and writes the model file atomically to `out` if given.
#[allow(clippy::too_many_arguments)]
pub fn train_party(
    ds: Dataset,
    has_labels: bool,
    role: Role,
    cfg: &TrainConfig,
    intercept: bool,
    listen: Option<&str>,
    peer: Option<&str>,
    link: &LinkConfig,
    out: Option<&std::path::Path>,
) -> Result<PartyOutcome> {
    train_party_ids(ds, None, has_labels, role, cfg, intercept, listen, peer, link, out)
}

/// [`train_party`] on rows that are not aligned: with `ids` (one per row,
/// unique), an ECDH-PSI ([`hush_psi`]) over the same link first keeps the
/// rows whose IDs both parties hold, in the order both outputs share (the
/// labels party is the PSI's receiver). Without `ids` the rows must
/// already be aligned.
#[allow(clippy::too_many_arguments)]
pub fn train_party_ids(
    mut ds: Dataset,
    ids: Option<&[String]>,
    has_labels: bool,
    role: Role,
    cfg: &TrainConfig,
    intercept: bool,
    listen: Option<&str>,
    peer: Option<&str>,
    link: &LinkConfig,
    out: Option<&std::path::Path>,
) -> Result<PartyOutcome> {
    if let Some(ids) = ids {
        if ids.len() != ds.len() {
            return Err(Error::Config(format!("{} IDs for {} rows", ids.len(), ds.len())));
        }
        hush_psi::check_distinct(ids)?;
    }
    if cfg.key_bits != 2048 && cfg.key_bits != 3072 {
        return Err(Error::Config(format!("--bits {} (2048 or 3072)", cfg.key_bits)));
    }
    if cfg.epochs == 0 || cfg.batch == 0 || !cfg.lr.is_finite() || !cfg.l2.is_finite() || !cfg.lr_decay.is_finite() || cfg.l2 < 0.0 || cfg.lr_decay < 0.0 {
        return Err(Error::Config("epochs and batch must be positive; lr, l2 and lr-decay finite, l2 and lr-decay not negative".into()));
    }
    if role == Role::Labels && !has_labels {
        return Err(Error::Config("the labels party needs labels (give --labels FILE with .npz data)".into()));
    }
    // aligned rows: the data is checked and quantised before connecting
    let aligned_x = match ids {
        None => {
            if role == Role::Labels && intercept {
                ds = with_intercept(&ds);
            }
            Some(ds.to_fixed()?)
        }
        Some(_) => None,
    };
    let mut ch = connect(listen, peer, link)?;
    let t0 = Instant::now();
    let psi = match ids {
        Some(ids) => {
            let c0 = ch.cost();
            let psi_role = if role == Role::Labels { hush_psi::Role::Receiver } else { hush_psi::Role::Sender };
            let o = hush_psi::run(&mut ch, psi_role, ids, &hush_psi::PsiConfig::default(), &mut rand::rngs::OsRng).map_err(|e| match e {
                hush_psi::Error::Handshake(m) => Error::Config(format!("{m} (with --ids-column, both parties must pass --ids-column)")),
                e => Error::Psi(e),
            })?;
            let rows = o.rows.ok_or_else(|| Error::Config("the PSI returned no rows (aligned output expected)".into()))?;
            if rows.is_empty() {
                return Err(Error::Data(format!(
                    "the PSI found no ID shared by both parties ({} own rows, {} at the peer): nothing to train on",
                    o.own_size, o.peer_size
                )));
            }
            ds = ds.subset(&rows);
            let c = ch.cost() - c0;
            Some(PsiReport { own_size: o.own_size, peer_size: o.peer_size, intersection: o.intersection, rows, wall_s: t0.elapsed().as_secs_f64(), bytes: c.bytes_sent + c.bytes_recv })
        }
        None => None,
    };
    let x = match aligned_x {
        Some(x) => x,
        None => {
            if role == Role::Labels && intercept {
                ds = with_intercept(&ds);
            }
            ds.to_fixed()?
        }
    };
    let mut rep = Report::default();
    let mut s = Session::start(&mut ch, role, ds.len(), ds.cols, cfg)?;
    rep.setup_s = s.setup_s;
    let labels = (role == Role::Labels).then_some(ds.labels.as_slice());
    let mut m = s.train(&x, labels, &mut rep)?;
    m.intercept = role == Role::Labels && intercept;
    let opened = if cfg.reveal { Some(reveal(&mut ch, &m)?) } else { None };
    if let Some(out) = out {
        save_model(out, &m, opened.as_ref())?;
    }
    rep.wall_s = t0.elapsed().as_secs_f64();
    let c = ch.cost();
    Ok(PartyOutcome { shares: m, opened, report: rep, bytes: c.bytes_sent + c.bytes_recv, rounds: c.rounds, psi })
}

/// The settings of [`predict`] (the flags of `hush predict`, parsed in `hush-cli`).
#[derive(Debug, Clone)]
pub struct PredictOptions {
    /// This party's model file from `hush train` (its role is read from it).
    pub model: PathBuf,
    /// Rows to score: this party's columns (libsvm or .npz), samples aligned
    /// by row with the peer's file. Without --listen/--peer: whole rows
    /// (the labels party's columns, then the features party's) scored
    /// locally with the revealed model.
    pub data: PathBuf,
    /// Labels for a .npz --data (only used to report accuracy).
    pub labels: Option<PathBuf>,
    /// Listen at this address (prints `fingerprint sha256:<hex>`) ...
    pub listen: Option<String>,
    /// ... or connect to the peer at this address (needs --pin sha256:HEX).
    pub peer: Option<String>,
    /// Where the labels party (or a local run) writes the scores: CSV with
    /// a header `score,probability,prediction` (z = θ·x, σ(z), 1 if z > 0 else 0),
    /// one line per row, written atomically.
    pub out: Option<PathBuf>,
    /// Paillier modulus bits of this session: 2048 or 3072 (both agree).
    pub bits: u32,
    pub link: LinkFlags,
}

fn scores_csv(z: &[f64]) -> String {
    let mut s = String::from("score,probability,prediction\n");
    for &z in z {
        s.push_str(&format!("{z},{},{}\n", 1.0 / (1.0 + (-z).exp()), u8::from(z > 0.0)));
    }
    s
}

fn acc_note(has: bool, z: &[f64], labels: &[f64]) -> String {
    if has {
        format!(" (accuracy against the data's labels {:.4})", accuracy_of(z, labels))
    } else {
        String::new()
    }
}

fn accuracy_of(z: &[f64], labels: &[f64]) -> f64 {
    z.iter().zip(labels).filter(|(z, y)| (**z > 0.0) == (**y > 0.5)).count() as f64 / z.len().max(1) as f64
}

/// Pads a data set's column count up to `want` (trailing all-zero columns
/// are invisible in libsvm) or refuses more columns than the model has.
fn fit_columns(mut ds: Dataset, want: usize, what: &str) -> Result<Dataset> {
    if ds.cols > want {
        return Err(Error::Data(format!("{what} has {} columns but the model has weights for {want}", ds.cols)));
    }
    ds.cols = want;
    Ok(ds)
}

/// `hush predict`: with the peer (shared model; the labels party gets the
/// scores, the features party learns nothing), or locally from a revealed
/// model.
pub fn predict(a: PredictOptions) -> Result<()> {
    let m = crate::secure::load_model(&a.model)?;
    let (ds, has_labels) = crate::data::load_with_labels(&a.data, a.labels.as_deref())?;
    if a.listen.is_none() && a.peer.is_none() {
        let op = crate::secure::load_opened(&a.model)?.ok_or_else(|| {
            Error::Config(format!(
                "{} holds model shares only (both parties must train with --reveal to score alone): give --listen or --peer to score with the peer",
                a.model.display()
            ))
        })?;
        let d_l = op.labels.len() - usize::from(op.intercept);
        let ds = fit_columns(ds, d_l + op.features.len(), "--data")?;
        let (l, f) = (ds.columns(0, d_l), ds.columns(d_l, ds.cols));
        let l = if op.intercept { with_intercept(&l) } else { l };
        let mut w = op.labels.clone();
        w.extend(&op.features);
        let j = l.hjoin(&f);
        let z: Vec<f64> = j.rows.iter().map(|r| r.iter().map(|&(c, v)| w[c] * v).sum()).collect();
        let out = a.out.as_ref().ok_or_else(|| Error::Config("--out FILE is needed to write the scores".into()))?;
        crate::secure::write_atomic(out, scores_csv(&z).as_bytes())?;
        eprintln!("scored {} rows with the revealed model{}; written to {}", z.len(), acc_note(has_labels, &z, &ds.labels), out.display());
        return Ok(());
    }
    if a.bits != 2048 && a.bits != 3072 {
        return Err(Error::Config(format!("--bits {} (2048 or 3072)", a.bits)));
    }
    if m.role == Role::Labels && a.out.is_none() {
        return Err(Error::Config("the labels party receives the scores: give --out FILE".into()));
    }
    let width = m.own.len() - usize::from(m.intercept);
    let ds = fit_columns(ds, width, "--data")?;
    let ds = if m.intercept { with_intercept(&ds) } else { ds };
    let x = ds.to_fixed()?;
    let mut ch = connect(a.listen.as_deref(), a.peer.as_deref(), &LinkConfig::from_flags(&a.link)?)?;
    let cfg = TrainConfig { key_bits: a.bits, ..TrainConfig::default() };
    let mut s = Session::start(&mut ch, m.role, ds.len(), m.own.len(), &cfg)?;
    if s.peer_features() != m.peer.len() {
        return Err(Error::Peer(format!(
            "the peer's model covers {} features but {} holds shares for {} (model files from different trainings?)",
            s.peer_features(),
            a.model.display(),
            m.peer.len()
        )));
    }
    let z = s.predict(&x, &m)?;
    match (z, &a.out) {
        (Some(z), Some(out)) => {
            crate::secure::write_atomic(out, scores_csv(&z).as_bytes())?;
            eprintln!("scored {} rows with the shared model{}; written to {}", z.len(), acc_note(has_labels, &z, &ds.labels), out.display());
        }
        _ => eprintln!("scored {} rows with the shared model; the scores went to the labels party", ds.len()),
    }
    Ok(())
}

