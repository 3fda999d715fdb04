//! Fuzz targets: one per decoder of untrusted bytes. Shared by the
//! coverage-guided fuzzer (`fuzz/`, cargo-afl; `scripts/fuzz.sh`) and the
//! corpus regression tests (`crates/hush-cli/tests/corpus.rs`, which include
//! this file). Every target must return normally on any input: a panic is a
//! crash, and so is running for seconds.
//!
//! Peer targets (`peer_*`) run one honest party against a scripted peer
//! whose messages are the input, split as `[u16 LE length][bytes]...`;
//! whatever the honest party sends is discarded, and when the script is
//! exhausted the peer "disconnects". The first input byte picks the
//! honest party's role where a protocol has two.

#![allow(dead_code)]

use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, Cost, MemChannel};
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::Duration;

/// Every target's name.
pub const TARGETS: &[&str] = &[
    "frame",
    "npy",
    "hushm",
    "onnx",
    "architecture",
    "bristol",
    "module_request",
    "module_messages",
    "fss_keys",
    "attest_evidence",
    "attest_cert_table",
    "attest_policy",
    "peer_iknp",
    "peer_ferret",
    "peer_silent",
    "peer_cf2",
    "peer_tami",
    "peer_fss",
    "peer_inference_client",
    "peer_inference_server",
    "peer_3pc",
];

/// Runs target `name` on `data`. Unknown names panic (a harness error).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "frame" => frame(data),
        "npy" => {
            let _ = hush_inference::npy::parse(data);
        }
        "hushm" => hushm(data),
        "onnx" => {
            // the importer, then the loader (and a small reference run) on what it writes
            if let Ok(b) = hush_onnx::convert(data) {
                hushm(&b);
            }
            // and the encoder importer of `hush embed` on the same bytes
            let _ = hush_onnx::encoder::encoder_from_onnx(data);
        }
        "architecture" => {
            if let Ok(s) = std::str::from_utf8(data) {
                if let Ok(m) = hush_inference::Model::from_architecture(s) {
                    let _ = hush_inference::Plan::new(&m, hush_inference::FixedConfig::default());
                }
            }
        }
        "bristol" => bristol(data),
        "module_request" => module_request(data),
        "module_messages" => module_messages(data),
        "fss_keys" => fss_keys(data),
        "attest_evidence" => attest_evidence(data),
        "attest_cert_table" => {
            let _ = hush_attest::evidence::parse_cert_table(data);
        }
        "attest_policy" => {
            if let Ok(s) = std::str::from_utf8(data) {
                let _ = hush_attest::Policy::from_toml(s);
            }
        }
        "peer_iknp" => peer_cot("iknp", data),
        "peer_ferret" => peer_cot("ferret", data),
        "peer_silent" => peer_cot("silent", data),
        "peer_cf2" => peer_nonlinear(hush_2pc::nonlinear::Proto::Cf2, data),
        "peer_tami" => peer_nonlinear(hush_2pc::nonlinear::Proto::Tami, data),
        "peer_fss" => peer_nonlinear(hush_2pc::nonlinear::Proto::Fss, data),
        "peer_inference_client" => peer_inference(false, data),
        "peer_inference_server" => peer_inference(true, data),
        "peer_3pc" => peer_3pc(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

/// A peer that plays back scripted messages and swallows what it is sent.
pub struct Scripted {
    msgs: VecDeque<Vec<u8>>,
    cost: Cost,
}

impl Scripted {
    pub fn new(data: &[u8]) -> Self {
        Scripted { msgs: split(data).into(), cost: Cost::default() }
    }
}

/// Splits `[u16 LE len][bytes]...` (a short last record takes the rest).
pub fn split(mut d: &[u8]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while d.len() >= 2 {
        let n = u16::from_le_bytes([d[0], d[1]]) as usize;
        d = &d[2..];
        let n = n.min(d.len());
        v.push(d[..n].to_vec());
        d = &d[n..];
    }
    v
}

/// The inverse of [`split`] (seed corpora from recorded transcripts).
pub fn join(msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        let n = m.len().min(u16::MAX as usize);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(&m[..n]);
    }
    out
}

impl Channel for Scripted {
    fn send(&mut self, p: &[u8]) -> hush_transport::Result<()> {
        if p.len() > self.max_frame() {
            return Err(hush_transport::Error::Oversized { len: p.len(), max: self.max_frame() });
        }
        self.cost.bytes_sent += p.len() as u64;
        self.cost.msgs_sent += 1;
        Ok(())
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        let m = self.msgs.pop_front().ok_or(hush_transport::Error::Disconnected)?;
        self.cost.bytes_recv += m.len() as u64;
        self.cost.msgs_recv += 1;
        Ok(m)
    }
    fn cost(&self) -> Cost {
        self.cost
    }
    fn max_frame(&self) -> usize {
        hush_transport::DEFAULT_MAX_FRAME
    }
    fn set_timeout(&mut self, _: Duration) {}
}

/// A borrowed channel as an owned one.
pub struct Borrowed<'a>(pub &'a mut dyn Channel);

impl Channel for Borrowed<'_> {
    fn send(&mut self, p: &[u8]) -> hush_transport::Result<()> {
        self.0.send(p)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        self.0.recv()
    }
    fn cost(&self) -> Cost {
        self.0.cost()
    }
    fn max_frame(&self) -> usize {
        self.0.max_frame()
    }
    fn set_timeout(&mut self, t: Duration) {
        self.0.set_timeout(t)
    }
}

/// A channel that records what it receives (seed corpora).
pub struct Recorder<C: Channel> {
    pub inner: C,
    pub got: Vec<Vec<u8>>,
}

impl<C: Channel> Channel for Recorder<C> {
    fn send(&mut self, p: &[u8]) -> hush_transport::Result<()> {
        self.inner.send(p)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        let m = self.inner.recv()?;
        self.got.push(m.clone());
        Ok(m)
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, t: Duration) {
        self.inner.set_timeout(t)
    }
}

fn frame(data: &[u8]) {
    let _ = hush_transport::decode_header(data, 1 << 16);
    let (mut a, mut b) = MemChannel::pair();
    let _ = a.send_raw(data.to_vec());
    b.set_timeout(Duration::from_millis(1));
    let _ = b.recv();
    let _ = b.recv();
}

fn hushm(data: &[u8]) {
    if let Ok(m) = hush_inference::Model::from_bytes(data) {
        if let Ok(plan) = hush_inference::Plan::new(&m, hush_inference::FixedConfig::default()) {
            // the reference run on a zero input, for models of modest size
            if plan.input_len <= 1 << 12 && data.len() <= 1 << 16 {
                let _ = hush_inference::reference::run(&plan, &vec![0u64; plan.input_len]);
            }
        }
    }
}

fn bristol(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(c) = hush_replicated::Circuit::parse("fuzz", s) {
            let p = hush_replicated::Program::compile(&c);
            if p.n_in <= 1 << 12 {
                let input = vec![0u64; p.n_in];
                let _ = hush_replicated::local::eval_local(&p, 1, &input, Some([1; 16]), false);
            }
        }
    }
}

fn module_request(data: &[u8]) {
    let mut m = hush_tee::Module::with_rng(Prg::new(Block(1)));
    for req in split(data) {
        let _ = m.handle_bytes(&req);
    }
}

fn module_messages(data: &[u8]) {
    let _ = hush_tee::Request::decode(data);
    let _ = hush_tee::Response::decode(data);
    let _ = hush_tee::linear_deal::LinearRequest::decode(data);
    let _ = hush_tee::linear_deal::LinearResponse::decode(data);
    let _ = hush_tee::attest::Report::from_bytes(data);
}

fn fss_keys(data: &[u8]) {
    let _ = hush_fss::dcf::DcfKey::from_bytes(data);
    let _ = hush_fss::gates::DreluKey::from_bytes(data);
    let _ = hush_fss::gates::ReluKey::from_bytes(data);
    let _ = hush_fss::gates::LtKey::from_bytes(data);
    // CRISP's wide DCF and MAC-carrying gate keys (dealt bytes are untrusted)
    let _ = hush_fss::wide::WideDcfKey::from_bytes(data);
    let _ = hush_fss::mac::MacReluKey::from_bytes(data);
    let _ = <hush_fss::mac::MacTruncKey as hush_fss::mac::MacGate>::from_bytes(data);
}

/// One party of a COT source (setup plus 300 COTs).
pub fn cot_party(name: &str, party: u8, ch: &mut dyn Channel) -> Result<(), String> {
    use hush_correlations::registry::{setup_receiver, setup_sender, SourceConfig, TeeBackend};
    let mut cfg = SourceConfig::named(name);
    cfg.tee = TeeBackend::InProcess;
    cfg.params = Some(hush_correlations::lpn::TEST_INSECURE);
    let mut rng = Prg::new(Block(party as u128 + 1));
    let e = |e: hush_correlations::Error| e.to_string();
    if party == 0 {
        let mut s = setup_sender(&cfg, ch, &mut rng).map_err(e)?;
        let mut q = vec![Block::ZERO; 300];
        s.send_cots(ch, &mut q).map_err(e)
    } else {
        let mut r = setup_receiver(&cfg, ch, &mut rng).map_err(e)?;
        let (mut b, mut t) = (BitVec::zeros(0), vec![Block::ZERO; 300]);
        r.recv_cots(ch, &mut b, &mut t).map_err(e)
    }
}

fn peer_cot(name: &str, data: &[u8]) {
    let Some((&role, rest)) = data.split_first() else { return };
    let _ = cot_party(name, role & 1, &mut Scripted::new(rest));
}

/// Two dealers whose modules agreed a seed (so that fuzzed bytes reach the
/// online messages rather than die in the handshake).
fn dealers() -> (hush_2pc::tee::Dealer, hush_2pc::tee::Dealer) {
    let (mut a, mut b) = MemChannel::pair();
    let t = std::thread::spawn(move || hush_2pc::tee::Dealer::in_process(&mut b, 1).unwrap());
    let d0 = hush_2pc::tee::Dealer::in_process(&mut a, 0).unwrap();
    (d0, t.join().unwrap())
}

/// One party of a nonlinear family: DReLU and ReLU of 16 values (cf2
/// includes its IKNP set-up on `ch`; tami and fss get an agreed dealer).
pub fn nonlinear_party(
    proto: hush_2pc::nonlinear::Proto,
    party: u8,
    dealer: Option<hush_2pc::tee::Dealer>,
    ch: &mut dyn Channel,
) -> Result<(), String> {
    use hush_2pc::nonlinear::{Proto, Session};
    let e = |e: hush_2pc::Error| e.to_string();
    let ring = hush_primitives::Ring::new(32).unwrap();
    let mut ses = match proto {
        Proto::Cf2 => {
            let cfg = hush_correlations::registry::SourceConfig::named("iknp");
            let ot = hush_2pc::beaver::OtSession::setup(ch, party, &cfg, &mut Prg::new(Block(party as u128 + 9))).map_err(e)?;
            Session::interactive(party, ot)
        }
        _ => Session::tee(party, proto, dealer.ok_or("no dealer")?),
    };
    let x = hush_2pc::share::ArithShare { ring, v: (0..16u64).map(|i| i.wrapping_mul(0x9E37_79B9) & ring.mask()).collect() };
    ses.drelu(ch, &x).map_err(e)?;
    ses.relu(ch, &x).map_err(e)?;
    Ok(())
}

fn peer_nonlinear(proto: hush_2pc::nonlinear::Proto, data: &[u8]) {
    let Some((&role, rest)) = data.split_first() else { return };
    let party = role & 1;
    let dealer = match proto {
        hush_2pc::nonlinear::Proto::Cf2 => None,
        _ => {
            let (d0, d1) = dealers();
            Some(if party == 0 { d0 } else { d1 })
        }
    };
    let _ = nonlinear_party(proto, party, dealer, &mut Scripted::new(rest));
}

/// A small model for the inference targets.
pub fn small_model() -> &'static (std::sync::Arc<hush_inference::Model>, std::sync::Arc<hush_inference::Plan>) {
    static M: OnceLock<(std::sync::Arc<hush_inference::Model>, std::sync::Arc<hush_inference::Plan>)> = OnceLock::new();
    M.get_or_init(|| {
        use hush_inference::model::Builder;
        let (mut b, x) = Builder::new("fuzz", &[6]);
        let w: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0).collect();
        let y = b.dense(x, 4, &w, &[0.1, -0.1, 0.2, 0.0]);
        let y = b.relu(y);
        let m = hush_inference::Model::from_bytes(&b.finish(y)).unwrap();
        let plan = hush_inference::Plan::new(&m, hush_inference::FixedConfig::default()).unwrap();
        (std::sync::Arc::new(m), std::sync::Arc::new(plan))
    })
}

/// The server (`server`) or client side of one inference session.
pub fn inference_party(server: bool, ch: &mut dyn Channel) -> Result<(), String> {
    let ch = Borrowed(ch);
    use hush_inference::runtime::{self, ClientSession, Options};
    let (m, plan) = small_model();
    let opts = Options { chunk: 64, predeal_mem: 0, ..Default::default() };
    let e = |e: hush_inference::Error| e.to_string();
    if server {
        let mut ch = ch;
        runtime::serve_session(&mut ch, m, plan, &opts).map_err(e).map(|_| ())
    } else {
        let mut s = ClientSession::start(ch, &opts).map_err(e)?;
        s.predeal_next = false;
        s.infer_ring(&[1, 2, 3, 4, 5, 6]).map_err(e)?;
        s.close().map_err(e)
    }
}

fn peer_inference(server: bool, data: &[u8]) {
    let _ = inference_party(server, &mut Scripted::new(data));
}

/// A small circuit for the 3PC target: a 16-bit adder with an AND tree.
pub fn small_circuit() -> &'static hush_replicated::Program {
    static P: OnceLock<hush_replicated::Program> = OnceLock::new();
    P.get_or_init(|| {
        let c = hush_replicated::Circuit::builtin("aes128").unwrap();
        hush_replicated::Program::compile(&c)
    })
}

/// Party `i` of the 3PC engine (key set-up and one AES evaluation).
pub fn party_3pc(i: usize, to_next: &mut dyn Channel, from_prev: &mut dyn Channel) -> Result<(), String> {
    let prog = small_circuit();
    let e = |e: hush_replicated::Error| e.to_string();
    let keys = hush_replicated::araki::PartyKeys::setup(i, [i as u8 + 1; 16], to_next, from_prev).map_err(e)?;
    let mut ev = hush_replicated::Evaluator::new(prog, 1).map_err(e)?;
    let input = vec![0u64; prog.n_in * 2];
    let mut out = vec![0u64; prog.n_out];
    ev.eval_chunk(&keys, 1, 0, &input, &mut out, to_next, from_prev).map_err(e)
}

fn peer_3pc(data: &[u8]) {
    let Some((&role, rest)) = data.split_first() else { return };
    // both of the honest party's neighbours are scripted: even records
    // arrive on the ring from the previous party, odd ones on the link to
    // the next (PRF key set-up)
    let msgs = split(rest);
    let (mut prev, mut next) = (Vec::new(), Vec::new());
    for (k, m) in msgs.into_iter().enumerate() {
        if k % 2 == 0 { prev.push(m) } else { next.push(m) }
    }
    let _ = party_3pc((role % 3) as usize, &mut Scripted::new(&join(&next)), &mut Scripted::new(&join(&prev)));
}

/// Seed inputs for `name`: honest transcripts where the target has a peer.
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    let two = |f: fn(u8, &mut dyn Channel) -> Result<(), String>| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for victim in 0..2u8 {
            let (a, b) = MemChannel::pair();
            let t = std::thread::spawn(move || {
                let mut b = b;
                let _ = f(1 - victim, &mut b);
            });
            let mut rec = Recorder { inner: a, got: Vec::new() };
            let _ = f(victim, &mut rec);
            let _ = t.join();
            let mut s = vec![victim];
            s.extend(join(&rec.got));
            out.push(s);
        }
        out
    };
    match name {
        "frame" => vec![hush_transport::encode_frame(b"hello", 1, 0), vec![0; 20]],
        "npy" => vec![hush_inference::npy::to_bytes(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])],
        "onnx" => vec![include_bytes!("../../models/mnist_cnn.onnx").to_vec()],
        "hushm" => {
            let (mut b, x) = hush_inference::model::Builder::new("s", &[1, 4, 4]);
            let y = b.conv(x, 2, [3, 3], [1, 1], [1; 4], &[0.1; 18], &[0.0, 0.1]);
            let y = b.relu(y);
            let y = b.maxpool(y, [2, 2], [2, 2], [0; 4]);
            let y = b.flatten(y);
            let y = b.dense(y, 2, &[0.2; 16], &[0.0; 2]);
            vec![b.finish(y)]
        }
        "architecture" => vec![small_model().0.header_json.as_bytes().to_vec()],
        "attest_evidence" => attest_seeds().0,
        "attest_cert_table" => vec![attest_seeds().1],
        "attest_policy" => vec![b"kinds = [\"sev-snp\"]\n[sev_snp]\nproducts = [\"Milan\"]\nmin_tcb = { snp = 8 }\n[tdx]\ntcb_statuses = [\"UpToDate\"]\n".to_vec()],
        "bristol" => vec![b"2 5\n2 1 1\n1 1\n\n2 1 0 1 2 AND\n1 1 2 3 INV\n2 1 3 0 4 XOR\n".to_vec()],
        "peer_iknp" => two(|p, ch| cot_party("iknp", p, ch)),
        "peer_ferret" => two(|p, ch| cot_party("ferret", p, ch)),
        "peer_silent" => two(|p, ch| cot_party("silent", p, ch)),
        "peer_cf2" => two(|p, ch| nonlinear_party(hush_2pc::nonlinear::Proto::Cf2, p, None, ch)),
        "peer_inference_client" | "peer_inference_server" => {
            let server = name == "peer_inference_server";
            let (a, b) = MemChannel::pair();
            let t = std::thread::spawn(move || {
                let mut b = b;
                inference_party(!server, &mut b)
            });
            let mut rec = Recorder { inner: a, got: Vec::new() };
            let _ = inference_party(server, &mut rec);
            let _ = t.join();
            vec![join(&rec.got)]
        }
        _ => vec![vec![0u8; 64]],
    }
}

/// Evidence (hush-attest): decode, then the certificate table and a full
/// verification (sev / dcap-qvl parsers) under the default policy.
fn attest_evidence(data: &[u8]) {
    if let Ok(e) = hush_attest::Evidence::decode(data) {
        let _ = hush_attest::evidence::parse_cert_table(&e.aux);
        let input = hush_attest::VerifyInput { now: 1_750_809_600, ..Default::default() };
        let _ = hush_attest::verify(&e, &hush_attest::Policy::default(), &input);
    }
}

/// Seeds from the real evidence in crates/hush-attest/testdata: an SNP
/// report with its VCEK table, a TDX quote with its collateral; and the table.
fn attest_seeds() -> (Vec<Vec<u8>>, Vec<u8>) {
    use hush_attest::evidence::{encode_cert_table, EvidenceKind};
    let hex = include_str!("../../crates/hush-attest/testdata/report_milan.hex");
    let report = hush_attest::unhex("report", hex).unwrap_or_default();
    let vcek: &[u8] = include_bytes!("../../crates/hush-attest/testdata/vcek_milan.der");
    let table = encode_cert_table(&[(sev_cert_type_vcek(), vcek)]);
    let mut out = Vec::new();
    if let Ok(e) = hush_attest::Evidence::new(EvidenceKind::SevSnp, vec![1; 32], report, table.clone()) {
        out.push(e.encode());
    }
    let quote = include_bytes!("../../crates/hush-attest/testdata/tdx_quote").to_vec();
    let coll = include_bytes!("../../crates/hush-attest/testdata/tdx_quote_collateral.json").to_vec();
    if let Ok(e) = hush_attest::Evidence::new(EvidenceKind::Tdx, vec![], quote, coll) {
        out.push(e.encode());
    }
    (out, table)
}

fn sev_cert_type_vcek() -> hush_attest::evidence::CertType {
    hush_attest::evidence::CertType::VCEK
}
