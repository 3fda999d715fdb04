//! Fault injection (see `hush_transport::faulty`): IKNP, Ferret and
//! SilentFlow, built through the registry, set up and produce one batch of
//! COTs while one message of the run is dropped, duplicated, reordered,
//! truncated, delayed, corrupted above or below the frame checksum, or the
//! link is closed. Invariant: both parties end within the watchdog, with
//! the COT relation holding or an error; never a panic or a hang; a
//! truncation, a close, a delay or a wire corruption never yields a wrong
//! output. `HUSH_FAULT_SCHEDULES` sets the number of schedules (default 50;
//! `scripts/faults.sh` runs 1,000).

use hush_correlations::lpn::TEST_INSECURE;
use hush_correlations::registry::{setup_receiver, setup_sender, SourceConfig, TeeBackend};
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::faulty::{campaign_pair, schedules_from_env, Mix};
use hush_transport::Channel;
use std::time::Duration;

const N: usize = 3000;

fn cfg(name: &str) -> SourceConfig {
    let mut c = SourceConfig::named(name);
    c.tee = TeeBackend::InProcess;
    c.params = Some(TEST_INSECURE);
    c
}

fn campaign(name: &'static str, seed0: u64) {
    let n = schedules_from_env(50);
    let sender = move |ch: &mut dyn Channel| -> Result<(Block, Vec<Block>), String> {
        let mut rng = Prg::new(Block(1));
        let mut s = setup_sender(&cfg(name), ch, &mut rng).map_err(|e| e.to_string())?;
        let mut q = vec![Block::ZERO; N];
        s.send_cots(ch, &mut q).map_err(|e| e.to_string())?;
        Ok((s.delta(), q))
    };
    let receiver = move |ch: &mut dyn Channel| -> Result<(BitVec, Vec<Block>), String> {
        let mut rng = Prg::new(Block(2));
        let mut r = setup_receiver(&cfg(name), ch, &mut rng).map_err(|e| e.to_string())?;
        let mut b = BitVec::zeros(0);
        let mut t = vec![Block::ZERO; N];
        r.recv_cots(ch, &mut b, &mut t).map_err(|e| e.to_string())?;
        Ok((b, t))
    };
    let tally = campaign_pair(
        n,
        seed0,
        &Mix::default(),
        Duration::from_secs(1),
        Duration::from_secs(20),
        sender,
        receiver,
        |a, b| {
            let ((delta, q), (bits, t)) = (a?, b?);
            if bits.len() != N || t.len() != N {
                return Some(false);
            }
            Some((0..N).all(|i| t[i] == q[i] ^ delta.and_bit(bits.get(i))))
        },
    );
    eprint!("{}", tally.report(name));
    assert!(tally.violations.is_empty(), "{}", tally.report(name));
}

#[test]
fn faults_iknp() {
    campaign("iknp", 1_000);
}

#[test]
fn faults_ferret() {
    campaign("ferret", 2_000);
}

#[test]
fn faults_silentflow() {
    campaign("silent", 3_000);
}
