//! One party of an ECDH-PSI over TCP (+ TLS with pinned identities): the
//! function behind the `hush psi` command (in `hush-cli`) and `hush.psi`.

use crate::{run, Error, PsiConfig, PsiOutput, Result, Role};
use hush_transport::{Channel, Cost, LinkConfig, TcpChannel};
use std::time::Instant;

/// Opens the link to the peer: listen (prints the fingerprint and the
/// address) or connect ([`hush_transport::peering::connect_party`]).
pub fn connect(listen: Option<&str>, peer: Option<&str>, link: &LinkConfig) -> Result<TcpChannel> {
    hush_transport::peering::connect_party(listen, peer, link, Error::Input)
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
