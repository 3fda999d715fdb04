//! The flags of the private-inference commands — `hush serve`, `infer`,
//! `run`, `dealer`, `demo`, `embed` and `bench infer` — as clap argument
//! structs, each converted into `hush-inference`'s plain option struct of
//! the same shape ([`commands::ServeOptions`], ...,
//! [`encoder::EmbedCommandOptions`]), whose entry points do the work.
//! The doc comments here are the commands' help text.

use clap::Args;
use hush_inference::{commands, encoder};
use hush_transport::LinkFlags;
use std::path::PathBuf;

/// Options every party shares.
#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    /// Nonlinear protocol family: auto (tami in tee/dealer mode, cf2 in
    /// interactive/silent mode), fss (FSS gates) or tami (TAMI-MPC) in
    /// tee/dealer mode, cf2 (CrypTFlow2 on COTs) in interactive/silent mode.
    #[arg(long, default_value = "auto")]
    pub proto: String,
    /// Network profile to emulate: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    pub net: String,
    /// Where the trusted modules run: in-process or out-of-process
    /// (attestation simulated — gives no hardware protection).
    #[arg(long, default_value = "in-process")]
    pub tee: String,
    /// Per-party memory budget for pre-dealing (e.g. 256MiB; 0 disables):
    /// the modules deal the next inference's input-independent
    /// correlations (linear masks, comparison keys) before its input
    /// arrives; what does not fit is dealt during the online phase. A
    /// session uses the smaller of the two parties' budgets.
    #[arg(long, default_value = "256MiB")]
    pub predeal_mem: String,
    /// Trust mode: tee (each party's trusted module; attestation simulated —
    /// gives no hardware protection), dealer (a `hush dealer` service on a
    /// third host, trusted not to collude with either party), interactive
    /// (cryptography only: Cheetah HE linear layers, cf2 on Ferret COTs) or
    /// silent (HE linear layers, cf2 on SilentFlow COTs from the modules) or
    /// malicious-client (CRISP: MACs on every wire and a final consistency
    /// check against a client that deviates; a dealer underneath, never a
    /// simulated module). Both parties must use the same mode.
    #[arg(long, default_value = "tee")]
    pub mode: String,
    /// malicious-client mode: the MAC parameter s of the lifted ring
    /// Z_2^(ℓ+s) (default 40; a cheating client passes the check with
    /// probability ≤ (s+3)·2^-(s+2)). Both parties must use the same.
    #[arg(long, value_name = "S", default_value_t = hush_2pc::crisp::DEFAULT_S)]
    pub mac_s: u32,
    /// malicious-client mode: the linear-layer backend — dealt (default:
    /// dealer-dealt bilinear triples) or ckks (CRISP's CKKS layers; without
    /// a ZK proof of plaintext knowledge, which is not built, a malicious
    /// client can learn about one bit of a chosen linear function of the
    /// weights per revealed coefficient, undetected). Both parties must use
    /// the same.
    #[arg(long, value_name = "BACKEND", default_value = "dealt")]
    pub crisp_linear: String,
    /// Interactive/silent modes: the RLWE parameter set of the HE linear
    /// layers (he128-n8192-p50: N = 8192, four 50-bit primes, log q < 200,
    /// 128-bit HE standard, AVX-512 IFMA kernels; he128-n8192: three 60-bit
    /// primes, log q < 180; he128-n8192-wide). The server's choice wins.
    #[arg(long, default_value = hush_inference::he_linear::DEFAULT_PARAMS)]
    pub he_params: String,
    /// Interactive/silent modes: the COT source's LPN set (interactive:
    /// ferret-main, lpn-b13, lpn-b12, lpn-b11, lpn-b10; silent: lpn-b10).
    /// Default: the server picks the largest that a client's --max-mem
    /// holds. The server's choice wins.
    #[arg(long)]
    pub cot_set: Option<String>,
    /// Dealer mode: where `hush dealer` listens (HOST:PORT). `hush run`,
    /// `demo` and `bench infer` start a dealer in this process when omitted.
    #[arg(long, value_name = "ADDR")]
    pub dealer: Option<String>,
    /// Dealer mode: the dealer's fingerprint (sha256:HEX, printed by
    /// `hush dealer` at start); required with TLS (the default).
    #[arg(long, value_name = "sha256:HEX")]
    pub dealer_pin: Option<String>,
    /// Dealer mode: the attestation policy (TOML; docs/attestation.md) the
    /// dealer's hardware evidence (`hush dealer --attest snp|tdx`) must
    /// pass, bound to the dealer's TLS key — beside or in place of
    /// --dealer-pin. A dealer that fails is refused before any correlation
    /// is used, naming the failed leg.
    #[arg(long, value_name = "POLICY.toml")]
    pub dealer_attest: Option<PathBuf>,
    /// Tee mode: the attestation policy (TOML, docs/attestation.md) the
    /// peer's trusted module must pass (hush-tee-module --attest snp|tdx in
    /// a confidential VM), bound to its handshake key. A module that fails,
    /// or has no evidence (the simulated module), is refused before any
    /// correlation is used, naming the failed leg.
    #[arg(long, value_name = "POLICY.toml")]
    pub module_attest: Option<PathBuf>,
    /// INSECURE, reproducibility tests only (hidden): every random value of
    /// an encoder graph's interactive/silent run derives from this seed (64
    /// hex digits); both parties must give the same one.
    #[arg(long, value_name = "HEX", hide = true)]
    pub insecure_test_seed: Option<String>,
    #[command(flatten)]
    pub link: LinkFlags,
}

/// `hush dealer`: the dealer service of dealer mode.
#[derive(Args, Clone, Debug)]
pub struct DealerArgs {
    /// Address to listen on, e.g. 0.0.0.0:7100.
    #[arg(long, default_value = "127.0.0.1:7100")]
    pub listen: String,
    /// Close a session's connection after this many seconds of silence
    /// (its state is erased).
    #[arg(long, default_value_t = 600)]
    pub idle_timeout: u64,
    /// Most sessions held at once (more are refused with an error).
    #[arg(long, default_value_t = hush_tee::dealer::DEFAULT_MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Bytes of shares one session's dealing plan may hold computed ahead
    /// in this process (the server sends the rest of its dealing schedule;
    /// the dealer computes it before the client's input exists, up to
    /// this); 0 turns plans off.
    #[arg(long, default_value = "1GiB")]
    pub plan_mem: String,
    /// Most connections in their set-up (handshake, join); more are closed at once.
    #[arg(long, default_value_t = hush_tee::dealer::DEFAULT_MAX_PENDING)]
    pub max_pending: usize,
    /// Per session: bytes of shares held dealt-but-unclaimed for one role
    /// (computed on the other role's request). A role that asks for more
    /// while this much waits for its peer is held without computing, then
    /// refused (--ahead-wait). Each session's budget is what its server
    /// announces for its model; this is the cap (default 1GiB).
    #[arg(long, default_value = "1GiB")]
    pub session_mem: String,
    /// Seconds a request ahead of --session-mem is held for the peer to
    /// catch up before it is refused.
    #[arg(long, default_value_t = 60)]
    pub ahead_wait: u64,
    /// Most sessions opened from one source address at once.
    #[arg(long, default_value_t = hush_tee::dealer::DEFAULT_MAX_SESSIONS_PER_ADDR)]
    pub max_sessions_per_addr: usize,
    /// Refuse new sessions while the dealer's resident memory is at this
    /// size (e.g. 8G; `none`: no cap). Default: 3/4 of physical memory.
    #[arg(long, value_name = "BYTES")]
    pub max_mem: Option<String>,
    /// With --pin, only parties presenting a pinned certificate are served.
    #[command(flatten)]
    pub link: LinkFlags,
    /// Hardware attestation for parties that ask (--dealer-attest): snp or
    /// tdx (a report from configfs-tsm inside an AMD SEV-SNP / Intel TDX
    /// confidential VM, REPORT_DATA binding this dealer's TLS key and the
    /// party's nonce), or test:DIR (TESTS ONLY: a test root's signature,
    /// no hardware protection). Needs TLS and refuses --identity (the key
    /// must be made inside the VM).
    #[arg(long, value_name = "snp|tdx|test:DIR")]
    pub attest: Option<String>,
    /// configfs-tsm's report directory (default /sys/kernel/config/tsm/report).
    #[arg(long, value_name = "DIR")]
    pub attest_tsm: Option<PathBuf>,
    /// --attest tdx: the QuoteCollateralV3 JSON (from a PCCS) served beside
    /// each quote, so parties verify without network access.
    #[arg(long, value_name = "FILE")]
    pub attest_collateral: Option<PathBuf>,
}

/// Fixed-point options (the server's values are used in a session).
#[derive(Args, Clone, Debug)]
pub struct FixedArgs {
    /// Ring size ℓ (bits, ≤ 64).
    #[arg(long, default_value_t = 37)]
    pub bits: u32,
    /// Fraction bits.
    #[arg(long, default_value_t = 12)]
    pub frac: u32,
    /// Largest nonlinear batch (elements): bounds dealt key material per
    /// step (default 65536; 262144 for cf2 in the interactive and silent
    /// modes, whose chunks cost sequential flights).
    #[arg(long)]
    pub chunk: Option<usize>,
}

#[derive(Args, Clone, Debug)]
pub struct ServeArgs {
    /// Model: a .hushm file, or .onnx — a CNN (converted in this process by
    /// the built-in importer) or a transformer encoder as torch.onnx.export
    /// or optimum write it (served by the graph runtime in tee or dealer
    /// mode; clients connect with `hush embed --connect`).
    #[arg(long)]
    pub model: PathBuf,
    /// Address to listen on, e.g. 0.0.0.0:7000.
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: String,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub fixed: FixedArgs,
    /// Most concurrent client sessions (more are refused with an error).
    #[arg(long, default_value_t = 64)]
    pub max_sessions: usize,
    /// Most concurrent sessions from one client address (more are refused;
    /// in dealer and malicious-client modes each session holds a dealer
    /// session).
    #[arg(long, default_value_t = hush_inference::runtime::DEFAULT_MAX_SESSIONS_PER_ADDR)]
    pub max_sessions_per_addr: usize,
    /// Per-session memory cap (e.g. 512M): sessions are fitted to it
    /// (chunk, pre-dealing) and refused when the model cannot run within
    /// it. Default: none.
    #[arg(long, value_name = "BYTES")]
    pub session_mem: Option<String>,
    /// Global memory cap over all sessions' estimated peaks (e.g. 8G;
    /// `none`: no cap); a session that would exceed it is refused.
    /// Default: 3/4 of physical memory.
    #[arg(long, value_name = "BYTES")]
    pub total_mem: Option<String>,
    /// Most connections in their set-up (greeting, TLS handshake); more are
    /// closed at once.
    #[arg(long, default_value_t = hush_inference::limits::DEFAULT_MAX_PENDING)]
    pub max_pending: usize,
    /// The plan: `auto` (encoder graphs: the cost model's choice per
    /// layer, measured once per input shape; CNNs: the comparison family
    /// per layer, predicted for --net, which clients run with `hush infer
    /// --plan auto`) or, for encoder graphs, a plan file (TOML; see
    /// docs/graph-runtime.md). Default: the mode's preset.
    #[arg(long, value_name = "auto|FILE.toml")]
    pub plan: Option<String>,
}

#[derive(Args, Clone, Debug)]
pub struct InferArgs {
    /// Server address.
    #[arg(long)]
    pub connect: String,
    /// Input .npy (the model's input shape, optionally with a leading 1;
    /// with --batch, a stack of inputs).
    #[arg(long)]
    pub input: PathBuf,
    /// Where to write the logits (.npy, float64).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Treat the first axis of the input as a batch of independent inputs.
    #[arg(long)]
    pub batch: bool,
    /// Client peak-memory budget, e.g. 256MiB (refuses models that need more).
    #[arg(long)]
    pub max_mem: Option<String>,
    /// Print one JSON object with the costs.
    #[arg(long)]
    pub json: bool,
    /// Require the server's ring size ℓ (bits); a server with another is refused, naming both.
    #[arg(long)]
    pub bits: Option<u32>,
    /// Require the server's fraction bits; a server with others is refused, naming both.
    #[arg(long)]
    pub frac: Option<u32>,
    /// Require the server's nonlinear chunk; a server with another is refused, naming both.
    #[arg(long)]
    pub chunk: Option<usize>,
    /// Require the server's model: the digest `hush serve` prints at start
    /// (sha256:HEX of the public architecture); another is refused, naming both.
    #[arg(long, value_name = "sha256:HEX")]
    pub model_digest: Option<String>,
    /// The plan this client expects: `auto` (the comparison family per
    /// layer the server chose with `hush serve --plan auto`). Default: the
    /// mode's preset (a server running a per-layer plan is refused at the
    /// hello, naming both).
    #[arg(long, value_name = "auto")]
    pub plan: Option<String>,
}

#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// Model: a .hushm file, or .onnx (converted in this process by the built-in importer).
    #[arg(long)]
    pub model: PathBuf,
    /// Input .npy.
    #[arg(long)]
    pub input: PathBuf,
    /// Where to write the logits (.npy, float64).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub fixed: FixedArgs,
    /// Weak-client profile for the client party: weak (TAMI-MPC's 800 MHz,
    /// 512 MB client), tiny (SilentFlow's 500 MHz, 256 MB) or none. Limits
    /// the client thread's CPU share (cgroup quota, else a duty-cycle
    /// throttle) and sets --max-mem to the profile's memory unless smaller.
    #[arg(long, default_value = "none")]
    pub client_profile: String,
    /// secure (two parties), reference (plaintext fixed point) or float (f64).
    #[arg(long, default_value = "secure")]
    pub exec: String,
    /// Treat the first axis of the input as a batch of independent inputs.
    #[arg(long)]
    pub batch: bool,
    /// Transport between the two local parties: mem or tcp (loopback).
    #[arg(long, default_value = "tcp")]
    pub transport: String,
    /// Client peak-memory budget, e.g. 512MiB: chunk and pre-dealing sizes
    /// are fitted to it, a budget below the model's floor is refused before
    /// anything is sent, and it is enforced as measured peak.
    #[arg(long)]
    pub max_mem: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
pub struct BenchInferArgs {
    /// minionn-mnist, minionn-cifar, squeezenet, resnet50, bert-base (random
    /// weights), minilm-l6 (the real all-MiniLM-L6-v2 from scripts/minilm.py's
    /// graph), or a model file.
    #[arg(long, default_value = "minionn-mnist")]
    pub model: String,
    /// bert-base, minilm-l6: sequence length.
    #[arg(long, default_value_t = 128)]
    pub seq: usize,
    /// bert-base: run only the first N of its 12 layers (quick runs).
    #[arg(long)]
    pub layers: Option<usize>,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub fixed: FixedArgs,
    #[arg(long, default_value = "tcp")]
    pub transport: String,
    /// Client peak-memory budget, e.g. 512MiB: chunk and pre-dealing sizes
    /// are fitted to it, a budget below the model's floor is refused before
    /// anything is sent, and the client's measured peak is enforced.
    #[arg(long)]
    pub max_mem: Option<String>,
    /// Weak-client profile for the client party: weak (TAMI-MPC's 800 MHz,
    /// 512 MB client), tiny (SilentFlow's 500 MHz, 256 MB) or none.
    #[arg(long, default_value = "none")]
    pub client_profile: String,
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Also check the secure logits against the plaintext fixed-point reference.
    #[arg(long)]
    pub check: bool,
    /// Run each repetition twice over TCP, plaintext then TLS, and report
    /// TLS's overhead (online time and session socket bytes) beside the
    /// plaintext figures.
    #[arg(long)]
    pub tls_overhead: bool,
    /// Print TAMI-MPC Table 4's and SilentFlow Table IV's shape: models ×
    /// modes × networks, online and total time, bytes, rounds, with the
    /// papers' figures beside (and what is and is not like for like).
    #[arg(long)]
    pub table: bool,
    /// With --table: the models (comma-separated).
    #[arg(long, default_value = "minionn-mnist,minionn-cifar")]
    pub models: String,
    /// With --table: the modes (comma-separated; dealer mode runs a dealer
    /// in this process).
    #[arg(long, default_value = "tee,dealer,interactive,silent")]
    pub modes: String,
    /// With --table: the network profiles (comma-separated).
    #[arg(long, default_value = "lan,wan,mobile")]
    pub nets: String,
    #[arg(long)]
    pub json: bool,
    /// The plan: `auto` (encoder graphs: a backend per layer; CNNs: the
    /// mode's comparison family predicted fastest on --net, see `hush
    /// plan`) or, for encoder graphs, a plan file (TOML); default: the
    /// mode's preset.
    #[arg(long, value_name = "auto|FILE.toml")]
    pub plan: Option<String>,
}

#[derive(Args, Clone, Debug)]
pub struct DemoArgs {
    /// Folder with mnist_cnn.hushm and samples/ (default: the repository's models/).
    #[arg(long)]
    pub models: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
    #[arg(long)]
    pub json: bool,
}

/// `hush embed`: private sentence embeddings (both parties in this process).
#[derive(Args, Clone, Debug)]
pub struct EmbedArgs {
    /// The encoder: an .onnx graph as torch.onnx.export or optimum write it
    /// (run by the graph runtime; the first output is written), or one with
    /// Hugging Face parameter names and `hush.encoder` metadata as
    /// scripts/minilm.py writes it (mean-pooled, normalised embeddings).
    #[arg(long, required_unless_present = "connect")]
    pub model: Option<PathBuf>,
    /// Run with a remote server (`hush serve --model encoder.onnx`) instead
    /// of both parties in this process: HOST:PORT.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "model")]
    pub connect: Option<String>,
    /// Token ids (.npy, sentences × padded length, integers; \[CLS\] … \[SEP\]).
    #[arg(long, required_unless_present = "text", default_value = "(--text)", hide_default_value = true)]
    pub ids: PathBuf,
    /// Attention mask (.npy, same shape, 1 for real tokens then 0 for padding).
    #[arg(long, required_unless_present = "text", default_value = "(--text)", hide_default_value = true)]
    pub mask: PathBuf,
    /// Token types (.npy, same shape) for graphs with a `token_type_ids`
    /// input (zeros when absent).
    #[arg(long)]
    pub token_types: Option<PathBuf>,
    /// A sentence to embed, instead of --ids/--mask (repeat for several):
    /// tokenised here with the model's Hugging Face tokenizer.json.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["ids", "mask", "token_types"])]
    pub text: Vec<String>,
    /// The tokenizer for --text (a Hugging Face tokenizer.json); default:
    /// tokenizer.json next to --model (needed with --connect).
    #[arg(long, value_name = "PATH", requires = "text")]
    pub tokenizer: Option<PathBuf>,
    /// With --text: at most this many tokens per sentence, special tokens
    /// included (longer sentences are cut).
    #[arg(long, value_name = "N", default_value_t = 128, requires = "text")]
    pub max_len: usize,
    /// Where to write the embeddings (.npy, sentences × hidden, float64).
    #[arg(long)]
    pub out: PathBuf,
    /// Ring size ℓ (the encoder's operators need 64).
    #[arg(long, default_value_t = 64)]
    pub bits: u32,
    /// Fraction bits (8..=12).
    #[arg(long, default_value_t = 12)]
    pub frac: u32,
    /// Cap on sentences × padded length per two-party batch.
    #[arg(long, default_value_t = hush_inference::encoder::DEFAULT_BATCH_TOKENS)]
    pub batch_tokens: usize,
    /// Also compute the plaintext fixed-point reference and report the
    /// largest difference.
    #[arg(long)]
    pub check: bool,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// The graph output to compute and reveal (encoder graphs; default:
    /// the graph's first output; no other output is computed or revealed).
    #[arg(long, value_name = "NAME")]
    pub output: Option<String>,
    /// With --connect: the plan this client expects — `auto` (any plan
    /// sound for the mode, as the server chose it) or a plan file (TOML);
    /// a server running another plan is refused at the hello. Default: the
    /// mode's preset.
    #[arg(long, value_name = "auto|FILE.toml")]
    pub plan: Option<String>,
    /// Mode (tee or dealer: encoder graphs; tee: hush.encoder graphs),
    /// family (tami or fss; auto = tami), links and dealer.
    #[command(flatten)]
    pub common: CommonArgs,
}

// ---- into the library's options ------------------------------------------------------

impl From<CommonArgs> for commands::CommonOptions {
    fn from(a: CommonArgs) -> Self {
        commands::CommonOptions {
            proto: a.proto,
            net: a.net,
            tee: a.tee,
            predeal_mem: a.predeal_mem,
            mode: a.mode,
            mac_s: a.mac_s,
            crisp_linear: a.crisp_linear,
            he_params: a.he_params,
            cot_set: a.cot_set,
            dealer: a.dealer,
            dealer_pin: a.dealer_pin,
            dealer_attest: a.dealer_attest,
            module_attest: a.module_attest,
            insecure_test_seed: a.insecure_test_seed,
            link: a.link,
        }
    }
}

impl From<DealerArgs> for commands::DealerOptions {
    fn from(a: DealerArgs) -> Self {
        commands::DealerOptions {
            listen: a.listen,
            idle_timeout: a.idle_timeout,
            max_sessions: a.max_sessions,
            plan_mem: a.plan_mem,
            max_pending: a.max_pending,
            session_mem: a.session_mem,
            ahead_wait: a.ahead_wait,
            max_sessions_per_addr: a.max_sessions_per_addr,
            max_mem: a.max_mem,
            link: a.link,
            attest: a.attest,
            attest_tsm: a.attest_tsm,
            attest_collateral: a.attest_collateral,
        }
    }
}

impl From<FixedArgs> for commands::FixedOptions {
    fn from(a: FixedArgs) -> Self {
        commands::FixedOptions {
            bits: a.bits,
            frac: a.frac,
            chunk: a.chunk,
        }
    }
}

impl From<ServeArgs> for commands::ServeOptions {
    fn from(a: ServeArgs) -> Self {
        commands::ServeOptions {
            model: a.model,
            listen: a.listen,
            common: a.common.into(),
            fixed: a.fixed.into(),
            max_sessions: a.max_sessions,
            max_sessions_per_addr: a.max_sessions_per_addr,
            session_mem: a.session_mem,
            total_mem: a.total_mem,
            max_pending: a.max_pending,
            plan: a.plan,
        }
    }
}

impl From<InferArgs> for commands::InferOptions {
    fn from(a: InferArgs) -> Self {
        commands::InferOptions {
            connect: a.connect,
            input: a.input,
            out: a.out,
            common: a.common.into(),
            batch: a.batch,
            max_mem: a.max_mem,
            json: a.json,
            bits: a.bits,
            frac: a.frac,
            chunk: a.chunk,
            model_digest: a.model_digest,
            plan: a.plan,
        }
    }
}

impl From<RunArgs> for commands::RunOptions {
    fn from(a: RunArgs) -> Self {
        commands::RunOptions {
            model: a.model,
            input: a.input,
            out: a.out,
            common: a.common.into(),
            fixed: a.fixed.into(),
            client_profile: a.client_profile,
            exec: a.exec,
            batch: a.batch,
            transport: a.transport,
            max_mem: a.max_mem,
            json: a.json,
        }
    }
}

impl From<BenchInferArgs> for commands::BenchInferOptions {
    fn from(a: BenchInferArgs) -> Self {
        commands::BenchInferOptions {
            model: a.model,
            seq: a.seq,
            layers: a.layers,
            common: a.common.into(),
            fixed: a.fixed.into(),
            transport: a.transport,
            max_mem: a.max_mem,
            client_profile: a.client_profile,
            repeat: a.repeat,
            check: a.check,
            tls_overhead: a.tls_overhead,
            table: a.table,
            models: a.models,
            modes: a.modes,
            nets: a.nets,
            json: a.json,
            plan: a.plan,
        }
    }
}

impl From<DemoArgs> for commands::DemoOptions {
    fn from(a: DemoArgs) -> Self {
        commands::DemoOptions {
            models: a.models,
            common: a.common.into(),
            json: a.json,
        }
    }
}

impl From<EmbedArgs> for encoder::EmbedCommandOptions {
    fn from(a: EmbedArgs) -> Self {
        encoder::EmbedCommandOptions {
            model: a.model,
            connect: a.connect,
            ids: a.ids,
            mask: a.mask,
            token_types: a.token_types,
            text: a.text,
            tokenizer: a.tokenizer,
            max_len: a.max_len,
            out: a.out,
            bits: a.bits,
            frac: a.frac,
            batch_tokens: a.batch_tokens,
            check: a.check,
            json: a.json,
            output: a.output,
            plan: a.plan,
            common: a.common.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Shared {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        fixed: FixedArgs,
    }

    /// The flags' defaults are the library's `Default`s: a library caller
    /// that starts from `CommonOptions::default()` runs what `hush` runs
    /// without flags.
    #[test]
    fn flag_defaults_are_the_library_defaults() {
        let s = Shared::try_parse_from(["t"]).unwrap();
        let (c, f): (commands::CommonOptions, commands::FixedOptions) = (s.common.into(), s.fixed.into());
        assert_eq!(format!("{c:?}"), format!("{:?}", commands::CommonOptions::default()));
        assert_eq!(format!("{f:?}"), format!("{:?}", commands::FixedOptions::default()));
        // and a flag given reaches its field
        let s = Shared::try_parse_from(["t", "--mode", "dealer", "--frac", "10", "--insecure"]).unwrap();
        let (c, f): (commands::CommonOptions, commands::FixedOptions) = (s.common.into(), s.fixed.into());
        assert_eq!((c.mode.as_str(), c.link.insecure, f.frac), ("dealer", true, 10));
    }
}
