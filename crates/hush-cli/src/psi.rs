//! `hush psi`: the flags and output of one party of an ECDH-PSI over TCP
//! (+ TLS with pinned identities), from a CSV file to the party's aligned
//! CSV file. The protocol and the party function are in `hush-psi`.

use hush_psi::csv::{write_atomic, Table};
use hush_psi::{psi_party, Error, Output, PsiConfig, Result, Role};
use hush_transport::{LinkConfig, LinkFlags};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct PsiArgs {
    /// sender or receiver (the two parties take different roles; both learn
    /// the same output).
    #[arg(long)]
    pub role: String,
    /// This party's CSV file (header line first).
    #[arg(long)]
    pub ids: PathBuf,
    /// The column holding the IDs (unique per file; compared as exact
    /// strings after trimming surrounding spaces).
    #[arg(long)]
    pub id_column: String,
    /// Where to write this party's rows of the intersection (CSV, its
    /// header then its rows, in the order both parties' outputs share;
    /// written atomically).
    #[arg(long, required_unless_present = "size_only")]
    pub out: Option<PathBuf>,
    /// Learn only the intersection's size (both parties must agree).
    #[arg(long, conflicts_with = "out")]
    pub size_only: bool,
    /// Listen at this address (prints `fingerprint sha256:<hex>`) ...
    #[arg(long, conflicts_with = "peer")]
    pub listen: Option<String>,
    /// ... or connect to the peer at this address (needs --pin sha256:HEX).
    #[arg(long, alias = "connect")]
    pub peer: Option<String>,
    /// Largest peer set accepted (checked before allocating; 32 bytes per ID).
    #[arg(long, default_value_t = hush_psi::DEFAULT_MAX_PEER_IDS)]
    pub max_peer_ids: usize,
    /// Print one JSON record on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkFlags,
}

pub fn psi_main(a: PsiArgs) -> Result<()> {
    let role = Role::parse(&a.role)?;
    let name = a.ids.display().to_string();
    let t_load = Instant::now();
    let table = Table::load(&a.ids)?;
    let ids = table.ids(&a.id_column, &name)?;
    let load_s = t_load.elapsed().as_secs_f64();
    let cfg = PsiConfig { output: if a.size_only { Output::SizeOnly } else { Output::Aligned }, max_peer_ids: a.max_peer_ids, ..Default::default() };
    let link = LinkConfig::from_flags(&a.link).map_err(Error::Transport)?;
    let r = psi_party(&ids, role, &cfg, a.listen.as_deref(), a.peer.as_deref(), &link)?;
    if let (Some(out), Some(rows)) = (&a.out, &r.out.rows) {
        write_atomic(out, table.select(rows).as_bytes())?;
    }
    let o = &r.out;
    if a.json {
        let rec = serde_json::json!({
            "bench": "psi",
            "protocol": "ecdh-ristretto255",
            "role": role.name(),
            "output": cfg.output.name(),
            "own_ids": o.own_size,
            "peer_ids": o.peer_size,
            "intersection": o.intersection,
            "wall_s": r.wall_s,
            "load_s": load_s,
            "bytes_sent": r.cost.bytes_sent,
            "bytes_recv": r.cost.bytes_recv,
            "socket_bytes": r.cost.socket_bytes_sent + r.cost.socket_bytes_recv,
            "rounds": r.cost.rounds,
            "threads": rayon::current_num_threads(),
            "tls": link.is_tls(),
        });
        println!("{rec}");
    }
    eprintln!(
        "PSI ({}): {} own IDs, {} peer IDs, intersection {}; {:.2} s, {} bytes sent, {} received, {} rounds{}",
        role.name(),
        o.own_size,
        o.peer_size,
        o.intersection,
        r.wall_s,
        r.cost.bytes_sent,
        r.cost.bytes_recv,
        r.cost.rounds,
        a.out.as_ref().map(|p| format!("; aligned rows written to {}", p.display())).unwrap_or_default()
    );
    if a.size_only {
        println!("intersection {}", o.intersection);
    }
    Ok(())
}
