//! The entry points of the private-inference commands — `hush serve`,
//! `infer`, `run`, `dealer`, `demo` and `bench infer` (`hush embed` is
//! [`crate::encoder::embed_main`]) — each on a plain option struct.
//!
//! The flags themselves (clap, with their help text and defaults) live in
//! `hush-cli` (`src/inference.rs`), which converts them into these structs;
//! each field is the flag of the same name (`predeal_mem` is
//! `--predeal-mem`), its doc the flag's meaning. [`CommonOptions`] and
//! [`FixedOptions`] default to the flags' defaults.

use crate::model::{Model, Post};
use crate::runtime::{self, Options};
use crate::{engine, npy, reference, Error, FixedConfig, Plan, Result};
use hush_transport::{LinkConfig, LinkFlags, MemChannel, NetProfile};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Options every party shares.
#[derive(Clone, Debug)]
pub struct CommonOptions {
    /// Nonlinear protocol family: auto (tami in tee/dealer mode, cf2 in
    /// interactive/silent mode), fss (FSS gates) or tami (TAMI-MPC) in
    /// tee/dealer mode, cf2 (CrypTFlow2 on COTs) in interactive/silent mode.
    pub proto: String,
    /// Network profile to emulate: none, lan, wan, mobile.
    pub net: String,
    /// Where the trusted modules run: in-process or out-of-process
    /// (attestation simulated — gives no hardware protection).
    pub tee: String,
    /// Per-party memory budget for pre-dealing (e.g. 256MiB; 0 disables):
    /// the modules deal the next inference's input-independent
    /// correlations (linear masks, comparison keys) before its input
    /// arrives; what does not fit is dealt during the online phase. A
    /// session uses the smaller of the two parties' budgets.
    pub predeal_mem: String,
    /// Trust mode: tee (each party's trusted module; attestation simulated —
    /// gives no hardware protection), dealer (a `hush dealer` service on a
    /// third host, trusted not to collude with either party), interactive
    /// (cryptography only: Cheetah HE linear layers, cf2 on Ferret COTs) or
    /// silent (HE linear layers, cf2 on SilentFlow COTs from the modules) or
    /// malicious-client (CRISP: MACs on every wire and a final consistency
    /// check against a client that deviates; a dealer underneath, never a
    /// simulated module). Both parties must use the same mode.
    pub mode: String,
    /// malicious-client mode: the MAC parameter s of the lifted ring
    /// Z_2^(ℓ+s) (default 40; a cheating client passes the check with
    /// probability ≤ (s+3)·2^-(s+2)). Both parties must use the same.
    pub mac_s: u32,
    /// malicious-client mode: the linear-layer backend — dealt (default:
    /// dealer-dealt bilinear triples) or ckks (CRISP's CKKS layers; without
    /// a ZK proof of plaintext knowledge, which is not built, a malicious
    /// client can learn about one bit of a chosen linear function of the
    /// weights per revealed coefficient, undetected). Both parties must use
    /// the same.
    pub crisp_linear: String,
    /// Interactive/silent modes: the RLWE parameter set of the HE linear
    /// layers (he128-n8192-p50: N = 8192, four 50-bit primes, log q < 200,
    /// 128-bit HE standard, AVX-512 IFMA kernels; he128-n8192: three 60-bit
    /// primes, log q < 180; he128-n8192-wide). The server's choice wins.
    pub he_params: String,
    /// Interactive/silent modes: the COT source's LPN set (interactive:
    /// ferret-main, lpn-b13, lpn-b12, lpn-b11, lpn-b10; silent: lpn-b10).
    /// Default: the server picks the largest that a client's --max-mem
    /// holds. The server's choice wins.
    pub cot_set: Option<String>,
    /// Dealer mode: where `hush dealer` listens (HOST:PORT). `hush run`,
    /// `demo` and `bench infer` start a dealer in this process when omitted.
    pub dealer: Option<String>,
    /// Dealer mode: the dealer's fingerprint (sha256:HEX, printed by
    /// `hush dealer` at start); required with TLS (the default).
    pub dealer_pin: Option<String>,
    /// Dealer mode: the attestation policy (TOML, docs/attestation.md) the
    /// dealer's hardware evidence must pass, beside or in place of
    /// `--dealer-pin`; a dealer that fails is refused before any
    /// correlation is used, naming the failed leg.
    pub dealer_attest: Option<std::path::PathBuf>,
    /// Tee mode: the attestation policy (TOML, docs/attestation.md) the
    /// peer's trusted module (`hush-tee-module --attest snp|tdx` in a
    /// confidential VM) must pass; a module that fails, or gives no
    /// evidence (the simulated module), is refused before seed agreement
    /// completes, naming the failed leg.
    pub module_attest: Option<std::path::PathBuf>,
    /// **INSECURE, reproducibility tests only** (`--insecure-test-seed`,
    /// hidden): 64 hex digits from which every random value of an encoder
    /// graph's interactive or silent run derives (HE keys and noise, COT
    /// seeds, masks), so that a two-process run can be compared with the
    /// one-process run bit for bit ([`Options::insecure_test_seed`]). Both
    /// parties must give the same seed. Refused in every other mode; a
    /// warning is printed when set.
    pub insecure_test_seed: Option<String>,
    /// The link flags: identity, pins, `--insecure`, `--connect-timeout`.
    pub link: LinkFlags,
}

/// `hush dealer`: the dealer service of dealer mode.
#[derive(Clone, Debug)]
pub struct DealerOptions {
    /// Address to listen on, e.g. 0.0.0.0:7100.
    pub listen: String,
    /// Close a session's connection after this many seconds of silence
    /// (its state is erased).
    pub idle_timeout: u64,
    /// Most sessions held at once (more are refused with an error).
    pub max_sessions: usize,
    /// Bytes of shares one session's dealing plan may hold computed ahead
    /// in this process (the server sends the rest of its dealing schedule;
    /// the dealer computes it before the client's input exists, up to
    /// this); 0 turns plans off.
    pub plan_mem: String,
    /// Most connections in their set-up (handshake, join); more are closed at once.
    pub max_pending: usize,
    /// Per session: bytes of shares held dealt-but-unclaimed for one role
    /// (computed on the other role's request). A role that asks for more
    /// while this much waits for its peer is held without computing, then
    /// refused (--ahead-wait). Each session's budget is what its server
    /// announces for its model; this is the cap (default 1GiB).
    pub session_mem: String,
    /// Seconds a request ahead of --session-mem is held for the peer to
    /// catch up before it is refused.
    pub ahead_wait: u64,
    /// Most sessions opened from one source address at once.
    pub max_sessions_per_addr: usize,
    /// Refuse new sessions while the dealer's resident memory is at this
    /// size (e.g. 8G; `none`: no cap). Default: 3/4 of physical memory.
    pub max_mem: Option<String>,
    /// With --pin, only parties presenting a pinned certificate are served.
    pub link: LinkFlags,
    /// Hardware evidence for parties that ask (`--dealer-attest`): `snp`,
    /// `tdx` (configfs-tsm in a confidential VM) or `test:DIR` (tests only:
    /// a test root, no hardware protection). `None`: none.
    pub attest: Option<String>,
    /// configfs-tsm's report directory (default /sys/kernel/config/tsm/report).
    pub attest_tsm: Option<std::path::PathBuf>,
    /// TDX: the QuoteCollateralV3 JSON served beside each quote.
    pub attest_collateral: Option<std::path::PathBuf>,
}

const ATTEST_REFUSES_IDENTITY: &str = "--attest refuses --identity: the evidence proves the measured dealer holds its TLS key, which is only true of a key made inside the VM; run without --identity (a fresh key in memory) and give parties --dealer-attest POLICY instead of a pin";

/// `hush dealer --attest`: the evidence hook of the dealer service. Refuses
/// `--identity` (a key read from a disk the host may have seen would let
/// the host impersonate the attested dealer: the evidence binds the key,
/// and only a key made inside the VM is the VM's alone) and plaintext, and
/// obtains evidence once at start so a dealer that cannot attest fails now.
fn dealer_attestation(a: &DealerOptions, link: &hush_transport::LinkSecurity) -> Result<Option<hush_tee::dealer::EvidenceFn>> {
    let Some(spec) = &a.attest else {
        if a.attest_tsm.is_some() || a.attest_collateral.is_some() {
            return Err(Error::Config("--attest-tsm and --attest-collateral need --attest".into()));
        }
        return Ok(None);
    };
    if a.link.identity.is_some() {
        return Err(Error::Config(ATTEST_REFUSES_IDENTITY.into()));
    }
    let hush_transport::LinkSecurity::Tls(t) = link else {
        return Err(Error::Config("--attest needs TLS: the evidence binds the dealer's TLS key (drop --insecure)".into()));
    };
    let src = hush_attest::provider::Source::from_flag(spec, a.attest_tsm.as_deref(), a.attest_collateral.as_deref()).map_err(|e| Error::Config(format!("--attest: {e}")))?;
    let spki = hush_attest::spki_of_certificate(t.identity.cert_der()).map_err(|e| Error::Config(format!("--attest: {e}")))?;
    src.get(&spki, &[0u8; hush_tee::dealer::NONCE_LEN]).map_err(|e| Error::Config(format!("--attest {spec}: no evidence at start: {e}")))?;
    if let hush_attest::provider::Source::Test(_) = src {
        hush_transport::log_line!("hush dealer", "WARNING: {} — never use --attest test:DIR in a deployment", hush_attest::test_evidence::TEST_NOTE);
    }
    hush_transport::log_line!("hush dealer", "attestation: {} (REPORT_DATA = SHA-512(TLS SPKI || party's nonce))", src.describe());
    Ok(Some(runtime::evidence_hook(src)))
}

/// `hush dealer`: serve correlations to many concurrent sessions until killed.
pub fn dealer_main(a: DealerOptions) -> Result<()> {
    if a.attest.is_some() && a.link.identity.is_some() {
        return Err(Error::Config(ATTEST_REFUSES_IDENTITY.into()));
    }
    let link = resolve_link(&a.link)?;
    let mut cfg = hush_tee::dealer::DealerConfig::new(link.accept_clients(), hush_2pc::deal::kinds());
    cfg.idle_timeout = std::time::Duration::from_secs(a.idle_timeout.max(1));
    cfg.max_sessions = a.max_sessions.max(1);
    cfg.plan_mem = parse_size(&a.plan_mem)?;
    cfg.max_pending = a.max_pending.max(1);
    cfg.max_mem = crate::limits::cap_flag(a.max_mem.as_deref(), "--max-mem")?;
    cfg.session_mem = parse_size(&a.session_mem)?;
    cfg.ahead_wait = std::time::Duration::from_secs(a.ahead_wait.max(1));
    cfg.max_sessions_per_addr = a.max_sessions_per_addr.max(1);
    cfg.attest = dealer_attestation(&a, &cfg.link)?;
    let log = hush_transport::notice::logger("hush dealer");
    let h = hush_tee::dealer::serve(&a.listen, cfg, log)?;
    print_identity("hush dealer", &link);
    hush_transport::log_line!("hush dealer", "dealing on {} (dealer mode: one module per session and role, nothing kept after a session; trusted not to collude with either party)", h.addr);
    h.wait();
    Ok(())
}


fn resolve_link(f: &LinkFlags) -> Result<LinkConfig> {
    LinkConfig::from_flags(f).map_err(|e| Error::Config(e.to_string()))
}

/// Prints a party's identity line (or the plaintext warning) to stderr.
pub fn announce_link(cmd: &str, link: &LinkConfig) {
    eprintln!("{cmd}: {}", link.banner());
}

/// What a listening party prints at start: `fingerprint sha256:<hex>` as
/// its own line on stdout (flushed, for scripts that start it and read the
/// pin to give its peers), or the plaintext warning on stderr.
pub fn print_identity(cmd: &str, link: &LinkConfig) {
    use std::io::Write;
    match link.fingerprint() {
        Some(fp) => {
            println!("fingerprint {fp}");
            let _ = std::io::stdout().flush();
        }
        None => eprintln!("{cmd}: {}", link.banner()),
    }
}

/// Fixed-point options (the server's values are used in a session).
#[derive(Clone, Debug)]
pub struct FixedOptions {
    /// Ring size ℓ (bits, ≤ 64).
    pub bits: u32,
    /// Fraction bits.
    pub frac: u32,
    /// Largest nonlinear batch (elements): bounds dealt key material per
    /// step (default 65536; 262144 for cf2 in the interactive and silent
    /// modes, whose chunks cost sequential flights).
    pub chunk: Option<usize>,
}

/// 64 hex digits → 32 bytes.
pub(crate) fn hex_seed(h: &str) -> Option<[u8; 32]> {
    let h = h.as_bytes();
    if h.len() != 64 {
        return None;
    }
    let mut b = [0u8; 32];
    for (i, c) in h.chunks(2).enumerate() {
        b[i] = u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok()?;
    }
    Some(b)
}

impl Default for CommonOptions {
    /// The flags' defaults: `tee` mode, family `auto`, no emulated network,
    /// in-process modules, 256 MiB of pre-dealing, an ephemeral TLS identity.
    fn default() -> Self {
        CommonOptions {
            proto: "auto".into(),
            net: "none".into(),
            tee: "in-process".into(),
            predeal_mem: "256MiB".into(),
            mode: "tee".into(),
            mac_s: hush_2pc::crisp::DEFAULT_S,
            crisp_linear: "dealt".into(),
            he_params: crate::he_linear::DEFAULT_PARAMS.into(),
            cot_set: None,
            dealer: None,
            dealer_pin: None,
            dealer_attest: None,
            module_attest: None,
            insecure_test_seed: None,
            link: LinkFlags::default(),
        }
    }
}

impl Default for FixedOptions {
    /// The flags' defaults: ℓ = 37, 12 fraction bits, the mode's chunk.
    fn default() -> Self {
        FixedOptions { bits: 37, frac: 12, chunk: None }
    }
}

/// `hush serve`: serve a model to many concurrent clients.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Model: a .hushm file, or .onnx — a CNN (converted in this process by
    /// the built-in importer) or a transformer encoder as torch.onnx.export
    /// or optimum write it (served by the graph runtime in tee or dealer
    /// mode; clients connect with `hush embed --connect`).
    pub model: PathBuf,
    /// Address to listen on, e.g. 0.0.0.0:7000.
    pub listen: String,
    pub common: CommonOptions,
    pub fixed: FixedOptions,
    /// Most concurrent client sessions (more are refused with an error).
    pub max_sessions: usize,
    /// Most concurrent sessions from one client address (more are refused;
    /// in dealer and malicious-client modes each session holds a dealer
    /// session).
    pub max_sessions_per_addr: usize,
    /// Per-session memory cap (e.g. 512M): sessions are fitted to it
    /// (chunk, pre-dealing) and refused when the model cannot run within
    /// it. Default: none.
    pub session_mem: Option<String>,
    /// Global memory cap over all sessions' estimated peaks (e.g. 8G;
    /// `none`: no cap); a session that would exceed it is refused.
    /// Default: 3/4 of physical memory.
    pub total_mem: Option<String>,
    /// Most connections in their set-up (greeting, TLS handshake); more are
    /// closed at once.
    pub max_pending: usize,
    /// Encoder graphs: the plan — `auto` (the cost model's choice per
    /// layer, measured once per input shape) or a plan file (TOML; see
    /// docs/graph-runtime.md). Default: the mode's preset.
    pub plan: Option<String>,
}

/// `hush infer`: the client of a `hush serve` server.
#[derive(Clone, Debug)]
pub struct InferOptions {
    /// Server address.
    pub connect: String,
    /// Input .npy (the model's input shape, optionally with a leading 1;
    /// with --batch, a stack of inputs).
    pub input: PathBuf,
    /// Where to write the logits (.npy, float64).
    pub out: PathBuf,
    pub common: CommonOptions,
    /// Treat the first axis of the input as a batch of independent inputs.
    pub batch: bool,
    /// Client peak-memory budget, e.g. 256MiB (refuses models that need more).
    pub max_mem: Option<String>,
    /// Print one JSON object with the costs.
    pub json: bool,
    /// Require the server's ring size ℓ (bits); a server with another is refused, naming both.
    pub bits: Option<u32>,
    /// Require the server's fraction bits; a server with others is refused, naming both.
    pub frac: Option<u32>,
    /// Require the server's nonlinear chunk; a server with another is refused, naming both.
    pub chunk: Option<usize>,
    /// Require the server's model: the digest `hush serve` prints at start
    /// (sha256:HEX of the public architecture); another is refused, naming both.
    pub model_digest: Option<String>,
    /// `auto`: run the per-layer family plan the server chose.
    pub plan: Option<String>,
}

/// `hush run`: both parties in this process (or a plaintext executor).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Model: a .hushm file, or .onnx (converted in this process by the built-in importer).
    pub model: PathBuf,
    /// Input .npy.
    pub input: PathBuf,
    /// Where to write the logits (.npy, float64).
    pub out: PathBuf,
    pub common: CommonOptions,
    pub fixed: FixedOptions,
    /// Weak-client profile for the client party: weak (TAMI-MPC's 800 MHz,
    /// 512 MB client), tiny (SilentFlow's 500 MHz, 256 MB) or none. Limits
    /// the client thread's CPU share (cgroup quota, else a duty-cycle
    /// throttle) and sets --max-mem to the profile's memory unless smaller.
    pub client_profile: String,
    /// secure (two parties), reference (plaintext fixed point) or float (f64).
    pub exec: String,
    /// Treat the first axis of the input as a batch of independent inputs.
    pub batch: bool,
    /// Transport between the two local parties: mem or tcp (loopback).
    pub transport: String,
    /// Client peak-memory budget, e.g. 512MiB: chunk and pre-dealing sizes
    /// are fitted to it, a budget below the model's floor is refused before
    /// anything is sent, and it is enforced as measured peak.
    pub max_mem: Option<String>,
    pub json: bool,
}

/// `hush bench infer`: the costs of one model (or `table`: a grid).
#[derive(Clone, Debug)]
pub struct BenchInferOptions {
    /// minionn-mnist, minionn-cifar, squeezenet, resnet50, bert-base (random
    /// weights), minilm-l6 (the real all-MiniLM-L6-v2 from scripts/minilm.py's
    /// graph), or a model file.
    pub model: String,
    /// bert-base, minilm-l6: sequence length.
    pub seq: usize,
    /// bert-base: run only the first N of its 12 layers (quick runs).
    pub layers: Option<usize>,
    pub common: CommonOptions,
    pub fixed: FixedOptions,
    pub transport: String,
    /// Client peak-memory budget, e.g. 512MiB: chunk and pre-dealing sizes
    /// are fitted to it, a budget below the model's floor is refused before
    /// anything is sent, and the client's measured peak is enforced.
    pub max_mem: Option<String>,
    /// Weak-client profile for the client party: weak (TAMI-MPC's 800 MHz,
    /// 512 MB client), tiny (SilentFlow's 500 MHz, 256 MB) or none.
    pub client_profile: String,
    pub repeat: usize,
    /// Also check the secure logits against the plaintext fixed-point reference.
    pub check: bool,
    /// Run each repetition twice over TCP, plaintext then TLS, and report
    /// TLS's overhead (online time and session socket bytes) beside the
    /// plaintext figures.
    pub tls_overhead: bool,
    /// Print TAMI-MPC Table 4's and SilentFlow Table IV's shape: models ×
    /// modes × networks, online and total time, bytes, rounds, with the
    /// papers' figures beside (and what is and is not like for like).
    pub table: bool,
    /// With --table: the models (comma-separated).
    pub models: String,
    /// With --table: the modes (comma-separated; dealer mode runs a dealer
    /// in this process).
    pub modes: String,
    /// With --table: the network profiles (comma-separated).
    pub nets: String,
    pub json: bool,
    /// The plan: `auto` (encoder graphs: a backend per layer; CNNs: the
    /// mode's comparison family predicted fastest on --net, see `hush
    /// plan`) or, for encoder graphs, a plan file (TOML); default: the
    /// mode's preset.
    pub plan: Option<String>,
}

/// `hush demo`: the bundled MNIST samples on the bundled model.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Folder with mnist_cnn.hushm and samples/ (default: the repository's models/).
    pub models: Option<PathBuf>,
    pub common: CommonOptions,
    pub json: bool,
}

/// Parses sizes like 256MiB, 1GiB, 500MB, 1048576.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mul) = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("GB", 1_000_000_000), ("MB", 1_000_000), ("KB", 1000), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)]
        .iter()
        .find_map(|(suf, m)| t.strip_suffix(suf).map(|n| (n.trim(), *m)))
        .unwrap_or((t, 1));
    num.parse::<u64>().ok().and_then(|n| n.checked_mul(mul)).ok_or_else(|| Error::Config(format!("bad size '{s}' (e.g. 256MiB)")))
}

pub fn options(common: &CommonOptions, fixed: Option<&FixedOptions>, max_mem: Option<&String>) -> Result<Options> {
    let profile = NetProfile::by_name(&common.net)
        .ok_or_else(|| Error::Config(format!("unknown network profile '{}' (choose one of {})", common.net, NetProfile::names().join(", "))))?;
    let predeal_mem = parse_size(&common.predeal_mem)?;
    let link = resolve_link(&common.link)?;
    // dealer mode without --dealer: a local dealer is filled in by local_dealer()
    let mode = runtime::Mode::from_flags_local(&common.mode, common.dealer.as_deref(), common.dealer_pin.as_deref())?;
    crate::he_linear::params_by_name(&common.he_params)?;
    let mut o = Options {
        proto: common.proto.clone(),
        tee: common.tee.clone(),
        profile,
        predeal_mem,
        link,
        mode,
        he_params: common.he_params.clone(),
        cot_set: common.cot_set.clone(),
        ..Default::default()
    };
    o.expect.proto = common.proto != "auto";
    o.resolve_family()?;
    if let Some(p) = &common.module_attest {
        match o.mode {
            runtime::Mode::Tee => {}
            runtime::Mode::Silent => return Err(Error::Config("--module-attest is not implemented for --mode silent: its SilentFlow modules live inside the COT source and are not attested yet (they are simulated — give no hardware protection); use --mode tee".into())),
            _ => return Err(Error::Config(format!("--module-attest applies to --mode tee (the parties' own modules), not --mode {}; a dealer is attested with --dealer-attest", o.mode.name()))),
        }
        let policy = hush_attest::Policy::read_file(p).map_err(|e| Error::Config(format!("--module-attest: {e}")))?;
        o.module_attest = Some(std::sync::Arc::new(policy));
    }
    if let Some(p) = &common.dealer_attest {
        match o.mode.dealer() {
            None => return Err(Error::Config(format!("--dealer-attest applies to --mode dealer and malicious-client, not --mode {}", o.mode.name()))),
            Some(("", _)) => return Err(Error::Config("--dealer-attest needs --dealer ADDR (a dealer started in this process has no evidence to give)".into())),
            Some(_) => {}
        }
        let policy = hush_attest::Policy::read_file(p).map_err(|e| Error::Config(format!("--dealer-attest: {e}")))?;
        o.dealer_attest = Some(std::sync::Arc::new(policy));
    }
    if o.mode.preset().engine == crate::preset::Engine::Crisp {
        o.crisp = crate::crisp_run::CrispOptions { s: common.mac_s, linear: common.crisp_linear.clone() };
        o.crisp.check()?;
        if o.crisp.linear == "ckks" {
            eprintln!("hush: warning: {}", crate::crisp_run::CKKS_GAP_WARNING);
        }
        if max_mem.is_some() {
            return Err(Error::Config("--max-mem is not supported in --mode malicious-client yet (one inference's FSS keys are dealt before its online phase)".into()));
        }
    } else if common.mac_s != hush_2pc::crisp::DEFAULT_S || common.crisp_linear != "dealt" {
        return Err(Error::Config(format!("--mac-s and --crisp-linear apply to --mode malicious-client, not --mode {}", o.mode.name())));
    }
    if let Some(h) = &common.insecure_test_seed {
        if !matches!(o.mode, runtime::Mode::Interactive | runtime::Mode::Silent) {
            return Err(Error::Config(format!("--insecure-test-seed applies to encoder graphs in --mode interactive or silent, not --mode {}", o.mode.name())));
        }
        let b = hex_seed(h).ok_or_else(|| Error::Config("--insecure-test-seed: 64 hex digits".into()))?;
        eprintln!("hush: warning: --insecure-test-seed: every random value of this run derives from a seed given on the command line — INSECURE, for reproducibility tests only");
        o.insecure_test_seed = Some(b);
    }
    if o.cot_set.is_some() && !o.mode.he() {
        return Err(Error::Config(format!("--cot-set applies to --mode interactive and silent, not --mode {}", o.mode.name())));
    }
    if o.cot_set.is_some() {
        runtime::cot_set_for(&o, None, 0)?;
    }
    if let Some(f) = fixed {
        o.cfg = FixedConfig::new(f.bits, f.frac)?;
        let chunk = f.chunk.unwrap_or(o.mode.default_chunk(engine::DEFAULT_CHUNK));
        if chunk == 0 {
            return Err(Error::Config("--chunk must be positive".into()));
        }
        o.chunk = chunk;
    }
    if let Some(m) = max_mem {
        o.max_mem = Some(parse_size(m)?);
    }
    Ok(o)
}

/// Applies `--client-profile`: its CPU share (at run time) and its memory
/// as the client's budget, unless `--max-mem` is smaller.
/// `--client-profile NAME` on options: the client's CPU share and, when
/// the device has a memory size, a budget no larger than it.
pub fn with_profile(mut o: Options, name: &str) -> Result<Options> {
    let p = hush_transport::ClientProfile::by_name(name)
        .ok_or_else(|| Error::Config(format!("--client-profile {name}: choose one of {}", hush_transport::ClientProfile::names().join(", "))))?;
    if let Some(m) = p.mem {
        o.max_mem = Some(o.max_mem.map_or(m, |b| b.min(m)));
    }
    o.client_profile = p;
    Ok(o)
}

/// Splits an input array into the model's inputs.
fn inputs_of(model: &Model, shape: &[usize], x: &[f64], batch: bool) -> Result<Vec<Vec<f64>>> {
    let n = model.input_len();
    if batch {
        if shape.is_empty() || x.len() != shape[0] * n {
            return Err(Error::Input(format!("--batch input of shape {shape:?}: each item must have the model's shape {:?}", model.input_shape)));
        }
        x.chunks(n).map(|c| prepared(model, c)).collect()
    } else {
        let want = &model.input_shape;
        let ok = shape == want.as_slice() || (shape.len() == want.len() + 1 && shape[0] == 1 && &shape[1..] == want.as_slice());
        if !ok {
            return Err(Error::Input(format!("input of shape {shape:?}, the model expects {want:?} (optionally with a leading batch dimension of 1)")));
        }
        Ok(vec![prepared(model, x)?])
    }
}

/// One input through the model's declared range ([`Model::prepare_input`]),
/// the note (a normalisation applied) on stderr.
fn prepared(model: &Model, x: &[f64]) -> Result<Vec<f64>> {
    let (v, note) = model.prepare_input(x)?;
    if let Some(n) = note {
        eprintln!("hush: note: {n}");
    }
    Ok(v)
}

fn write_out(path: &Path, model: &Model, outs: &[Vec<f64>], batch: bool) -> Result<()> {
    let mut shape = model.output_shape().to_vec();
    if batch {
        shape.insert(0, outs.len());
    } else {
        shape.insert(0, 1);
    }
    let flat: Vec<f64> = outs.iter().flatten().cloned().collect();
    npy::write(path, &shape, &flat)
}

fn describe_prediction(post: Post, logits: &[f64]) -> String {
    match post {
        Post::None => format!("{} logits", logits.len()),
        Post::Softmax | Post::Argmax => format!("class {}", runtime::argmax(logits)),
    }
}

/// `hush serve`: serve the model to many concurrent clients until killed.
pub(crate) fn needs_dealer_addr(common: &CommonOptions, cmd: &str) -> Result<()> {
    if common.mode == "dealer" && common.dealer.is_none() {
        return Err(Error::Config(format!("{cmd} --mode dealer needs --dealer ADDR (where `hush dealer` listens) and --dealer-pin sha256:<hex>")));
    }
    if common.mode == "malicious-client" && common.dealer.is_none() {
        return Err(Error::Config(format!("{cmd}: {}", runtime::MALICIOUS_CLIENT_NEEDS_DEALER)));
    }
    Ok(())
}

pub(crate) fn mode_line(o: &Options) -> String {
    o.mode.summary(&o.tee, &o.he_params, &o.crisp)
}

/// `hush serve` in dealer or malicious-client mode: reaches the dealer once
/// at start (TCP, then TLS against `--dealer-pin`) and hangs up, so an
/// unreachable dealer or a wrong pin stops the server now instead of failing
/// its first client's session seconds later.
fn check_dealer_at_start(o: &Options, addr: &str, pin: Option<hush_transport::Fingerprint>) -> Result<()> {
    let sec = runtime::dealer_link(o, addr, pin)?;
    if let Some(check) = runtime::dealer_check(o) {
        let summary = hush_tee::dealer::probe_checked(addr, &sec, o.link.connect_timeout_flag(), Some(&check))
            .map_err(|e| Error::Config(format!("the dealer at {addr} was checked at start and refused: {e}")))?;
        hush_transport::log_line!("hush serve", "dealer at {addr} attested: {}", summary.unwrap_or_default());
        return Ok(());
    }
    let base = hush_tee::dealer::channel_options();
    let copts = hush_transport::ChannelOptions { connect_timeout: o.link.connect_timeout_flag().unwrap_or(base.connect_timeout), ..base };
    let ch = hush_transport::TcpChannel::connect_with(addr, copts, &sec).map_err(|e| {
        Error::Config(format!("the dealer at {addr} cannot be reached at start: {e} (start `hush dealer` first; --dealer and --dealer-pin name it)"))
    })?;
    drop(ch);
    Ok(())
}

pub fn serve_main(a: ServeOptions) -> Result<()> {
    needs_dealer_addr(&a.common, "hush serve")?;
    let o = options(&a.common, Some(&a.fixed), None)?;
    if let Some((addr, pin)) = o.mode.dealer() {
        check_dealer_at_start(&o, addr, pin)?;
    }
    let limits = crate::limits::ServerLimits::new(
        a.session_mem.as_deref().map(crate::limits::parse_bytes).transpose()?,
        crate::limits::cap_flag(a.total_mem.as_deref(), "--total-mem")?,
        a.max_pending,
    );
    let o = Options { max_sessions: a.max_sessions, max_sessions_per_addr: a.max_sessions_per_addr, limits, ..o };
    if let Some(g) = crate::graph_serve::graph_model_for(&a.model)? {
        return crate::graph_serve::serve_graph_main(a, o, g);
    }
    let model = Arc::new(Model::load(&a.model)?);
    let mut o = o;
    // --plan auto: the comparison family per layer, predicted for this
    // server's --net from costs measured here at start (crate::cnn_plan);
    // clients run it with `hush infer --plan auto`
    match a.plan.as_deref() {
        None => {}
        Some("auto") => {
            let req = crate::cnn_plan::CnnPlanRequest { opts: o.clone(), net: o.profile.clone(), verify: false, verify_fixed: false };
            let (choice, rep) = crate::cnn_plan::plan_cnn(model.clone(), &req)?;
            o = choice.apply(&o);
            hush_transport::log_line!("hush serve", "--plan auto for --net {}: {} (predicted {:.3} s per inference; clients need --plan auto)", o.profile.name, rep["auto"]["family"].as_str().unwrap_or("?"), rep["auto"]["predicted_s"].as_f64().unwrap_or(f64::NAN));
        }
        Some(f) => return Err(Error::Config(format!("--plan {f}: {} is a CNN model; CNNs take --plan auto (the comparison family per layer); plan files are for encoder graphs", a.model.display()))),
    }
    let log = hush_transport::notice::logger("hush serve");
    let h = runtime::serve(model.clone(), &a.listen, o.clone(), log)?;
    print_identity("hush serve", &o.link);
    hush_transport::log_line!(
        "hush serve",
        "model '{}' ({} layers, input {:?}) on {} — ring 2^{}, {} fraction bits, {}",
        model.name,
        model.nodes.len(),
        model.input_shape,
        h.addr,
        o.cfg.bits,
        o.cfg.frac,
        mode_line(&o)
    );
    let family = if o.mode.preset().engine == crate::preset::Engine::Crisp {
        "crisp (the only family of --mode malicious-client)".to_string()
    } else if o.expect.proto {
        format!("--proto {} (clients asking for another family are refused)", o.proto)
    } else {
        format!("--proto auto: {} unless a client asks for another of {}", o.proto, o.mode.families().join(", "))
    };
    hush_transport::log_line!("hush serve", "model digest {} (clients may require it with --model-digest); family {family}", crate::hello::architecture_digest(&model.header_json));
    h.wait();
    Ok(())
}

fn print_report(json_out: bool, v: &serde_json::Value) {
    if json_out {
        println!("{v}");
        return;
    }
    println!(
        "  online {:.3} s, offline (setup + pre-dealing) {:.3} s; bytes client→server {}, server→client {}; rounds {}",
        v["online_s"].as_f64().unwrap_or(0.0),
        v["offline_s"].as_f64().unwrap_or(0.0),
        v["online_bytes_client_to_server"],
        v["online_bytes_server_to_client"],
        v["rounds"]
    );
    if let Some(layers) = v["per_layer"].as_array() {
        println!("  {:<16} {:<9} {:>9} {:>9} {:>12} {:>12} {:>6} {:>9} {:>12}", "layer", "kind", "elems", "time ms", "bytes c→s", "bytes s→c", "rounds", "module ms", "MACs");
        for l in layers {
            println!(
                "  {:<16} {:<9} {:>9} {:>9.2} {:>12} {:>12} {:>6} {:>9.2} {:>12}",
                l["name"].as_str().unwrap_or(""),
                l["kind"].as_str().unwrap_or(""),
                l["elems"].as_u64().unwrap_or(0),
                l["secs"].as_f64().unwrap_or(0.0) * 1e3,
                l["bytes_sent"].as_u64().unwrap_or(0),
                l["bytes_recv"].as_u64().unwrap_or(0),
                l["rounds"].as_u64().unwrap_or(0),
                (l["module_secs"].as_f64().unwrap_or(0.0) + l["server_module_secs"].as_f64().unwrap_or(0.0)) * 1e3,
                l["macs"].as_u64().unwrap_or(0)
            );
        }
    }
}

fn client_json(model: &Model, inf: &runtime::Inference, o: &Options) -> serde_json::Value {
    let run = runtime::LocalRun {
        inference: inf.clone(),
        server_layers: Vec::new(),
        server_online_secs: 0.0,
        transport: "tcp".into(),
        tls: o.link.is_tls(),
        session_bytes: 0,
        session_socket_bytes: 0,
        peak_mem: None,
        untagged_peak_mem: None,
        mem_fit: None,
        client_profile_method: "none".into(),
    };
    runtime::run_json(model, &run, o)
}

/// `hush infer`: private inference against a server.
pub fn infer_main(a: InferOptions) -> Result<()> {
    needs_dealer_addr(&a.common, "hush infer")?;
    let mut o = options(&a.common, None, a.max_mem.as_ref())?;
    o.expect.bits = a.bits;
    o.expect.frac = a.frac;
    o.expect.chunk = a.chunk;
    o.expect.model_digest = a.model_digest.clone();
    o.expect.any_family_plan = match a.plan.as_deref() {
        None => false,
        Some("auto") => true,
        Some(f) => return Err(Error::Config(format!("--plan {f}: `hush infer` runs CNNs, which take --plan auto (the server's family per layer); plan files are for encoder graphs (`hush embed --connect --plan`)"))),
    };
    announce_link("hush infer", &o.link);
    let (shape, x) = npy::read(&a.input)?;
    let mut s = runtime::connect(&a.connect, &o)?;
    if s.model.input_range.is_none() {
        note_raw_input(&a.input, &x);
    }
    if s.proto != o.proto {
        eprintln!("hush infer: protocol family {} (the server's; this client has --proto auto)", s.proto);
        o.proto = s.proto.clone();
    }
    let items = inputs_of(&s.model, &shape, &x, a.batch)?;
    let mut outs = Vec::new();
    let n = items.len();
    for (i, it) in items.iter().enumerate() {
        let r = s.infer(&s.model.input_shape.clone(), it, crate::progress::layers(&format!("hush infer: input {}/{n}", i + 1)))?;
        let v = client_json(&s.model, &r, &o);
        if a.json {
            println!("{v}");
        } else {
            println!("input {}/{n}: {}", i + 1, describe_prediction(s.model.post, &r.logits));
            print_report(false, &v);
        }
        outs.push(r.logits);
    }
    let model = s.model.clone();
    s.close()?;
    write_out(&a.out, &model, &outs, a.batch)
}

/// Runs a batch of inputs securely with both parties in this process (one
/// session, server on a thread). Returns the logits and the last run's report.
pub fn run_secure_batch(model: Arc<Model>, items: &[Vec<f64>], o: &Options, tcp: bool, mut progress: impl FnMut(usize, usize)) -> Result<(Vec<Vec<f64>>, Option<serde_json::Value>)> {
    if items.len() == 1 {
        let shape = model.input_shape.clone();
        let run = runtime::run_local(model.clone(), &shape, &items[0], o, tcp, progress)?;
        let v = runtime::run_json(&model, &run, o);
        return Ok((vec![run.inference.logits], Some(v)));
    }
    let plan = Arc::new(Plan::new(&model, o.cfg)?);
    if let Some(b) = o.max_mem {
        // below the floor: refused before any channel exists
        crate::budget::fit(&model, &plan, &o.proto, o.chunk, o.predeal_mem, b)?;
    }
    let copts = hush_transport::ChannelOptions { profile: o.profile.clone(), ..Default::default() };
    let (a, b): (Box<dyn hush_transport::Channel>, Box<dyn hush_transport::Channel>) = if tcp {
        let (a, b) = hush_transport::peering::loopback_pair(copts, o.link.is_tls())?;
        (Box::new(a), Box::new(b))
    } else {
        let (a, b) = MemChannel::pair_with(copts);
        (Box::new(a), Box::new(b))
    };
    let (m2, p2, o2) = (model.clone(), plan.clone(), o.clone());
    let server = std::thread::spawn(move || {
        let mut a = a;
        runtime::serve_session(&mut a, &m2, &p2, &o2)
    });
    let limit = hush_transport::CpuLimit::apply(o.client_profile.cpu_share());
    let method = limit.method().to_string();
    let res = (|| -> Result<(Vec<Vec<f64>>, Option<serde_json::Value>)> {
        let mut s = runtime::ClientSession::start(hush_transport::Throttled { inner: b, limit }, o)?;
        let mut outs = Vec::with_capacity(items.len());
        let mut last = None;
        for (i, it) in items.iter().enumerate() {
            let r = s.infer(&model.input_shape, it, |_, _| {})?;
            let mut v = client_json(&model, &r, o);
            v["client_profile_method"] = json!(method);
            last = Some(v);
            outs.push(r.logits);
            progress(i + 1, items.len());
        }
        s.close()?;
        Ok((outs, last))
    })();
    let srv = server.join().map_err(|_| Error::Protocol("server thread panicked".into()))?;
    let r = res?;
    srv?;
    Ok(r)
}

/// A note on stderr when an input looks like raw integer data (e.g. uint8
/// pixels 0..255): hush computes on the values as given, and a model
/// trained on normalised inputs then predicts garbage without any error.
fn note_raw_input(path: &Path, x: &[f64]) {
    if let Some(line) = raw_input_note(path, x) {
        eprintln!("hush: note: {line}");
    }
}

/// The note of [`note_raw_input`], if `x` is all integers with one above 1.
pub fn raw_input_note(path: &Path, x: &[f64]) -> Option<String> {
    let max = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (max > 1.0 && x.iter().all(|v| v.fract() == 0.0)).then(|| {
        format!(
            "{} holds whole numbers up to {max} (raw pixels?); hush computes on them as given — if the model was trained on normalised inputs (e.g. pixels / 255), normalise them first",
            path.display()
        )
    })
}

/// `hush run`: both parties locally (or a plaintext executor with --exec).
pub fn run_main(a: RunOptions) -> Result<()> {
    let o = options(&a.common, Some(&a.fixed), a.max_mem.as_ref())?;
    let mut o = with_profile(o, &a.client_profile)?;
    let _dealer = runtime::local_dealer(&mut o)?;
    if !o.link.is_tls() {
        announce_link("hush", &o.link);
    }
    let model = Arc::new(Model::load(&a.model)?);
    let (shape, x) = npy::read(&a.input)?;
    if model.input_range.is_none() {
        note_raw_input(&a.input, &x);
    }
    let items = inputs_of(&model, &shape, &x, a.batch)?;
    let t = Instant::now();
    let outs: Vec<Vec<f64>> = match a.exec.as_str() {
        "reference" => {
            let plan = Plan::new(&model, o.cfg)?;
            items.iter().map(|it| reference::run_f64(&plan, it)).collect::<Result<_>>()?
        }
        "float" => items.iter().map(|it| crate::float_ref::run(&model, it)).collect::<Result<_>>()?,
        "secure" => {
            let tcp = match a.transport.as_str() {
                "tcp" => true,
                "mem" => false,
                t => return Err(Error::Config(format!("--transport {t}: choose tcp or mem"))),
            };
            let total = items.len();
            let bar = crate::progress::Bar::new(total as u64, "hush run", if total > 1 { "inputs" } else { "layers" });
            let show = total > 1 && !a.json && !crate::progress::enabled();
            let (outs, rep) = run_secure_batch(model.clone(), &items, &o, tcp, |d, n| {
                bar.set(d as u64, n as u64);
                if show && (d % 100 == 0 || d == n) {
                    eprintln!("hush run: {d}/{n} inputs");
                }
            })?;
            bar.finish();
            if let Some(v) = rep {
                if !a.json {
                    println!("private inference of {} input(s) with '{}' ({} layers), family {}, net {}:", total, model.name, model.nodes.len(), o.proto, o.profile.name);
                    println!("  prediction: {}", describe_prediction(model.post, outs.last().expect("one output")));
                }
                print_report(a.json, &v);
            }
            outs
        }
        e => return Err(Error::Config(format!("--exec {e}: choose secure, reference or float"))),
    };
    if a.exec != "secure" && !a.json {
        println!("{} executor: {} input(s) in {:.3} s; last prediction: {}", a.exec, outs.len(), t.elapsed().as_secs_f64(), describe_prediction(model.post, outs.last().expect("one output")));
    }
    write_out(&a.out, &model, &outs, a.batch)
}

/// `hush bench infer`: online and offline costs of one model.
/// `probe` measures each party's peak heap (the `hush` binary passes
/// hush-bench's counting allocator).
pub fn bench_infer_main(a: BenchInferOptions, probe: Option<runtime::MemProbe>) -> Result<()> {
    if a.model == "bert-base" || a.model == "minilm-l6" {
        return Err(Error::Config(format!("{}: the transformer benchmarks are in hush-bench (`hush bench infer` dispatches them)", a.model)));
    }
    if a.common.mode == "malicious-client" {
        return bench_malicious_client(a, probe);
    }
    if a.table {
        return bench_infer_table(a, probe);
    }
    let o = options(&a.common, Some(&a.fixed), a.max_mem.as_ref())?;
    let mut o = with_profile(o, &a.client_profile)?;
    if let Some(p) = probe {
        runtime::install_mem_probe(p);
    }
    let _dealer = runtime::local_dealer(&mut o)?;
    if !o.link.is_tls() {
        announce_link("hush", &o.link);
    }
    let model = Arc::new(crate::zoo::load(&a.model)?);
    // --plan auto: the family the cost model predicts fastest on this
    // profile (crate::cnn_plan), measured here before the run
    let plan_rep = match a.plan.as_deref() {
        None => None,
        Some("auto") => {
            let req = crate::cnn_plan::CnnPlanRequest { opts: o.clone(), net: o.profile.clone(), verify: false, verify_fixed: false };
            let (choice, rep) = crate::cnn_plan::plan_cnn(model.clone(), &req)?;
            o = choice.apply(&o);
            Some(rep)
        }
        Some(f) => return Err(Error::Config(format!("--plan {f}: {} is a CNN; CNNs take --plan auto (the family per model) or a --proto (plan files are for encoder graphs so far)", a.model))),
    };
    let tcp = a.transport == "tcp";
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(99));
    for _ in 0..a.repeat.max(1) {
        let x: Vec<f64> = (0..model.input_len()).map(|_| (p.next_u64() % 2000) as f64 / 1000.0 - 1.0).collect();
        let shape = model.input_shape.clone();
        let show = !a.json;
        let variants: Vec<Options> = if a.tls_overhead {
            let plain = Options { link: LinkConfig::insecure(), ..o.clone() };
            let tls = Options { link: resolve_link(&LinkFlags::default())?, ..o.clone() };
            vec![plain, tls]
        } else {
            vec![o.clone()]
        };
        let mut recs = Vec::new();
        for o in &variants {
            let tcp = tcp || a.tls_overhead;
            let bar = crate::progress::Bar::new(0, "hush bench infer", "layers");
            let show = show && !crate::progress::enabled();
            let run = runtime::run_local_probed(model.clone(), &shape, &x, o, tcp, |d, n| {
                bar.set(d as u64, n as u64);
                if show && (d % 10 == 0 || d == n) {
                    eprint!("\rhush bench infer: layer {d}/{n}");
                    if d == n {
                        eprintln!();
                    }
                }
            }, probe)?;
            let mut v = runtime::run_json(&model, &run, o);
            if let Some(p) = probe {
                v["peak_mem_method"] = json!(p.method);
            }
            v["plan"] = match &plan_rep {
                Some(rep) => json!({"choice": "auto", "family": rep["auto"]["family"], "mix": rep["auto"]["mix"], "fixed": rep["fixed"]}),
                None => json!({"choice": "preset", "mode": o.mode.name(), "family": o.proto}),
            };
            if let Some(rep) = &plan_rep {
                let pred = rep["auto"]["predicted_s"].as_f64().unwrap_or(f64::NAN);
                let meas = v["online_s"].as_f64().unwrap_or(f64::NAN) + v["offline_s"].as_f64().unwrap_or(f64::NAN);
                v["predicted_s"] = json!(pred);
                v["predicted_over_measured"] = json!(pred / meas);
            }
            v["params"] = json!(model.params());
            v["macs"] = json!(run.server_layers.iter().map(|l| l.macs).sum::<u64>());
            if a.check {
                let plan = Plan::new(&model, o.cfg)?;
                let r = reference::run_f64(&plan, &x)?;
                let maxdiff = r.iter().zip(&run.inference.logits).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                v["max_abs_diff_vs_reference"] = json!(maxdiff);
            }
            print_report(a.json, &v);
            recs.push(v);
        }
        if recs.len() == 2 {
            let f = |r: &serde_json::Value, k: &str| r.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
            let (p, t) = (&recs[0], &recs[1]);
            let o = json!({
                "bench": "infer-tls-overhead", "model": model.name, "net": p["net"], "mode": p["mode"],
                "wall_s": f(t, "online_s"), "online_s_tls": f(t, "online_s"), "online_s_plaintext": f(p, "online_s"),
                "online_time_overhead": f(t, "online_s") / f(p, "online_s") - 1.0,
                "bytes": f(t, "online_bytes"), "rounds": f(t, "rounds"), "setup_s": f(t, "offline_s"),
                "session_socket_bytes_tls": f(t, "session_socket_bytes"), "session_socket_bytes_plaintext": f(p, "session_socket_bytes"),
                "socket_byte_overhead": f(t, "session_socket_bytes") / f(p, "session_socket_bytes") - 1.0,
            });
            if a.json {
                println!("{o}");
            } else {
                println!(
                    "TLS overhead: online {:.4} s vs {:.4} s plaintext ({:+.1} %); session socket bytes {:+.2} %",
                    f(&o, "online_s_tls"),
                    f(&o, "online_s_plaintext"),
                    100.0 * f(&o, "online_time_overhead"),
                    100.0 * f(&o, "socket_byte_overhead")
                );
            }
        }
    }
    Ok(())
}

/// CRISP's own figures (§VI, Tables II and III; Apple M1 Pro, LAN, CKKS
/// linear layers, C++): (benchmark, model, online s, online MB, offline
/// s, offline MB).
const CRISP_PAPER: [(&str, &str, f64, f64, f64, f64); 2] = [("A", "minionn-mnist", 4.66, 49.11, 1.45, 5.0), ("B", "minionn-cifar", 22.44, 136.36, 16.37, 78.0)];

/// `hush bench infer --mode malicious-client` (`--table`: CRISP's
/// benchmarks A and B beside the paper's figures): CRISP (issue 14) over
/// the served session protocol ([`crate::crisp_serve`]) — both parties in
/// this process on their own threads, over TCP loopback with TLS 1.3
/// (ephemeral identities, pinned) unless `--transport mem` or `--insecure`,
/// and the dealer service: the one `--dealer` names (e.g. a `hush dealer`
/// process), else one started in this process (its own threads, reached
/// over TCP with TLS like an external one). Reports online and offline
/// time and bytes and the dealer links, and checks the logits against the
/// plaintext fixed-point reference (bit-exact expected).
fn bench_malicious_client(a: BenchInferOptions, probe: Option<runtime::MemProbe>) -> Result<()> {
    if a.tls_overhead || a.model == "bert-base" {
        return Err(Error::Config("--mode malicious-client: --tls-overhead and bert-base are not supported".into()));
    }
    if a.client_profile != "none" {
        return Err(Error::Config("--mode malicious-client: --client-profile is not wired yet".into()));
    }
    let mut o = options(&a.common, Some(&a.fixed), a.max_mem.as_ref())?;
    if let Some(p) = probe {
        runtime::install_mem_probe(p);
    }
    let external = a.common.dealer.clone();
    let _dealer = runtime::local_dealer(&mut o)?;
    let dealer_where = match &external {
        Some(d) => format!("external dealer at {d}"),
        None => format!("dealer service started in this process (threads), reached over TCP loopback{}", if o.link.is_tls() { " with TLS" } else { " (plaintext)" }),
    };
    let tcp = match a.transport.as_str() {
        "tcp" => true,
        "mem" => false,
        t => return Err(Error::Config(format!("--transport {t}: choose tcp or mem"))),
    };
    let link = if !tcp { "in-memory (network emulated)" } else if o.link.is_tls() { "TCP loopback, TLS 1.3 (ephemeral identities, both pinned)" } else { "TCP loopback, plaintext (--insecure)" };
    if !o.link.is_tls() {
        announce_link("hush", &o.link);
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string())).unwrap_or_else(|| "unknown".into());
    let models: Vec<String> = if a.table { a.models.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect() } else { vec![a.model.clone()] };
    let mut rows = Vec::new();
    for name in &models {
        let model = Arc::new(crate::zoo::load(name)?);
        let plan = Plan::new(&model, o.cfg)?;
        let mut p = hush_primitives::Prg::new(hush_primitives::Block(99));
        for _ in 0..a.repeat.max(1) {
            let x: Vec<f64> = (0..model.input_len()).map(|_| (p.next_u64() % 2000) as f64 / 1000.0 - 1.0).collect();
            if a.table && !a.json {
                eprint!("\rhush bench infer --table --mode malicious-client: {name} ...            ");
            }
            let run = runtime::run_local_probed(model.clone(), &model.input_shape.clone(), &x, &o, tcp, |_, _| {}, probe)?;
            let want = reference::run(&plan, &plan.encode_input(&x)?)?;
            let diff = plan.decode(&want).iter().zip(&run.inference.logits).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            let mut v = runtime::run_json(&model, &run, &o);
            let c = run.inference.report.crisp.clone().unwrap_or_default();
            v["underneath"] = json!("dealer");
            v["dealer"] = json!(dealer_where);
            v["link"] = json!(link);
            v["protocol"] = json!(if o.crisp.linear == "ckks" {
                "CRISP: MAC-carrying FSS ReLU/MaxPool/truncation, CKKS linear layers (value + i·MAC in one ciphertext, exact scale q/2^k; the dealer makes the ciphertexts of an authenticated mask, the server's HE product runs offline, online a MAC-checked opening), final MAC check"
            } else {
                "CRISP: MAC-carrying FSS ReLU/MaxPool/truncation, private-weight linear layers (dealer-dealt bilinear triples), final MAC check"
            });
            v["s"] = json!(o.crisp.s);
            v["crisp_linear"] = json!(o.crisp.linear);
            v["online_s"] = json!(c.online_s);
            v["offline_s"] = json!(c.offline_s);
            v["setup_s"] = json!(run.inference.report.offline_secs);
            v["offline_bytes"] = json!(c.offline_bytes);
            v["dealer_bytes_client"] = json!(c.dealer_bytes);
            v["dealer_requests_client"] = json!(c.dealer_requests);
            v["checked_openings"] = json!(c.checked_openings);
            v["check"] = json!("passed");
            v["offline_note"] = json!(if o.crisp.linear == "ckks" {
                "offline = MAC key, all dealt gate correlations, the RLWE key and the layers' masks (dealer link; the server also gets the ciphertexts) and the server's HE responses (server → client); offline_bytes counts the party link, dealer_bytes_client the client's dealer link"
            } else {
                "offline = MAC key, all dealt correlations (dealer link) and the masked weights W − A (server → client); offline_bytes counts the party link, dealer_bytes_client the client's dealer link"
            });
            v["max_abs_diff_vs_reference"] = json!(diff);
            v["bit_exact_vs_reference"] = json!(run.inference.logits == plan.decode(&want));
            v["cpu"] = json!(cpu);
            v["zoo_model"] = json!(name);
            if let Some((b, _, _, _, _, _)) = CRISP_PAPER.iter().find(|r| r.1 == name.as_str()) {
                v["crisp_benchmark"] = json!(b);
            }
            if a.table {
                v.as_object_mut().map(|m| m.remove("per_layer"));
                if a.json {
                    println!("{v}");
                }
            } else {
                print_report(a.json, &v);
                if !a.json {
                    println!(
                        "  malicious-client (s = {}): check passed over {} openings; offline {:.3} s, {} B party link, {} B client dealer link; logits {} the fixed-point reference; {link}; {dealer_where}",
                        o.crisp.s,
                        c.checked_openings,
                        c.offline_s,
                        c.offline_bytes,
                        c.dealer_bytes,
                        if diff == 0.0 { "equal" } else { "DIFFER from" }
                    );
                }
            }
            rows.push(v);
        }
    }
    if !a.table || a.json {
        return Ok(());
    }
    eprintln!();
    println!("hush bench infer --table --mode malicious-client — CRISP's benchmarks against a malicious client ({cpu}; both parties and the dealer on this machine; {link}; {dealer_where}; net {}; s = {}; one row per run)", o.profile.name, o.crisp.s);
    println!(
        "{:<3} {:<14} {:>9} {:>10} {:>7} {:>10} {:>11} {:>13} | {:>9} {:>10} {:>10} {:>11}",
        "", "model", "online s", "online MB", "rounds", "offline s", "offline MB", "dealer MB/pty", "CRISP s", "CRISP MB", "CRISP off s", "CRISP off MB"
    );
    for v in &rows {
        let name = v["zoo_model"].as_str().unwrap_or("");
        let paper = CRISP_PAPER.iter().find(|r| r.1 == name);
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<3} {:<14} {:>9.3} {:>10.2} {:>7} {:>10.2} {:>11.2} {:>13.1} | {:>9} {:>10} {:>10} {:>11}",
            paper.map(|p| p.0).unwrap_or("-"),
            name,
            f("online_s"),
            f("online_bytes") / 1e6,
            v["rounds"].as_u64().unwrap_or(0),
            f("offline_s"),
            f("offline_bytes") / 1e6,
            f("dealer_bytes_client") / 1e6,
            paper.map(|p| format!("{:.2}", p.2)).unwrap_or_else(|| "-".into()),
            paper.map(|p| format!("{:.2}", p.3)).unwrap_or_else(|| "-".into()),
            paper.map(|p| format!("{:.2}", p.4)).unwrap_or_else(|| "-".into()),
            paper.map(|p| format!("{:.0}", p.5)).unwrap_or_else(|| "-".into()),
        );
    }
    println!("online = the client's, from its input to the released logits (after the check); offline = MAC key, dealt correlations and masked weights;");
    if o.crisp.linear == "ckks" {
        println!("CRISP's figures: §VI Tables II-III (Apple M1 Pro, LAN, C++/SEAL). hush's linear layers here are CRISP's CKKS layers (exact scale), without");
        println!("CRISP's ZK proof of plaintext knowledge; the gate correlations come from a dealer that colludes with neither party (dealer MB column, per party).");
    } else {
        println!("CRISP's figures: §VI Tables II-III (Apple M1 Pro, LAN, C++/SEAL). Not like for like: CRISP's linear layers are CKKS (no third party),");
        println!("hush's here are dealer-dealt bilinear triples (a dealer that colludes with neither party; its links are the dealer MB column, per party).");
    }
    Ok(())
}

/// The papers' end-to-end figures (seconds; LAN, WAN, mobile) for a model:
/// (source, configuration, the hush mode it is beside, figures).
fn paper_rows(model: &str) -> Vec<(&'static str, &'static str, &'static str, [f64; 3])> {
    match model {
        "squeezenet" => vec![
            ("TAMI T4", "Cheetah (CPU)", "interactive", [101.0, 203.0, 317.0]),
            ("TAMI T4", "Cheetah + TAMI-MPC (FPGA)", "tee", [23.0, 43.0, 64.0]),
            ("SF T IV", "Cheetah (CPU)", "interactive", [129.0, 209.0, 285.0]),
            ("SF T IV", "Cheetah + SilentFlow (FPGA)", "silent", [38.0, 52.0, 60.0]),
        ],
        "resnet50" => vec![
            ("TAMI T4", "Cheetah (CPU)", "interactive", [168.0, 381.0, 525.0]),
            ("TAMI T4", "Cheetah + TAMI-MPC (FPGA)", "tee", [88.0, 97.0, 108.0]),
            ("SF T IV", "Cheetah (CPU)", "interactive", [500.0, 795.0, 1013.0]),
            ("SF T IV", "Cheetah + SilentFlow (FPGA)", "silent", [145.0, 216.0, 256.0]),
        ],
        _ => Vec::new(),
    }
}

/// `hush bench infer --table`: models × modes × networks.
fn bench_infer_table(a: BenchInferOptions, probe: Option<runtime::MemProbe>) -> Result<()> {
    if let Some(p) = probe {
        runtime::install_mem_probe(p);
    }
    let list = |s: &str| s.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect::<Vec<_>>();
    let (models, modes, nets) = (list(&a.models), list(&a.modes), list(&a.nets));
    let net_idx = |n: &str| match n {
        "lan" => Some(0),
        "wan" => Some(1),
        "mobile" => Some(2),
        _ => None,
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())).unwrap_or_default();
    let mut rows: Vec<serde_json::Value> = Vec::new();
    let cells = (models.len() * modes.len() * nets.len()) as u64;
    let table_bar = crate::progress::Bar::new(cells, "hush bench infer --table", "cells");
    for name in &models {
        let model = Arc::new(crate::zoo::load(name)?);
        let mut p = hush_primitives::Prg::new(hush_primitives::Block(99));
        let x: Vec<f64> = (0..model.input_len()).map(|_| (p.next_u64() % 2000) as f64 / 1000.0 - 1.0).collect();
        for mode in &modes {
            for net in &nets {
                let mut common = a.common.clone();
                common.mode = mode.clone();
                common.net = net.clone();
                common.dealer = None;
                common.dealer_pin = None;
                if mode == "interactive" || mode == "silent" {
                    if a.common.proto != "cf2" {
                        common.proto = "auto".into();
                    }
                } else if a.common.proto == "cf2" {
                    common.proto = "auto".into();
                }
                let o = options(&common, Some(&a.fixed), a.max_mem.as_ref())?;
                let mut o = with_profile(o, &a.client_profile)?;
                let _dealer = runtime::local_dealer(&mut o)?;
                table_bar.message(format!("{name} {mode} {net}"));
                if !a.json && !crate::progress::enabled() {
                    eprint!("\rhush bench infer --table: {name} {mode} {net} ...            ");
                }
                let run = runtime::run_local_probed(model.clone(), &model.input_shape.clone(), &x, &o, true, |_, _| {}, probe)?;
                let mut v = runtime::run_json(&model, &run, &o);
                v["cpu"] = json!(cpu);
                v["total_s"] = json!(v["online_s"].as_f64().unwrap_or(0.0) + v["offline_s"].as_f64().unwrap_or(0.0));
                v.as_object_mut().map(|m| m.remove("per_layer"));
                if a.json {
                    println!("{v}");
                }
                rows.push(v);
                table_bar.set(rows.len() as u64, cells);
            }
        }
    }
    table_bar.finish();
    if a.json {
        return Ok(());
    }
    if !crate::progress::enabled() {
        eprintln!();
    }
    println!("hush bench infer --table — both parties on this machine ({cpu}), TCP loopback with TLS, emulated networks; one run per cell");
    println!("{:<14} {:<12} {:<5} {:<7} {:>10} {:>10} {:>11} {:>7}", "model", "mode", "proto", "net", "online s", "total s", "online MB", "rounds");
    for v in &rows {
        println!(
            "{:<14} {:<12} {:<5} {:<7} {:>10.2} {:>10.2} {:>11.1} {:>7}",
            v["model"].as_str().unwrap_or(""),
            v["mode"].as_str().unwrap_or(""),
            v["proto"].as_str().unwrap_or(""),
            v["net"].as_str().unwrap_or(""),
            v["online_s"].as_f64().unwrap_or(0.0),
            v["total_s"].as_f64().unwrap_or(0.0),
            v["online_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            v["rounds"]
        );
    }
    let mut any = false;
    for name in &models {
        for (src, cfg, beside, f) in paper_rows(name) {
            if !any {
                println!("\npapers' end-to-end seconds (TAMI-MPC Table 4, SilentFlow Table IV), beside hush's total s:");
                println!("{:<14} {:<9} {:<28} {:<12} {:<7} {:>9} {:>9}", "model", "source", "configuration", "hush mode", "net", "paper s", "hush s");
                any = true;
            }
            for net in &nets {
                let Some(i) = net_idx(net) else { continue };
                let ours = rows.iter().find(|v| v["model"].as_str() == Some(name.as_str()) && v["mode"] == beside && v["net"].as_str() == Some(net.as_str())).and_then(|v| v["total_s"].as_f64());
                println!("{:<14} {:<9} {:<28} {:<12} {:<7} {:>9.0} {:>9}", name, src, cfg, beside, net, f[i], ours.map(|s| format!("{s:.1}")).unwrap_or_else(|| "-".into()));
            }
        }
    }
    if any {
        println!("like for like? interactive vs Cheetah (CPU): yes in protocol (HE linear layers, CrypTFlow2-style comparisons on Ferret), not in machine (both parties on 2 shared cores here, no weak client unless --client-profile);");
        println!("silent vs Cheetah + SilentFlow: same protocol shape, but the modules are simulated in software here, not FPGAs; tee vs Cheetah + TAMI-MPC: NOT like for like —");
        println!("hush's tee mode deals the linear layers from the modules (no HE), the paper runs Cheetah's HE linear layers.");
    }
    Ok(())
}

/// Finds the bundled models folder (`--models`, `$HUSH_MODELS`, ./models,
/// or next to the executable's repository).
pub fn models_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = explicit {
        cands.push(p.to_path_buf());
    }
    if let Ok(p) = std::env::var("HUSH_MODELS") {
        cands.push(PathBuf::from(p));
    }
    cands.push(PathBuf::from("models"));
    if let Ok(exe) = std::env::current_exe() {
        for anc in exe.ancestors().skip(1).take(5) {
            cands.push(anc.join("models"));
        }
    }
    cands
        .into_iter()
        .find(|p| p.join("mnist_cnn.hushm").is_file())
        .ok_or_else(|| Error::Io("bundled models not found (run from the repository root, or pass --models / set HUSH_MODELS)".into()))
}

/// `hush demo`: private inference of bundled MNIST samples on the bundled model.
pub fn demo_main(a: DemoOptions) -> Result<()> {
    let mut o = options(&a.common, None, None)?;
    let _dealer = runtime::local_dealer(&mut o)?;
    if !o.link.is_tls() {
        announce_link("hush", &o.link);
    }
    let dir = models_dir(a.models.as_deref())?;
    let model = Arc::new(Model::load(&dir.join("mnist_cnn.hushm"))?);
    let mut samples: Vec<(PathBuf, Option<u32>)> = std::fs::read_dir(dir.join("samples"))
        .map_err(|e| Error::Io(format!("{}: {e}", dir.join("samples").display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().map(|x| x == "npy").unwrap_or(false))
        .map(|p| {
            let label = p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.rsplit("label").next()).and_then(|l| l.parse().ok());
            (p, label)
        })
        .collect();
    samples.sort();
    if !a.json {
        println!("hush demo: private inference in {} mode — the client keeps its image, the server keeps its model.", o.mode.name());
        println!(
            "  model '{}' ({} layers, {} parameters), {} nonlinear family, ring 2^{} with {} fraction bits, net {}, TCP loopback",
            model.name,
            model.nodes.len(),
            model.params(),
            o.proto,
            o.cfg.bits,
            o.cfg.frac,
            o.profile.name
        );
        println!("  {}", mode_line(&o));
        println!();
        println!("  {:<28} {:>10} {:>18} {:>10} {:>10} {:>12} {:>7}", "sample", "true label", "private prediction", "online s", "offline s", "bytes", "rounds");
    }
    let mut correct = 0;
    for (p, label) in &samples {
        let (shape, x) = npy::read(p)?;
        let items = inputs_of(&model, &shape, &x, false)?;
        let run = runtime::run_local(model.clone(), &model.input_shape.clone(), &items[0], &o, true, |_, _| {})?;
        let v = runtime::run_json(&model, &run, &o);
        let pred = runtime::argmax(&run.inference.logits);
        if Some(pred as u32) == *label {
            correct += 1;
        }
        if a.json {
            let mut v = v;
            v["sample"] = json!(p.file_name().and_then(|s| s.to_str()));
            v["true_label"] = json!(label);
            v["prediction"] = json!(pred);
            println!("{v}");
        } else {
            println!(
                "  {:<28} {:>10} {:>18} {:>10.3} {:>10.3} {:>12} {:>7}",
                p.file_name().and_then(|s| s.to_str()).unwrap_or(""),
                label.map(|l| l.to_string()).unwrap_or("?".into()),
                pred,
                v["online_s"].as_f64().unwrap_or(0.0),
                v["offline_s"].as_f64().unwrap_or(0.0),
                v["online_bytes"].as_u64().unwrap_or(0),
                v["rounds"].as_u64().unwrap_or(0)
            );
        }
    }
    if !a.json {
        println!();
        println!("  {correct}/{} private predictions equal the true label.", samples.len());
        if let Ok(info) = std::fs::read_to_string(dir.join("mnist_cnn.json")) {
            if let Ok(j) = serde_json::from_str::<serde_json::Value>(&info) {
                println!(
                    "  model accuracy on the 2,000 held-out MNIST test images (trained on the other 8,000): float {}, fixed point {}",
                    j["float_accuracy_numpy"],
                    j["fixed_point_accuracy"]
                );
            }
        }
    }
    Ok(())
}
