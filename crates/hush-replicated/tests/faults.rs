//! Fault injection (see `hush_transport::faulty`) for the three-party
//! engine (Araki et al.): three parties on a ring of in-memory channels set
//! up their PRF keys and evaluate AES-128 (Bristol) on 64 bit-sliced
//! instances while one message on one of the six channel endpoints is
//! dropped, duplicated, reordered, truncated, delayed, corrupted above or
//! below the frame checksum, or the link is closed. Invariant: all three
//! parties end within the watchdog with the reconstructed outputs equal to
//! the plaintext AES or an error; never a panic or a hang; a truncation,
//! close, delay or wire corruption never yields a wrong output.
//! `HUSH_FAULT_SCHEDULES` sets the number of schedules (default 50).

use hush_replicated::araki::PartyKeys;
use hush_replicated::prf::Prg;
use hush_replicated::share::{reconstruct, share};
use hush_replicated::{Circuit, Evaluator, Program};
use hush_transport::faulty::{judge, schedules_from_env, spawn_guarded, Ended, FaultKind, FaultyChannel, Mix, Schedule, SplitMix, Tally, Verdict};
use hush_transport::{Channel, ChannelOptions, MemChannel};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORDS: usize = 1;

type PartyOut = (Result<Vec<u64>, String>, [Vec<FaultKind>; 2], [(u64, u64); 2]);

/// One run; `scheds[i] = (to_next, from_prev)` schedules of party i.
fn run(prog: &Arc<Program>, inputs: &Arc<[Vec<u64>; 3]>, scheds: [(Schedule, Schedule); 3], timeout: Duration) -> Vec<Ended<PartyOut>> {
    let opts = ChannelOptions { timeout, ..Default::default() };
    let (n0, p1) = MemChannel::pair_with(opts.clone());
    let (n1, p2) = MemChannel::pair_with(opts.clone());
    let (n2, p0) = MemChannel::pair_with(opts);
    let ends = [(n0, p0), (n1, p1), (n2, p2)];
    let deadline = Instant::now() + Duration::from_secs(30);
    let guards: Vec<_> = ends
        .into_iter()
        .zip(scheds)
        .enumerate()
        .map(|(i, ((tn, fp), (sn, sp)))| {
            let (prog, inputs) = (prog.clone(), inputs.clone());
            spawn_guarded(move || -> PartyOut {
                let mut to_next = FaultyChannel::new(tn, sn);
                let mut from_prev = FaultyChannel::new(fp, sp);
                let r = (|| -> Result<Vec<u64>, hush_replicated::Error> {
                    let keys = PartyKeys::setup(i, [i as u8 + 1; 16], &mut to_next, &mut from_prev)?;
                    let mut ev = Evaluator::new(&prog, WORDS)?;
                    let mut out = vec![0u64; prog.n_out * WORDS];
                    ev.eval_chunk(&keys, 7, 0, &inputs[i], &mut out, &mut to_next, &mut from_prev)?;
                    Ok(out)
                })()
                .map_err(|e| e.to_string());
                let kinds = |c: &FaultyChannel<MemChannel>| c.applied().iter().map(|a| a.fault.kind).collect::<Vec<_>>();
                let counts = |c: &FaultyChannel<MemChannel>| {
                    let k = c.inner().map(|x| x.cost()).unwrap_or_default();
                    (k.msgs_sent, k.msgs_recv)
                };
                let (kn, kp) = (kinds(&to_next), kinds(&from_prev));
                let (cn, cp) = (counts(&to_next), counts(&from_prev));
                (r, [kn, kp], [cn, cp])
            })
        })
        .collect();
    guards.into_iter().map(|g| g.wait(deadline)).collect()
}

#[test]
fn faults_3pc_aes() {
    let c = Circuit::builtin("aes128").unwrap();
    let prog = Arc::new(Program::compile(&c));
    // 64 instances: instance j uses key byte 0 = j, plaintext byte 15 = 255 - j
    let mut bits_in = vec![0u64; prog.n_in * WORDS];
    let mut keys_pts = Vec::new();
    for j in 0..64usize {
        let key = format!("{:02x}0102030405060708090a0b0c0d0e0f", j);
        let pt = format!("00112233445566778899aabbccddee{:02x}", 255 - j);
        let b = c.inputs_from_hex(&[key.clone(), pt.clone()]).unwrap();
        for (w, &bit) in b.iter().enumerate() {
            bits_in[w] |= (bit as u64) << j;
        }
        keys_pts.push((key, pt));
    }
    // plaintext reference: the FIPS-197 vector checks the circuit itself
    let fips = hush_replicated::local::run_hex(
        &c,
        &["000102030405060708090a0b0c0d0e0f".into(), "00112233445566778899aabbccddeeff".into()],
    )
    .unwrap();
    assert_eq!(fips[0], "69c4e0d86a7b0430d8cdb78070b4c55a");
    let want: Vec<u64> = {
        let mut v = vec![0u64; prog.n_out * WORDS];
        for (j, (k, p)) in keys_pts.iter().enumerate() {
            let out = hush_replicated::local::run_hex(&c, &[k.clone(), p.clone()]).unwrap();
            let ob = c.inputs_from_hex(&[out[0].clone(), "00".repeat(16)]).unwrap();
            for w in 0..prog.n_out {
                v[w] |= (ob[w] as u64) << j;
            }
        }
        v
    };
    // share the inputs (x, a pairs per wire)
    let mut rng = Prg::from_seed([42; 16]);
    let mut party_in: [Vec<u64>; 3] = std::array::from_fn(|_| vec![0u64; prog.n_in * 2 * WORDS]);
    for w in 0..prog.n_in {
        let s = share(&bits_in[w * WORDS..][..WORDS], &mut rng);
        for i in 0..3 {
            party_in[i][w * 2 * WORDS..][..WORDS].copy_from_slice(&s[i].0);
            party_in[i][w * 2 * WORDS + WORDS..][..WORDS].copy_from_slice(&s[i].1);
        }
    }
    let inputs = Arc::new(party_in);
    let timeout = Duration::from_secs(1);
    let check = |outs: Vec<Option<Vec<u64>>>| -> Option<bool> {
        if outs.iter().any(|o| o.is_none()) {
            return None;
        }
        let o: Vec<Vec<u64>> = outs.into_iter().map(|o| o.unwrap()).collect();
        if o.iter().any(|v| v.len() != want.len()) {
            return Some(false);
        }
        Some(reconstruct([&o[0], &o[1], &o[2]]) == want)
    };
    let none = || std::array::from_fn::<_, 3, _>(|_| (Schedule::none(), Schedule::none()));
    // fault-free run: correct, and the message counts per endpoint
    let ends = run(&prog, &inputs, none(), timeout);
    let mut counts = [[(0u64, 0u64); 2]; 3];
    let mut outs = Vec::new();
    for (i, e) in ends.into_iter().enumerate() {
        let Ended::Returned((r, _, c)) = e else { panic!("fault-free run: party {i} did not return") };
        counts[i] = c;
        outs.push(Some(r.expect("fault-free run")));
    }
    assert_eq!(check(outs), Some(true), "fault-free run");
    let mix = Mix::default();
    let mut tally = Tally::default();
    let seed0 = 30_000u64;
    for s in 0..schedules_from_env(50) {
        let seed = seed0 + s;
        let mut rng = SplitMix(seed);
        let p = rng.below(3) as usize;
        let side = rng.below(2) as usize;
        let (sent, recv) = counts[p][side];
        let sched = Schedule::random_one(&mut rng, sent, recv, &mix);
        let scheduled: Vec<FaultKind> = sched.faults.iter().map(|f| f.kind).collect();
        let mut sc = none();
        if side == 0 {
            sc[p].0 = sched;
        } else {
            sc[p].1 = sched;
        }
        let ends = run(&prog, &inputs, sc, timeout);
        let mut applied = Vec::new();
        let ends: Vec<Ended<Result<Vec<u64>, String>>> = ends
            .into_iter()
            .map(|e| match e {
                Ended::Returned((r, k, _)) => {
                    applied.extend(k[0].iter().chain(&k[1]).copied());
                    Ended::Returned(r)
                }
                Ended::Panicked(m) => Ended::Panicked(m),
                Ended::Hung => Ended::Hung,
            })
            .collect();
        if applied.is_empty() {
            applied = scheduled.clone();
        }
        let v = match judge(ends, &applied, check) {
            Verdict::Violation(m) => Verdict::Violation(format!("{m}; party {p} side {side} schedule {scheduled:?}")),
            v => v,
        };
        let names: Vec<&'static str> = scheduled.iter().map(|k| k.name()).collect();
        tally.add(seed, &names, &v);
    }
    eprint!("{}", tally.report("3pc-aes128"));
    assert!(tally.violations.is_empty(), "{}", tally.report("3pc-aes128"));
}
