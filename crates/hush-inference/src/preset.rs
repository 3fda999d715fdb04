//! Trust modes as **presets** of one plan (issue 28, item 2).
//!
//! A mode names where the correlations come from and which protocol each
//! kind of operator runs: the provider (the parties' own trusted modules,
//! a dealer, or none), the linear backend of CNN layers (module-dealt, HE,
//! or CRISP's authenticated ones), the comparison families it allows and
//! picks by default, the COT source under `cf2`, the engine (semi-honest or
//! CRISP's malicious-client checks) and the transformer plan
//! ([`crate::graph_run::GraphOptions`]). [`Mode::preset`] is the only
//! place a mode is matched to decide what a session runs. The session code
//! ([`crate::runtime`], [`crate::graph_serve`], [`crate::crisp_serve`])
//! never asks which mode it runs: it runs what the provider constructors
//! ([`crate::provider`]: modules, dealer sessions, COT sources and HE keys,
//! and the engine each builds for a CNN session) return. The only other
//! code that reads the preset validates a plan ([`Mode::check_family`],
//! [`Mode::check_family_plan`], and
//! [`crate::graph_run::GraphOptions::validate`], which
//! refuses, by step, a module-dealt layer with a dealer as the provider).
//!
//! | mode | provider | CNN linear | families (default) | COTs | engine | transformer plan |
//! |---|---|---|---|---|---|---|
//! | `tee` | own modules (simulated) | module-dealt | fss, tami (tami) | — | semi-honest | module-dealt linear, bound-sized comparisons |
//! | `dealer` | dealer | module-dealt (the dealer holds W; `hush plan` says so) | fss, tami (tami) | — | semi-honest | one-sided weight triples, public comparison bounds (the dealer never sees W) |
//! | `interactive` | none | HE (Cheetah) | cf2 | Ferret | semi-honest | HE linear layers and embeddings, every other correlation made over COTs, cf2, bound-sized comparisons |
//! | `silent` | SilentFlow modules inside the COT source | HE (Cheetah) | cf2 | SilentFlow | semi-honest | the interactive plan on SilentFlow COTs: HE linear layers, every other correlation made over the modules' COTs, cf2 |
//! | `malicious-client` | dealer | CRISP (dealt bilinear triples or CKKS) | crisp | — | CRISP | not implemented |

use crate::engine;
use crate::{Error, Result};
use hush_transport::Fingerprint;

/// Where a mode's correlations come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Each party's own trusted module; the modules agree a seed.
    OwnModules,
    /// The dealer service (a third party that colludes with neither).
    Dealer,
    /// No module for the engine (the HE modes: COTs from OT, or from the
    /// SilentFlow modules inside the COT source).
    None,
}

/// How a CNN's weighted linear layers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnnLinear {
    /// Module-dealt masks ([`crate::linear`]): the weights go to the
    /// provider's module (the server's own in tee mode, the dealer's in
    /// dealer mode).
    Module,
    /// Cheetah's HE protocol ([`crate::he_linear`]).
    He,
    /// CRISP's authenticated linear layers ([`crate::crisp_run`]).
    Crisp,
}

/// The COT source under `cf2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cot {
    Ferret,
    Silent,
}

/// The engine a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    SemiHonest,
    /// CRISP against a malicious client.
    Crisp,
}

/// The transformer plan a mode calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformerPreset {
    /// [`crate::graph_run::GraphOptions::tee`].
    Tee,
    /// [`crate::graph_run::GraphOptions::dealer`].
    Dealer,
    /// [`crate::graph_run::GraphOptions::interactive`].
    Interactive,
    /// [`crate::graph_run::GraphOptions::interactive`] with the SilentFlow
    /// COT source ([`crate::graph_run::InteractiveSetup::silent`]): the same
    /// protocols, the COTs expanded by the parties' SilentFlow modules
    /// instead of Ferret's interactive LPN set-up.
    Silent,
}

/// What a mode runs (see the table in the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    pub mode: &'static str,
    pub provider: Provider,
    pub linear: CnnLinear,
    pub families: &'static [&'static str],
    pub default_family: &'static str,
    pub cot: Option<Cot>,
    pub engine: Engine,
    /// `None`: encoder graphs are not implemented in this mode.
    pub transformer: Option<TransformerPreset>,
}

impl Preset {
    /// Whether the CNN linear layers are HE (nothing of them is dealt).
    pub fn he(&self) -> bool {
        self.linear == CnnLinear::He
    }
    /// Whether a dealer provides the correlations.
    pub fn dealer(&self) -> bool {
        self.provider == Provider::Dealer
    }
    /// What a client's measured heap includes besides its session (for
    /// records; `tee`: where the modules run).
    pub fn client_holds(&self, tee: &str) -> &'static str {
        let in_proc = tee == "in-process";
        match (self.provider, self.cot, self.engine) {
            (_, _, Engine::Crisp) => ", its authenticated shares and all of one inference's dealt FSS keys and triples; not the dealer",
            (Provider::OwnModules, _, _) if in_proc => ", and its in-process module",
            (Provider::OwnModules, _, _) => "; not its out-of-process module (another process)",
            (Provider::Dealer, _, _) => "; not the dealer (a third party, threads of this process in local runs)",
            (Provider::None, Some(Cot::Silent), _) if in_proc => ", its RLWE keys and ciphertexts, and its COT sources with their in-process SilentFlow modules",
            (Provider::None, Some(Cot::Silent), _) => ", its RLWE keys and ciphertexts, and its COT sources; not their out-of-process modules",
            (Provider::None, _, _) => ", its RLWE keys and ciphertexts, and its COT sources (Ferret, both directions)",
        }
    }

    /// Whether the engine deals correlations ahead of the input through a
    /// module or dealer (pre-dealing, look-ahead, dealing plans).
    pub fn deals(&self) -> bool {
        self.provider != Provider::None && self.engine == Engine::SemiHonest
    }
}

/// Where the correlations come from (VISION.md "Trust modes").
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Each party's trusted module (simulated attestation — gives no
    /// hardware protection); the modules agree a seed over the parties' link.
    #[default]
    Tee,
    /// The dealer service at `addr` (`hush dealer`), reached over TLS with
    /// the dealer pinned to `pin` (else to a `--pin ADDR=` entry for
    /// `addr`). Trusted not to collude with either party; see
    /// [`hush_tee::dealer`] for what it can and cannot learn.
    Dealer { addr: String, pin: Option<Fingerprint> },
    /// Cryptography only: Cheetah's HE linear layers ([`crate::he_linear`],
    /// the client holds the RLWE secret key) and the `cf2` comparisons on
    /// Ferret COTs. No trusted party of any kind.
    Interactive,
    /// SilentFlow's end-to-end configuration (Table IV): the same HE linear
    /// layers, and `cf2` on COTs the parties' modules expand silently from
    /// an agreed seed (simulated attestation — gives no hardware
    /// protection: the COT correlations then rest on the simulation).
    Silent,
    /// CRISP against a **malicious client** ([`crate::crisp_run`],
    /// [`crate::crisp_serve`]): authenticated shares, MAC-carrying gates and
    /// the final consistency check, with the correlations (μ, FSS keys,
    /// masks, bilinear triples) from the dealer service at `addr` (pinned
    /// like [`Mode::Dealer`]'s) — the dealer must collude with neither
    /// party. The server is assumed semi-honest. No trusted module
    /// underneath: see the trust paragraph of [`crate::crisp_run`] for why
    /// a simulated module is refused rather than warned about.
    MaliciousClient { addr: String, pin: Option<Fingerprint> },
}

impl Mode {
    /// The mode's preset: **the** place a mode is turned into what a
    /// session runs (see the module docs).
    pub fn preset(&self) -> Preset {
        match self {
            Mode::Tee => Preset { mode: "tee", provider: Provider::OwnModules, linear: CnnLinear::Module, families: engine::FAMILIES, default_family: "tami", cot: None, engine: Engine::SemiHonest, transformer: Some(TransformerPreset::Tee) },
            Mode::Dealer { .. } => Preset { mode: "dealer", provider: Provider::Dealer, linear: CnnLinear::Module, families: engine::FAMILIES, default_family: "tami", cot: None, engine: Engine::SemiHonest, transformer: Some(TransformerPreset::Dealer) },
            Mode::Interactive => Preset { mode: "interactive", provider: Provider::None, linear: CnnLinear::He, families: engine::HE_FAMILIES, default_family: "cf2", cot: Some(Cot::Ferret), engine: Engine::SemiHonest, transformer: Some(TransformerPreset::Interactive) },
            Mode::Silent => Preset { mode: "silent", provider: Provider::None, linear: CnnLinear::He, families: engine::HE_FAMILIES, default_family: "cf2", cot: Some(Cot::Silent), engine: Engine::SemiHonest, transformer: Some(TransformerPreset::Silent) },
            Mode::MaliciousClient { .. } => Preset { mode: "malicious-client", provider: Provider::Dealer, linear: CnnLinear::Crisp, families: &["crisp"], default_family: "crisp", cot: None, engine: Engine::Crisp, transformer: None },
        }
    }

    pub fn name(&self) -> &'static str {
        self.preset().mode
    }

    /// The dealer of `dealer` and `malicious-client` mode: its address and pin.
    pub fn dealer(&self) -> Option<(&str, Option<Fingerprint>)> {
        match self {
            Mode::Dealer { addr, pin } | Mode::MaliciousClient { addr, pin } => Some((addr, *pin)),
            _ => None,
        }
    }

    /// Whether the linear layers are HE (`interactive`, `silent`) rather
    /// than module-dealt (`tee`, `dealer`).
    pub fn he(&self) -> bool {
        self.preset().he()
    }

    /// The nonlinear families this mode runs (`--proto`).
    pub fn families(&self) -> &'static [&'static str] {
        self.preset().families
    }

    /// The family `--proto auto` picks: `tami` in `tee`/`dealer` (TAMI-MPC's
    /// one-round comparison: online SqueezeNet 2.8 s vs 28 s for `fss`
    /// in tee mode on this machine kind, ResNet-50 10 s vs minutes of FSS
    /// key generation, and a twentieth of `fss`'s bytes on a dealer's
    /// links), `cf2` in the HE modes. `fss` (exact truncation, one round
    /// per gate) stays a `--proto` away.
    pub fn default_family(&self) -> &'static str {
        self.preset().default_family
    }

    /// Checks `proto` against the mode (`auto` is resolved by the caller).
    pub fn check_family(&self, proto: &str) -> Result<()> {
        if self.families().contains(&proto) {
            return Ok(());
        }
        let known = engine::FAMILIES.contains(&proto) || engine::HE_FAMILIES.contains(&proto) || proto == "crisp";
        Err(Error::Config(if known {
            format!("--proto {proto} does not run in --mode {} (this mode runs {})", self.name(), self.families().join(", "))
        } else {
            format!("unknown protocol family '{proto}' (--mode {} runs {})", self.name(), self.families().join(", "))
        }))
    }

    /// Plan validation for a CNN's per-layer family plan: it mixes
    /// [`engine::MIX_FAMILIES`], which only the dealt families' modes run
    /// (and only with one of them as `--proto`). The refusal names both.
    pub fn check_family_plan(&self, proto: &str) -> std::result::Result<(), String> {
        if self.he() || !engine::MIX_FAMILIES.contains(&proto) {
            return Err(format!("a per-layer family plan mixes {:?} (tee and dealer modes); --mode {} --proto {proto} cannot run it", engine::MIX_FAMILIES, self.name()));
        }
        Ok(())
    }

    /// The family chunk a mode runs when none was chosen: a chunk left at
    /// the dealt families' default ([`engine::DEFAULT_CHUNK`]) becomes
    /// cf2's ([`engine::CF2_DEFAULT_CHUNK`]) in the HE modes.
    pub fn default_chunk(&self, chunk: usize) -> usize {
        if self.he() && chunk == engine::DEFAULT_CHUNK {
            engine::CF2_DEFAULT_CHUNK
        } else {
            chunk
        }
    }

    /// One line saying what the mode runs and whom it trusts (the CLI's
    /// start-up line).
    pub fn summary(&self, tee: &str, he_params: &str, crisp: &crate::crisp_run::CrispOptions) -> String {
        let dealer = self.dealer().map(|(a, _)| a).unwrap_or("");
        let p = self.preset();
        match (p.provider, p.cot, p.engine) {
            (_, _, Engine::Crisp) => format!(
                "malicious-client mode (CRISP): MACs under a fresh key per inference, one consistency check before any output, MAC parameter s = {}, linear backend {}; dealer at {dealer} (trusted not to collude with either party)",
                crisp.s, crisp.linear
            ),
            (Provider::OwnModules, _, _) => format!("tee mode, modules {tee} (attestation {})", hush_tee::SIMULATED_NOTE),
            (Provider::Dealer, _, _) => format!("dealer mode, dealer at {dealer} (trusted not to collude with either party)"),
            (Provider::None, Some(Cot::Silent), _) => format!("silent mode: HE linear layers ({he_params}), cf2 comparisons on SilentFlow COTs from the modules ({tee}, attestation {})", hush_tee::SIMULATED_NOTE),
            (Provider::None, _, _) => format!("interactive mode: cryptography only — HE linear layers ({he_params}), cf2 comparisons on Ferret COTs"),
        }
    }

    /// [`Mode::from_flags`] for commands that start a dealer in this
    /// process when `--dealer` is omitted (`hush run`, `demo`, `bench
    /// infer`): `dealer` and `malicious-client` without `--dealer` give an
    /// empty address, filled by [`crate::provider::local_dealer`].
    pub fn from_flags_local(mode: &str, dealer: Option<&str>, pin: Option<&str>) -> Result<Mode> {
        if (mode == "dealer" || mode == "malicious-client") && dealer.is_none() {
            if pin.is_some() {
                return Err(Error::Config("--dealer-pin needs --dealer ADDR".into()));
            }
            return Ok(if mode == "dealer" { Mode::Dealer { addr: String::new(), pin: None } } else { Mode::MaliciousClient { addr: String::new(), pin: None } });
        }
        Mode::from_flags(mode, dealer, pin)
    }

    /// From `--mode`, `--dealer` and `--dealer-pin`.
    pub fn from_flags(mode: &str, dealer: Option<&str>, pin: Option<&str>) -> Result<Mode> {
        match mode {
            "tee" => {
                if dealer.is_some() || pin.is_some() {
                    return Err(Error::Config("--dealer and --dealer-pin need --mode dealer".into()));
                }
                Ok(Mode::Tee)
            }
            "dealer" => {
                let addr = dealer.ok_or_else(|| Error::Config("--mode dealer needs --dealer ADDR (where `hush dealer` listens)".into()))?;
                let pin = pin.map(|p| p.trim().parse::<Fingerprint>().map_err(|e| Error::Config(format!("--dealer-pin: {e}")))).transpose()?;
                Ok(Mode::Dealer { addr: addr.to_string(), pin })
            }
            "interactive" | "silent" => {
                if dealer.is_some() || pin.is_some() {
                    return Err(Error::Config(format!("--dealer and --dealer-pin need --mode dealer, not --mode {mode}")));
                }
                Ok(if mode == "silent" { Mode::Silent } else { Mode::Interactive })
            }
            "malicious-client" => {
                let addr = dealer.ok_or_else(|| Error::Config(MALICIOUS_CLIENT_NEEDS_DEALER.into()))?;
                let pin = pin.map(|p| p.trim().parse::<Fingerprint>().map_err(|e| Error::Config(format!("--dealer-pin: {e}")))).transpose()?;
                Ok(Mode::MaliciousClient { addr: addr.to_string(), pin })
            }
            m => Err(Error::Config(format!("--mode {m}: choose tee, dealer, interactive, silent or malicious-client"))),
        }
    }
}

/// Why `--mode malicious-client` needs `--dealer` (and never a module).
pub const MALICIOUS_CLIENT_NEEDS_DEALER: &str = "--mode malicious-client needs --dealer ADDR (where `hush dealer` listens) and \
--dealer-pin sha256:<hex>: its correlations (the MAC key μ, FSS keys, masks, triples) come from a dealer that colludes with neither party. \
A trusted module underneath (tee) is refused: hush's module is simulated, so a malicious client host could read μ from its own module \
and forge every MAC. (hush run, demo and bench infer start a dealer in this process when --dealer is omitted.)";

#[cfg(test)]
mod malicious_client_mode {
    use super::*;
    use crate::runtime::Options;
    #[test]
    fn needs_a_dealer_and_never_a_module() {
        let e = Mode::from_flags("malicious-client", None, None).unwrap_err().to_string();
        assert!(e.contains("--dealer ADDR") && e.contains("tee") && e.contains("simulated"), "{e}");
        let m = Mode::from_flags("malicious-client", Some("127.0.0.1:7100"), None).unwrap();
        assert_eq!(m.name(), "malicious-client");
        assert_eq!(m.dealer(), Some(("127.0.0.1:7100", None)));
        assert!(Mode::from_flags("malicious-client", Some("h:1"), Some("nonsense")).is_err());
        // the only family is CRISP's; auto resolves to it; others are refused by name
        let mut o = Options { mode: m.clone(), proto: "auto".into(), ..Default::default() };
        o.resolve_family().unwrap();
        assert_eq!(o.proto, "crisp");
        let e = Options { mode: m, proto: "tami".into(), ..Default::default() }.resolve_family().unwrap_err().to_string();
        assert!(e.contains("--proto tami does not run in --mode malicious-client"), "{e}");
        assert!(Mode::Dealer { addr: "a".into(), pin: None }.check_family("crisp").is_err());
    }
}

