//! `hush psi`: one party of an ECDH-PSI over TCP (+ TLS with pinned
//! identities), from a CSV file to the party's aligned CSV file.

use crate::csv::{write_atomic, Table};
use crate::{run, Error, Output, PsiConfig, PsiOutput, Result, Role};
use hush_transport::{Channel, ChannelOptions, Cost, LinkConfig, LinkFlags, TcpChannel};
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
    #[arg(long, default_value_t = crate::DEFAULT_MAX_PEER_IDS)]
    pub max_peer_ids: usize,
    /// Print one JSON record on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub link: LinkFlags,
}

/// Opens the link to the peer: listen (prints the fingerprint and the
/// address) or connect.
pub fn connect(listen: Option<&str>, peer: Option<&str>, link: &LinkConfig) -> Result<TcpChannel> {
    let opts = link.channel_options(ChannelOptions::default());
    Ok(match (listen, peer) {
        (Some(addr), None) => {
            let l = std::net::TcpListener::bind(addr).map_err(|e| Error::Input(format!("cannot listen at {addr}: {e}")))?;
            println!("{}", link.banner());
            println!("listening {}", l.local_addr()?);
            TcpChannel::accept_with(&l, opts, &link.accept_clients())?
        }
        (None, Some(addr)) => {
            if !link.is_tls() {
                eprintln!("{}", hush_transport::INSECURE_WARNING);
            }
            TcpChannel::connect_with(addr, opts, &link.to_peer(addr)?)?
        }
        _ => return Err(Error::Input("give exactly one of --listen ADDR or --peer ADDR".into())),
    })
}

/// One party's PSI over a fresh TCP link: the output, the channel's cost
/// and the protocol's wall time (connection setup excluded).
pub struct PartyPsi {
    pub out: PsiOutput,
    pub cost: Cost,
    pub wall_s: f64,
}

/// Runs one party over TCP (the `hush psi` command and `hush.psi`).
pub fn psi_party<T: AsRef<[u8]> + Sync>(
    ids: &[T],
    role: Role,
    cfg: &PsiConfig,
    listen: Option<&str>,
    peer: Option<&str>,
    link: &LinkConfig,
) -> Result<PartyPsi> {
    crate::check_distinct(ids)?;
    let mut ch = connect(listen, peer, link)?;
    let c0 = ch.cost();
    let t0 = Instant::now();
    let out = run(&mut ch, role, ids, cfg, &mut rand::rngs::OsRng)?;
    Ok(PartyPsi { out, cost: ch.cost() - c0, wall_s: t0.elapsed().as_secs_f64() })
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
