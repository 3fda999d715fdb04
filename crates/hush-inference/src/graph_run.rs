//! The graph runtime's executor: runs a [`Program`] lowered from an ONNX
//! encoder graph ([`hush_onnx::graph`]) between the server (weights) and
//! the client (inputs), or in the clear as the fixed-point reference.
//!
//! Each [`Step`] maps to one private operator: linear layers, embeddings
//! and per-channel scales through the module-dealt linear path
//! ([`crate::linear`]: the server's weights stay in its module); GeLU,
//! Softmax, LayerNorm, tanh, secret×secret MatMul and products through
//! [`hush_2pc::transformer`] on the context's correlations; data movement,
//! additions and public scales locally; the attention mask added by the
//! client alone (its own input, clamped to ±M, never revealed). Values are
//! at scale 2^f in Z_2^64; a linear layer's products at 2^{2f} are
//! truncated once after the bias.
//!
//! **Trust.** The presets: `tee` — the correlations come from two trusted
//! modules that agree a seed (**simulated on these machines, no hardware
//! protection**); `dealer` — a dealer that never sees W (one-sided weight
//! triples, public comparison bounds); `interactive` — no module and no
//! dealer ([`party_interactive`]: Cheetah HE linear layers,
//! [`crate::graph_he`], and every other correlation made by the two parties
//! over COTs). Silent and malicious-client are refused by
//! [`GraphOptions`]'s callers with a message saying so.
//!
//! **What the server learns:** the program (architecture and the padded
//! input shape: batch and sequence length — not the true lengths, which are
//! in the client's mask) and nothing else; **the client learns** the
//! outputs and the program's public part (no weights; worst-case bounds as
//! powers of two, see [`hush_onnx::graph`]).

use crate::engine::SharedModule;
use crate::fixed::FixedConfig;
use crate::{linear, Error, Result};
use hush_2pc::deal::matrix::MatDims;
use hush_2pc::nonlinear::Proto;
use hush_2pc::share::{ArithShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_2pc::transformer::{elementwise, gelu, layernorm, matmul, softmax, tanh, Bound, Ctx};
use hush_onnx::eval::{eval_node, Tensor};
use hush_onnx::graph::{Program, Src, Step};
use hush_primitives::Ring;
use hush_tee::linear_deal::LinearOp;
use hush_tee::{InProcessModule, Module, ModuleRole};
use hush_transport::{Channel, MemChannel};
use std::collections::HashMap;
use std::time::Instant;

fn tpc(e: hush_2pc::Error) -> Error {
    Error::Nonlinear(e.to_string())
}

/// Which side runs the program.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Server,
    Client,
    /// both parties' data in one place (the fixed-point reference)
    Clear,
}

#[derive(Clone, Debug)]
enum Val {
    Sh(ArithShare),
    Cl(Tensor),
    /// a client value, at the server
    Unknown,
}

/// How a layer with the server's weights (linear layers, embeddings,
/// per-channel scales, LayerNorm's γ) is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearBackend {
    /// The module-dealt linear path ([`crate::linear`]): the weights are
    /// loaded into the server's own trusted module (tee mode only — given
    /// to a dealer, they would be the dealer's).
    Module,
    /// Dealt one-sided matrix triples
    /// ([`hush_2pc::deal::matrix::WeightTriples`]): the client holds A, the
    /// server B, C = A·B is shared; the server opens W − B to the client
    /// (B uniform: it reveals nothing) and the client X₁ − A to the server.
    /// The provider deals knowing nothing of W: the dealer's view is
    /// request sizes only.
    Triples,
    /// Cheetah's HE linear layers ([`crate::graph_he`]): the client holds
    /// the secret key, the server multiplies its plaintext W into the
    /// client's ciphertexts and returns a flooded, re-randomised share.
    /// Linear layers and embeddings; the element-wise steps (per-channel
    /// scales, LayerNorm's γ) run on the context's one-sided weight triples
    /// instead — made interactively in the `interactive` preset (k = n = 1:
    /// an HE product would cost a diagonal C×C convolution for C
    /// multiplications). Only with the interactive provider.
    He,
}

impl LinearBackend {
    pub fn name(self) -> &'static str {
        match self {
            LinearBackend::Module => "module",
            LinearBackend::Triples => "triples",
            LinearBackend::He => "he",
        }
    }
}

/// The session set-up of the `interactive` preset: the COT source under the
/// interactive provider and `cf2`, and the RLWE parameter set of the HE
/// linear layers. `seed` makes a run deterministic (tests: the same seed
/// gives the same transcript); None draws OS randomness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteractiveSetup {
    /// `ferret` (default) or `iknp` ([`hush_correlations::registry::SOURCES`]).
    pub source: String,
    pub he_params: String,
    pub seed: Option<u64>,
}

impl Default for InteractiveSetup {
    fn default() -> Self {
        InteractiveSetup { source: "ferret".into(), he_params: crate::he_linear::DEFAULT_PARAMS.into(), seed: None }
    }
}

impl InteractiveSetup {
    /// The `silent` preset's set-up: the interactive plan on SilentFlow COTs
    /// (each party's SilentFlow module expands the COTs from seeds the two
    /// modules agreed; the modules are simulated here and give no hardware
    /// protection). Every correlation of the operators is still made by the
    /// two parties over those COTs exactly as on Ferret's: the module sees
    /// no share, no weight and no input, only COT seeds (SilentFlow's trust
    /// model), so the security argument of each interactive correlation
    /// (`hush_2pc::interactive`) holds with the COT source swapped.
    pub fn silent() -> Self {
        InteractiveSetup { source: "silent".into(), ..Default::default() }
    }

    /// The preset this set-up belongs to.
    pub fn mode(&self) -> &'static str {
        if self.source == "silent" {
            "silent"
        } else {
            "interactive"
        }
    }

    /// What the run trusts, in words (the records' `tee_note`).
    pub fn note(&self) -> &'static str {
        if self.source == "silent" {
            "silent mode: no dealer and no module in the operators' correlations; the COTs come from SilentFlow modules, simulated here — they give no hardware protection (Cheetah HE linear layers, cf2 and every correlation made over those COTs)"
        } else {
            "interactive mode: no module and no dealer (Cheetah HE linear layers, cf2 and every correlation on Ferret COTs)"
        }
    }
}

/// Options of a private run: the plan (issue 28, item 2). `linear` is the
/// default backend of the steps that touch the server's weights;
/// `per_step` overrides it step by step (`hush plan`, `--plan`); a mix is
/// validated by [`GraphOptions::validate`].
#[derive(Clone, Debug)]
pub struct GraphOptions {
    pub fx: FixedConfig,
    pub proto: Proto,
    pub linear: LinearBackend,
    /// Backend per step index (None: `linear`).
    pub per_step: Option<std::sync::Arc<Vec<Option<LinearBackend>>>>,
    /// Size GeLU's, Softmax's and LayerNorm's comparisons from the
    /// program's proven bounds (fewer bits, cheaper; LayerNorm within 2^11
    /// skips its clip). The bounds come from the weights, so
    /// the widths show in the provider's requests: on in tee mode (the
    /// provider is the parties' own modules), off in dealer mode, where
    /// the comparisons span the whole ring and the dealer's requests are a
    /// function of the shapes alone (test:
    /// `triples_backend_keeps_every_weight_from_the_provider`).
    pub widths_from_bounds: bool,
    /// Without `widths_from_bounds`: size those comparisons for these
    /// **public** bounds (real units, per operator type) instead of the
    /// whole ring. The dealer preset uses [`PUBLIC_CMP_BOUND`].
    ///
    /// **Why the dealer still learns nothing of W.** The width is a
    /// constant of the preset, the same for every model and weight set;
    /// the server checks, before anything is dealt ([`GraphOptions::validate`]),
    /// that every GeLU and Softmax input's proven bound is within it, and
    /// refuses the program otherwise (naming the value) — so for every
    /// program it runs, the dealer's requests are a function of the shapes
    /// and this constant alone (the same test as above runs the dealer
    /// preset on two weight sets and compares the request streams). The
    /// comparisons are exact for inputs within the bound
    /// ([`hush_2pc::transformer::gelu::gelu_within`]), and the proven
    /// bound holds for every input, so the result is the whole-ring one.
    pub public_bound: Option<PublicBounds>,
    /// The interactive provider (no module, no dealer): set by the
    /// `interactive` preset; None runs on a module or a dealer.
    pub interactive: Option<InteractiveSetup>,
}

/// Public comparison bounds (real units) per operator type.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PublicBounds {
    pub gelu: f64,
    pub softmax: f64,
}

/// The dealer preset's public comparison bounds: GeLU inputs 2^16 (about
/// 31-bit comparisons instead of 64; all-MiniLM-L6-v2's FFN inputs are
/// proven to 2^13), Softmax inputs 2^30 (about 45 bits: they carry the attention
/// mask's large negative constant, which a torch-style BERT-base export's
/// masked scores are proven to reach at 2^29).
pub const PUBLIC_CMP_BOUND: PublicBounds = PublicBounds { gelu: 65536.0, softmax: 1_073_741_824.0 };

impl GraphOptions {
    /// The tee preset: weights in the server's module, bound-sized comparisons.
    pub fn tee(fx: FixedConfig, proto: Proto) -> Self {
        GraphOptions { fx, proto, linear: LinearBackend::Module, per_step: None, widths_from_bounds: true, public_bound: None, interactive: None }
    }
    /// The dealer preset: one-sided weight triples, comparisons sized for
    /// the public bounds [`PUBLIC_CMP_BOUND`] — the dealer's view is
    /// independent of the weights.
    pub fn dealer(fx: FixedConfig, proto: Proto) -> Self {
        GraphOptions { fx, proto, linear: LinearBackend::Triples, per_step: None, widths_from_bounds: false, public_bound: Some(PUBLIC_CMP_BOUND), interactive: None }
    }
    /// The interactive preset (issue 29): **no trusted party** — no module
    /// and no dealer anywhere in the run. Linear layers and embeddings on
    /// Cheetah's HE ([`LinearBackend::He`]); every other correlation
    /// (truncation pairs, Beaver and matrix triples, power tuples, subset
    /// products, one-sided weight triples for the element-wise scales) made
    /// by the two parties over COTs ([`Ctx::new_interactive`],
    /// [`hush_2pc::interactive`]) and comparisons by CrypTFlow2's
    /// millionaires' (`cf2`). Comparisons are sized from the proven bounds:
    /// nobody but the two parties sees a request, and the client learns the
    /// bounds with the public program anyway.
    pub fn interactive(fx: FixedConfig, setup: InteractiveSetup) -> Self {
        GraphOptions { fx, proto: Proto::Cf2, linear: LinearBackend::He, per_step: None, widths_from_bounds: true, public_bound: None, interactive: Some(setup) }
    }
}

impl GraphOptions {
    /// The backend of step `i`.
    pub fn backend(&self, i: usize) -> LinearBackend {
        self.per_step.as_ref().and_then(|v| v.get(i).copied().flatten()).unwrap_or(self.linear)
    }

    /// Refuses mixes whose security argument does not compose, or that the
    /// session has no means to run, naming the step:
    ///
    /// * **interactive provider** ([`GraphOptions::interactive`]): there is
    ///   no module, so a module-dealt step is refused (it would need one);
    ///   `he` and `triples` compose in any mix — HE shows W to no one
    ///   (ciphertexts under the client's key, flooded responses), the
    ///   interactive one-sided weight triples show W − B with B the
    ///   server's own uniform randomness, and each step's outputs are fresh
    ///   sharings, so the steps compose sequentially. The comparison family
    ///   must be `cf2` (the only one with an interactive provider). The
    ///   server also checks that every HE product fits Cheetah's ring
    ///   ([`crate::graph_he::check_fits`]).
    /// * **a module or a dealer** (tee, dealer): the HE backend is refused —
    ///   such a session has no RLWE keys (not implemented; HE linear layers
    ///   beside dealt correlations would compose, but nothing sets them up).
    ///
    /// With a
    /// dealer as the provider (`dealer_provider`), a module-dealt step would
    /// load that step's weights into the dealer — refused naming the step.
    /// With the parties' own modules (tee) both backends are sound in any
    /// mix: the module that sees W is the server's own, and the triples
    /// backend shows W to no one (its openings are masked by dealt uniform
    /// randomness), so each step's view argument holds on its own and the
    /// steps compose sequentially (each step's outputs are fresh sharings).
    pub fn validate(&self, p: &Program, dealer_provider: bool) -> Result<()> {
        if let Some(v) = &self.per_step {
            if v.len() != p.steps.len() {
                return Err(Error::Config(format!("plan: {} entries for a program of {} steps", v.len(), p.steps.len())));
            }
        }
        if let (false, Some(pbs)) = (self.widths_from_bounds, self.public_bound) {
            for st in &p.steps {
                if let Step::Gelu { x, .. } | Step::Softmax { x, .. } = st {
                    let pb = if matches!(st, Step::Gelu { .. }) { pbs.gelu } else { pbs.softmax };
                    if !(p.slots[*x].bound <= pb) {
                        return Err(Error::Model(format!(
                            "value '{}' ({} input) has a proven bound of {:.3e}, beyond the public comparison bound {pb:.0} of this plan (the dealer preset sizes comparisons for a public bound so that the dealer learns nothing of the weights)",
                            p.slots[*x].name,
                            st.kind(),
                            p.slots[*x].bound
                        )));
                    }
                }
            }
        }
        if self.interactive.is_some() && self.proto != Proto::Cf2 {
            return Err(Error::Config(format!("plan: the interactive provider compares with cf2, not {:?}", self.proto)));
        }
        for (i, st) in p.steps.iter().enumerate() {
            if !touches_weights(st) {
                continue;
            }
            match (self.interactive.is_some(), self.backend(i)) {
                (true, LinearBackend::Module) => {
                    return Err(Error::Config(format!(
                        "plan: step {i} ({} '{}') is module-dealt, but the interactive preset has no module (and no dealer): use he or triples",
                        st.kind(),
                        p.slots[st.out()].name
                    )))
                }
                (false, LinearBackend::He) => {
                    return Err(Error::Config(format!(
                        "plan: step {i} ({} '{}') uses the HE backend, which runs only in the interactive preset (not implemented beside a module or a dealer)",
                        st.kind(),
                        p.slots[st.out()].name
                    )))
                }
                _ => {}
            }
        }
        if let Some(v) = &self.per_step {
            // a secret × secret MatMul's entry: `he` forces the HE cross
            // products, `triples` the OT (or dealt) matrix triples; none lets
            // the interactive preset choose by cost (graph_he::choose_shared)
            for (i, st) in p.steps.iter().enumerate() {
                let (Step::MatMul { a, b, k, out, .. }, Some(be)) = (st, v[i]) else { continue };
                let name = &p.slots[st.out()].name;
                match (self.interactive.is_some(), be) {
                    (_, LinearBackend::Module) => return Err(Error::Config(format!("plan: step {i} (matmul '{name}') multiplies two secrets: use he or triples"))),
                    (false, LinearBackend::He) => return Err(Error::Config(format!("plan: step {i} (matmul '{name}') uses the HE backend, which runs only in the interactive preset"))),
                    (true, LinearBackend::He) if crate::graph_he::pre_shift_bounded(*k, p.slots[*a].bound, p.slots[*b].bound, p.slots[*out].bound, self.fx.frac).is_none() => {
                        return Err(Error::Model(format!(
                            "plan: step {i} (matmul '{name}'): operands bounded by {:.3e} and {:.3e} (sums of {k}) do not fit the HE backend's ring (|A·B| < 2^{} ulps) even truncated; use triples",
                            p.slots[*a].bound,
                            p.slots[*b].bound,
                            crate::graph_he::HE_BITS - 2
                        )))
                    }
                    _ => {}
                }
            }
        }
        if self.interactive.is_some() && p.has_weights {
            crate::graph_he::check_fits(p, self.fx.frac, |i| matches!(p.steps[i], Step::Linear { .. } | Step::Embed { .. }) && self.backend(i) == LinearBackend::He)?;
        }
        if dealer_provider {
            for (i, st) in p.steps.iter().enumerate() {
                if touches_weights(st) && self.backend(i) == LinearBackend::Module {
                    return Err(Error::Config(format!(
                        "plan: step {i} ({} '{}') is module-dealt in dealer mode: that would give the dealer its weights (an unsound mix: use the triples backend)",
                        st.kind(),
                        p.slots[st.out()].name
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A plan file's choices (`--plan FILE.toml`, parsed by the CLI): a base
/// backend, then per operator type, then per step (named by its output
/// value), each later one overriding the earlier. Entries are kept with
/// their source text so that a refusal names the entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanFile {
    /// `linear = "module" | "triples"` (None: the mode's preset).
    pub linear: Option<String>,
    /// `[ops]`: operator type → backend.
    pub ops: Vec<(String, String)>,
    /// `[steps]`: output value name → backend.
    pub steps: Vec<(String, String)>,
}

/// Which plan a party runs (`--plan`): the mode's preset, the cost
/// model's choice per step (`auto`: at the server, measured once per
/// program; a client accepts any plan sound for its mode), or a plan file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PlanChoice {
    #[default]
    Preset,
    Auto,
    File { path: String, plan: PlanFile },
}

impl PlanChoice {
    pub fn describe(&self) -> String {
        match self {
            PlanChoice::Preset => "the mode's preset".into(),
            PlanChoice::Auto => "auto".into(),
            PlanChoice::File { path, .. } => format!("plan file {path}"),
        }
    }
}

/// Largest plan file read.
const MAX_PLAN_FILE: u64 = 1 << 20;

impl PlanChoice {
    /// `--plan`: `auto`, or a plan file's path.
    pub fn from_arg(arg: Option<&str>) -> Result<PlanChoice> {
        match arg {
            None => Ok(PlanChoice::Preset),
            Some("auto") => Ok(PlanChoice::Auto),
            Some(path) => {
                let f = std::fs::File::open(path).map_err(|e| Error::Config(format!("--plan {path}: {e}")))?;
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_PLAN_FILE + 1), &mut text).map_err(|e| Error::Config(format!("--plan {path}: {e}")))?;
                if text.len() as u64 > MAX_PLAN_FILE {
                    return Err(Error::Config(format!("--plan {path}: larger than {MAX_PLAN_FILE} bytes")));
                }
                let plan = PlanFile::from_toml(&text).map_err(|e| Error::Config(format!("--plan {path}: {e}")))?;
                Ok(PlanChoice::File { path: path.to_string(), plan })
            }
        }
    }
}

impl PlanFile {
    /// Parses a plan file:
    ///
    /// ```toml
    /// linear = "triples"            # the default backend (optional)
    /// [ops]                         # per operator type
    /// embed = "module"
    /// [steps]                       # per step, by its output value's name
    /// "/encoder/layer.0/output/dense/MatMul_output_0" = "triples"
    /// ```
    ///
    /// Unknown keys are refused naming the entry; values are checked
    /// against a program by [`GraphOptions::with_plan_file`].
    pub fn from_toml(text: &str) -> std::result::Result<PlanFile, String> {
        let v: toml::Table = text.parse().map_err(|e: toml::de::Error| format!("not a plan file (TOML): {}", e.message()))?;
        let mut f = PlanFile::default();
        let string = |entry: &str, v: &toml::Value| v.as_str().map(str::to_string).ok_or_else(|| format!("plan file entry {entry}: expected a string (module or triples)"));
        for (k, val) in &v {
            match (k.as_str(), val) {
                ("linear", v) => f.linear = Some(string("linear", v)?),
                ("ops" | "steps", toml::Value::Table(t)) => {
                    for (name, b) in t {
                        let entry = format!("{k}.{name}");
                        let pair = (name.clone(), string(&entry, b)?);
                        if k == "ops" { f.ops.push(pair) } else { f.steps.push(pair) }
                    }
                }
                ("ops" | "steps", _) => return Err(format!("plan file entry {k}: expected a table")),
                (o, _) => return Err(format!("plan file entry {o}: unknown key (a plan file has linear, [ops] and [steps])")),
            }
        }
        Ok(f)
    }
}

/// The operator types a plan chooses a linear backend for.
pub const PLANNED_OPS: &[&str] = &["embed", "linear", "scale-vec", "layernorm"];

fn backend_named(entry: &str, v: &str) -> Result<LinearBackend> {
    match v {
        "module" => Ok(LinearBackend::Module),
        "triples" => Ok(LinearBackend::Triples),
        "he" => Ok(LinearBackend::He),
        o => Err(Error::Config(format!("plan file entry {entry}: unknown backend '{o}' (module, triples or he)"))),
    }
}

impl GraphOptions {
    /// This plan with a plan file's choices applied over program `p`:
    /// unknown operators, operators without a backend choice, unknown
    /// values and unsound mixes (a module-dealt step with a dealer as the
    /// provider) are refused naming the file's entry.
    pub fn with_plan_file(&self, p: &Program, f: &PlanFile, dealer_provider: bool) -> Result<GraphOptions> {
        let mut o = self.clone();
        let sound = |entry: &str, b: LinearBackend| -> Result<LinearBackend> {
            if dealer_provider && b == LinearBackend::Module {
                return Err(Error::Config(format!(
                    "plan file entry {entry}: module-dealt layers with a dealer would give the dealer the server's weights (an unsound mix; only triples compose with a dealer)"
                )));
            }
            Ok(b)
        };
        if let Some(v) = &f.linear {
            o.linear = sound("linear", backend_named("linear", v)?)?;
        }
        let mut per: Vec<Option<LinearBackend>> = match &self.per_step {
            Some(v) if v.len() == p.steps.len() => v.to_vec(),
            _ => vec![None; p.steps.len()],
        };
        for (op, v) in &f.ops {
            let entry = format!("ops.{op}");
            if !PLANNED_OPS.contains(&op.as_str()) {
                let known = p.steps.iter().any(|s| s.kind() == op) || ["input", "client", "add-const", "scale", "add", "sub", "neg", "mul", "mask", "gelu", "tanh", "pool", "l2norm", "softmax", "matmul", "move"].contains(&op.as_str());
                return Err(Error::Config(if known {
                    format!("plan file entry {entry}: operator '{op}' has no linear backend to choose (operators with a choice: {})", PLANNED_OPS.join(", "))
                } else {
                    format!("plan file entry {entry}: unknown operator '{op}' (operators with a choice: {})", PLANNED_OPS.join(", "))
                }));
            }
            let b = sound(&entry, backend_named(&entry, v)?)?;
            for (i, st) in p.steps.iter().enumerate() {
                if st.kind() == op && touches_weights(st) {
                    per[i] = Some(b);
                }
            }
        }
        for (name, v) in &f.steps {
            let entry = format!("steps.\"{name}\"");
            let b = sound(&entry, backend_named(&entry, v)?)?;
            let i = p
                .steps
                .iter()
                .position(|st| p.slots[st.out()].name == *name)
                .ok_or_else(|| Error::Config(format!("plan file entry {entry}: no step of this program computes a value named '{name}'")))?;
            if !touches_weights(&p.steps[i]) {
                return Err(Error::Config(format!("plan file entry {entry}: step {i} ({}) has no linear backend to choose", p.steps[i].kind())));
            }
            per[i] = Some(b);
        }
        o.per_step = if per.iter().all(|b| b.is_none()) { None } else { Some(std::sync::Arc::new(per)) };
        o.validate(p, dealer_provider)?;
        Ok(o)
    }

    /// The plan a peer sent ([`GraphOptions::to_json`]) over this
    /// party's fixed-point and family settings, checked against program
    /// `p` and sound for the provider.
    pub fn from_json(&self, v: &serde_json::Value, p: &Program, dealer_provider: bool) -> Result<GraphOptions> {
        let bad = |m: &str| Error::Protocol(format!("the peer's plan: {m}"));
        let mut o = self.clone();
        o.linear = backend_named("linear", v.get("linear").and_then(serde_json::Value::as_str).ok_or_else(|| bad("no linear backend"))?).map_err(|e| bad(&e.to_string()))?;
        o.widths_from_bounds = v.get("widths_from_bounds").and_then(serde_json::Value::as_bool).ok_or_else(|| bad("no comparison sizing"))?;
        o.public_bound = match v.get("public_bound") {
            None | Some(serde_json::Value::Null) => None,
            Some(b) => {
                let pb: PublicBounds = serde_json::from_value(b.clone()).map_err(|_| bad("public bounds that are not {gelu, softmax}"))?;
                if ![pb.gelu, pb.softmax].iter().all(|b| b.is_finite() && *b > 0.0) {
                    return Err(bad("a public bound that is not a positive number"));
                }
                Some(pb)
            }
        };
        let mut per = vec![None; p.steps.len()];
        for e in v.get("overrides").and_then(serde_json::Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
            let i = e.get("step").and_then(serde_json::Value::as_u64).ok_or_else(|| bad("an override without a step"))? as usize;
            if i >= p.steps.len() || !touches_weights(&p.steps[i]) {
                return Err(bad(&format!("step {i} has no linear backend to choose")));
            }
            let b = e.get("linear").and_then(serde_json::Value::as_str).ok_or_else(|| bad("an override without a backend"))?;
            per[i] = Some(backend_named("override", b).map_err(|e| bad(&e.to_string()))?);
        }
        o.per_step = if per.iter().all(|b| b.is_none()) { None } else { Some(std::sync::Arc::new(per)) };
        o.validate(p, dealer_provider)?;
        Ok(o)
    }

    /// The plan as the hello carries it: the default backend, the
    /// comparison sizing and every step's effective backend where a step
    /// has a choice (so two plans agree exactly when this does).
    pub fn to_json(&self, p: &Program) -> serde_json::Value {
        let steps: Vec<serde_json::Value> = p
            .steps
            .iter()
            .enumerate()
            .filter(|(_, st)| touches_weights(st))
            .filter(|(i, _)| self.backend(*i) != self.linear)
            .map(|(i, st)| serde_json::json!({"step": i, "value": p.slots[st.out()].name, "linear": self.backend(i).name()}))
            .collect();
        serde_json::json!({"linear": self.linear.name(), "widths_from_bounds": self.widths_from_bounds, "public_bound": self.public_bound, "overrides": steps})
    }
}

/// Whether a step computes with the server's weights through a linear
/// backend (the steps a plan chooses for).
pub fn touches_weights(st: &Step) -> bool {
    matches!(st, Step::Embed { .. } | Step::Linear { .. } | Step::ScaleVec { .. }) || matches!(st, Step::LayerNorm { gamma, .. } if !gamma.is_empty())
}

/// Cost of one step at one party (`hush plan`).
#[derive(Clone, Debug, Default)]
pub struct StepCost {
    pub secs: f64,
    pub bytes_sent: u64,
    /// Bytes this party received during the step (the peer's messages).
    pub bytes_recv: u64,
    pub rounds: u32,
    /// Of `secs`, the time spent waiting for the step's correlations
    /// (the look-ahead's dealing thread had not dealt them yet).
    pub wait_s: f64,
    /// This party's heap high-water mark during the step, above its level
    /// when the run began (with a heap meter: `hush plan --max-mem`).
    pub peak_bytes: Option<u64>,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions::tee(FixedConfig { bits: 64, frac: 12 }, Proto::Tami)
    }
}

/// Checks, before anything is dealt, that no value of the program can
/// wrap the ring: every shared value's bound at 2^f and every linear
/// layer's products at 2^{2f} below 2^{ℓ−2}. Errors name the value.
pub fn check_program(p: &Program, fx: FixedConfig) -> Result<()> {
    fx.validate()?;
    if fx.bits != 64 || !(8..=12).contains(&fx.frac) {
        return Err(Error::Config(format!("the graph runtime's operators need ℓ = 64 and 8..=12 fraction bits (got --bits {} --frac {})", fx.bits, fx.frac)));
    }
    let lim = (fx.bits - 2) as f64;
    let f = fx.frac as f64;
    for (i, s) in p.slots.iter().enumerate() {
        if s.client {
            continue;
        }
        let pre = match p.steps.iter().find(|st| st.out() == i) {
            Some(Step::Linear { .. } | Step::ScaleVec { .. } | Step::Scale { .. } | Step::LayerNorm { .. }) => 2.0 * f,
            _ => f,
        };
        if let Some(Step::L2Norm { x, len, .. }) = p.steps.iter().find(|st| st.out() == i) {
            let sq = *len as f64 * p.slots[*x].bound.powi(2);
            if sq > (L2_HI as f64).exp2() {
                return Err(Error::Model(format!("value '{}': L2 normalisation of rows whose squared norm could reach {sq:.3e}, beyond its range 2^{L2_HI}", s.name)));
            }
        }
        let bits = s.bound.max(f64::MIN_POSITIVE).log2() + pre;
        if !(bits < lim) {
            return Err(Error::Model(format!("value '{}': worst case {:.3e} at scale 2^{pre} could wrap the {}-bit ring", s.name, s.bound, fx.bits)));
        }
    }
    Ok(())
}

/// Internal scale of the L2 normalisation's rsqrt.
pub const L2_SCALE: u32 = 22;
/// Range of ‖x‖² the L2 normalisation is accurate on: [2^L2_LO, 2^L2_HI]
/// (a program whose worst case exceeds 2^L2_HI is refused).
pub const L2_LO: i32 = -10;
pub const L2_HI: i32 = 30;

struct Exec<'a> {
    role: Role,
    backend: LinearBackend,
    plan: GraphOptions,
    meter: Vec<StepCost>,
    widths: bool,
    public_bound: Option<PublicBounds>,
    p: &'a Program,
    fx: FixedConfig,
    ring: Ring,
    ctx: Ctx,
    module: Option<SharedModule>,
    /// The HE linear layers (interactive preset).
    he: Option<crate::graph_he::GraphHe>,
    /// The plan's own entry for the current step (None: the preset's or
    /// the cost model's choice); secret × secret MatMul steps read it.
    forced: Option<LinearBackend>,
    /// The input truncation of the next HE linear layer's wide product
    /// ([`crate::graph_he::linear_shift`]; 0: the plain product).
    he_shift: u32,
    /// The step being run (its index in the program).
    cur: usize,
    /// HE linear outputs computed ahead with an earlier step's fused
    /// product ([`Exec::he_linear_group`]), by step index; before bias and
    /// truncation.
    he_fused: HashMap<usize, ArithShare>,
    next_id: u32,
    vals: Vec<Option<Val>>,
    /// The plan pass of [`Exec::run_ahead`]: the context records what
    /// each step consumes; nothing is sent (the module-dealt linear path
    /// returns zeros without a call).
    planning: bool,
    /// Per-step heap peaks of this party (`hush plan --max-mem`): the
    /// meter and the party's tag.
    probe: Option<(crate::runtime::MemProbe, usize)>,
}

/// Chunks (k, n) of an m×k·k×n product small enough for one dealing
/// ([`hush_2pc::deal::matrix::MAX_WORDS`] words).
fn chunk_dims(m: usize, k: usize, n: usize) -> (usize, usize) {
    let cap = hush_2pc::deal::matrix::MAX_WORDS as usize;
    let (mut kc, mut nc) = (k, n);
    while m * kc + kc * nc + m * nc > cap && (kc > 1 || nc > 1) {
        if kc >= nc {
            kc = kc.div_ceil(2);
        } else {
            nc = nc.div_ceil(2);
        }
    }
    (kc, nc)
}

fn enc(ring: Ring, x: f64, s: u32) -> u64 {
    ring.from_signed((x * (s as f64).exp2()).round() as i64)
}

fn transpose(x: &ArithShare, rows: usize, cols: usize) -> ArithShare {
    matmul::transpose(x, 1, rows, cols)
}

/// The HE linear steps computed with step `i` as one stacked product
/// ([`Exec::he_linear_group`]): `i` and every later linear step on the same
/// input slot, rows and width, on the HE backend, with the same
/// wide-product shift; and that shift. From the public program only.
pub(crate) fn he_linear_group(p: &Program, plan: &GraphOptions, frac: u32, i: usize) -> Result<(Vec<usize>, u32)> {
    let Some(Step::Linear { x, rows, n_in, .. }) = p.steps.get(i) else {
        return Err(Error::Config("HE linear group: not a linear step (a program bug)".into()));
    };
    let bx = p.slots[*x].bound;
    let shift = |j: usize| crate::graph_he::linear_shift(bx, p.slots[p.steps[j].out()].bound, frac);
    let d = shift(i).ok_or_else(|| Error::Model(format!("linear layer '{}': its product does not fit the HE backend's ring", p.slots[p.steps[i].out()].name)))?;
    let mut group = vec![i];
    for j in i + 1..p.steps.len() {
        if let Step::Linear { x: x2, rows: r2, n_in: k2, .. } = &p.steps[j] {
            if x2 == x && r2 == rows && k2 == n_in && plan.backend(j) == LinearBackend::He && shift(j) == Some(d) {
                group.push(j);
            }
        }
    }
    Ok((group, d))
}

impl<'a> Exec<'a> {
    fn sh(&self, s: usize) -> Result<&ArithShare> {
        match self.vals.get(s) {
            Some(Some(Val::Sh(x))) => Ok(x),
            _ => Err(Error::Config(format!("graph: value {s} ('{}') is not a shared value here (a program bug)", self.p.slots[s].name))),
        }
    }

    fn cl(&self, s: usize) -> Result<Option<&Tensor>> {
        match self.vals.get(s) {
            Some(Some(Val::Cl(t))) => Ok(Some(t)),
            Some(Some(Val::Unknown)) => Ok(None),
            _ => Err(Error::Config(format!("graph: value {s} is not a client value (a program bug)"))),
        }
    }

    fn has_weights(&self) -> bool {
        self.role != Role::Client
    }

    fn knows_client(&self) -> bool {
        self.role != Role::Server
    }

    /// y = op(x) through the module-dealt linear path (in the clear in the
    /// reference), or through Cheetah's HE with the HE backend (`op` a 1×1
    /// convolution of `c_in` channels); `op` is built only where the
    /// weights are.
    fn linear(&mut self, ch: &mut dyn Channel, op: impl FnOnce() -> LinearOp, c_in: usize, in_len: usize, out_len: usize, x: &ArithShare) -> Result<ArithShare> {
        let id = self.next_id;
        self.next_id += 1;
        if self.planning {
            return Ok(ArithShare::zeros(self.ring, out_len));
        }
        if self.backend == LinearBackend::He {
            let m = in_len / c_in.max(1);
            if c_in == 0 || m == 0 || in_len % c_in != 0 || out_len % m != 0 {
                return Err(Error::Config(format!("HE linear: {in_len} → {out_len} elements over {c_in} channels")));
            }
            let wt = if self.has_weights() {
                match &mut op() {
                    LinearOp::Conv { weight, .. } => std::mem::take(weight),
                    _ => return Err(Error::Config("HE linear: not a 1×1 convolution (a program bug)".into())),
                }
            } else {
                Vec::new()
            };
            let he = self.he.as_mut().ok_or_else(|| Error::Config("the HE linear backend runs only in the interactive preset (this session has no HE keys)".into()))?;
            let mut wt = wt;
            let r = he.apply_wide(&mut self.ctx, ch, x, &wt, c_in, m, out_len / m, std::mem::take(&mut self.he_shift));
            zeroize::Zeroize::zeroize(&mut wt);
            return r;
        }
        let side = match self.role {
            Role::Server => linear::Side::Server,
            Role::Client => linear::Side::Client,
            Role::Clear => linear::Side::Clear,
        };
        let m = self.module.as_mut().map(|m| m as &mut dyn hush_tee::TrustedModule);
        Ok(ArithShare::new(self.ring, linear::apply(side, m, ch, &self.fx, id, || Ok(op()), in_len, out_len, &x.v)?))
    }

    /// The bound GeLU's and Softmax's comparisons are sized for: the
    /// proven one, the plan's public one (checked by `validate`), or none.
    fn cmp_bound(&self, x: usize, gelu: bool) -> f64 {
        match (self.widths, self.public_bound) {
            (true, _) => self.p.slots[x].bound,
            (false, Some(pb)) => if gelu { pb.gelu } else { pb.softmax },
            (false, None) => f64::INFINITY,
        }
    }

    /// The server's weights as ring values (empty at the client).
    fn weights(&self, f: impl FnOnce() -> Vec<u64>) -> Vec<u64> {
        if self.has_weights() {
            f()
        } else {
            Vec::new()
        }
    }

    /// x (m×k, shared) · w (k×n, the server's own) over the ring from dealt
    /// one-sided triples ([`hush_2pc::deal::matrix::WeightTriples`]: the
    /// dealer never sees W), in chunks of k and n that fit one request.
    fn weight_matmul(&mut self, ch: &mut dyn Channel, x: &ArithShare, w: &[u64], m: usize, k: usize, n: usize) -> Result<ArithShare> {
        self.weight_matmul_as(ch, x, w, m, k, n, false)
    }

    /// [`Exec::weight_matmul`]; with `client_input`, x is the client's own
    /// value (the server's share zero: the one-hot token ids), multiplied by
    /// [`Ctx::weight_matmul_client_input`] — the same messages, and the
    /// client looks rows of V up instead of the dense A·V.
    #[allow(clippy::too_many_arguments)]
    fn weight_matmul_as(&mut self, ch: &mut dyn Channel, x: &ArithShare, w: &[u64], m: usize, k: usize, n: usize, client_input: bool) -> Result<ArithShare> {
        let (kc, nc) = chunk_dims(m, k, n);
        let server = self.has_weights();
        let one = |ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, w: &[u64], d: MatDims| {
            if client_input {
                ctx.weight_matmul_client_input(ch, x, w, 1, d).map_err(tpc)
            } else {
                ctx.weight_matmul(ch, x, w, 1, d).map_err(tpc)
            }
        };
        if kc == k && nc == n {
            return one(&mut self.ctx, ch, x, w, MatDims { m, k, n });
        }
        let mut out = vec![0u64; m * n];
        for k0 in (0..k).step_by(kc) {
            let kl = kc.min(k - k0);
            let xc: Vec<u64> = (0..m).flat_map(|i| x.v[i * k + k0..i * k + k0 + kl].iter().copied()).collect();
            let xc = ArithShare::new(self.ring, xc);
            for n0 in (0..n).step_by(nc) {
                let nl = nc.min(n - n0);
                let wc: Vec<u64> = if server { (k0..k0 + kl).flat_map(|t| w[t * n + n0..t * n + n0 + nl].iter().copied()).collect() } else { Vec::new() };
                let y = one(&mut self.ctx, ch, &xc, &wc, MatDims { m, k: kl, n: nl })?;
                for i in 0..m {
                    for j in 0..nl {
                        out[i * n + n0 + j] = self.ring.add(out[i * n + n0 + j], y.v[i * nl + j]);
                    }
                }
            }
        }
        Ok(ArithShare::new(self.ring, out))
    }

    /// x (row-major, rows of `len`) times the server's per-column c, over
    /// the ring: module-dealt or one-sided triples (the dealer never sees c).
    fn scale_cols(&mut self, ch: &mut dyn Channel, x: &ArithShare, len: usize, c: &[f64]) -> Result<ArithShare> {
        let (ring, f) = (self.ring, self.fx.frac);
        let rows = x.len() / len.max(1);
        match self.backend {
            LinearBackend::Module => {
                let xt = transpose(x, rows, len);
                let y = self.linear(ch, || LinearOp::Scale { channels: len as u32, inner: rows as u32, weight: c.iter().map(|&v| enc(ring, v, f)).collect() }, len, x.len(), x.len(), &xt)?;
                Ok(transpose(&y, len, rows))
            }
            LinearBackend::Triples | LinearBackend::He => {
                // `len` one-sided products x[:, j] (rows×1) · c_j (1×1)
                let xt = transpose(x, rows, len);
                let cs = self.weights(|| c.iter().map(|&v| enc(ring, v, f)).collect());
                let y = self.ctx.weight_matmul(ch, &xt, &cs, len, MatDims { m: rows, k: 1, n: 1 }).map_err(tpc)?;
                Ok(transpose(&y, len, rows))
            }
        }
    }

    fn server_add(&self, x: &ArithShare, c: impl Fn(usize) -> u64) -> ArithShare {
        if !self.has_weights() {
            return x.clone();
        }
        ArithShare { ring: x.ring, v: x.v.iter().enumerate().map(|(i, a)| self.ring.add(*a, c(i))).collect() }
    }

    /// The HE product X·W of the current linear step **and of every later
    /// linear step on the same input** (same slot, rows and width, HE
    /// backend, the same wide-product shift): one Cheetah layer with the
    /// weights stacked, W = [W₁ | W₂ | …] — attention's Q, K and V
    /// projections share one upload of the client's ciphertexts instead of
    /// three (BERT-base: 82.8 → 43.4 MB of HE messages per layer at seq 128,
    /// the same polynomial products; since 2026-11-29). Returns the current
    /// step's (X·W)ᵀ share (before bias and truncation) and keeps the
    /// others for their steps. Both parties group from the public program
    /// only, so they agree. **Views:** one Cheetah layer whose weights are
    /// the stacked matrices — its argument holds for any weights (the
    /// server sees ciphertexts under the client's key; the client sees a
    /// flooded response simulatable from its output shares, re-randomised by
    /// the server's fresh r_S) — and one lift over all the outputs. The
    /// values are those of the separate products (exact within the HE
    /// ring, `check_fits`).
    fn he_linear_group(&mut self, ch: &mut dyn Channel) -> Result<ArithShare> {
        let (ring, f) = (self.ring, self.fx.frac);
        let i = self.cur;
        let Step::Linear { x, rows, n_in, .. } = &self.p.steps[i] else {
            return Err(Error::Config("HE linear group: not a linear step (a program bug)".into()));
        };
        let (x, rows, n_in) = (*x, *rows, *n_in);
        let (group, d) = he_linear_group(self.p, &self.plan, f, i)?;
        let outs: Vec<usize> = group.iter().map(|&j| match &self.p.steps[j] { Step::Linear { n_out, .. } => *n_out, _ => 0 }).collect();
        let total: usize = outs.iter().sum();
        // Wᵀ of each step (n_out × n_in, ring values), stacked; the server's only
        let mut wt = Vec::new();
        if self.has_weights() {
            wt.reserve(total * n_in);
            for &j in &group {
                if let Step::Linear { n_out, w, .. } = &self.p.steps[j] {
                    for o in 0..*n_out {
                        wt.extend((0..n_in).map(|k| enc(ring, w[k * n_out + o], f)));
                    }
                }
            }
        }
        let xt = transpose(self.sh(x)?, rows, n_in);
        let he = self.he.as_mut().ok_or_else(|| Error::Config("the HE linear backend runs only in the interactive preset (this session has no HE keys)".into()))?;
        let y = he.apply_wide(&mut self.ctx, ch, &xt, &wt, n_in, rows, total, d);
        zeroize::Zeroize::zeroize(&mut wt);
        let y = y?;
        let mut at = outs[0] * rows;
        let first = ArithShare::new(ring, y.v[..at].to_vec());
        for (k, &j) in group.iter().enumerate().skip(1) {
            let len = outs[k] * rows;
            self.he_fused.insert(j, ArithShare::new(ring, y.v[at..at + len].to_vec()));
            at += len;
        }
        Ok(first)
    }

    fn step(&mut self, ch: &mut dyn Channel, st: &Step, inputs: &HashMap<String, Tensor>) -> Result<Val> {
        let (ring, f) = (self.ring, self.fx.frac);
        Ok(match st {
            Step::Input { name, out } => {
                if !self.knows_client() {
                    return Ok(Val::Unknown);
                }
                let t = inputs.get(name).ok_or_else(|| Error::Input(format!("input '{name}' is missing")))?;
                if t.shape != self.p.slots[*out].shape {
                    return Err(Error::Input(format!("input '{name}' has shape {:?}, the program was built for {:?}", t.shape, self.p.slots[*out].shape)));
                }
                Val::Cl(t.clone())
            }
            Step::ClientEval { node, ins, .. } => {
                if !self.knows_client() {
                    return Ok(Val::Unknown);
                }
                let mut ts: Vec<Option<Tensor>> = Vec::new();
                for s in ins {
                    ts.push(match s {
                        Src::Slot(k) => Some(self.cl(*k)?.cloned().ok_or_else(|| Error::Config("client value unknown".into()))?),
                        Src::Const(t) => Some(t.clone()),
                        Src::Absent => None,
                    });
                }
                let refs: Vec<Option<&Tensor>> = ts.iter().map(|t| t.as_ref()).collect();
                let mut out = eval_node(node, &refs).map_err(|e| Error::Input(e.to_string()))?;
                if out.is_empty() || out[0].shape != self.p.slots[st.out()].shape {
                    return Err(Error::Input(format!("a client-side step gave a value of another shape than the program's {:?}", self.p.slots[st.out()].shape)));
                }
                Val::Cl(out.swap_remove(0))
            }
            Step::Embed { ids, vocab, h, table, .. } => {
                let t = self.p.slots[*ids].shape.iter().product::<usize>();
                let mut oh = vec![0u64; vocab * t];
                if let Some(idt) = self.cl(*ids)? {
                    for (k, &v) in idt.v.iter().enumerate() {
                        if !(v >= 0.0 && v.fract() == 0.0 && (v as usize) < *vocab) {
                            return Err(Error::Input(format!("token id {v} at position {k} is outside the vocabulary (0..{vocab})")));
                        }
                        oh[v as usize * t + k] = 1;
                    }
                }
                let (vocab, h) = (*vocab, *h);
                // the HE preset: the client's rows picked from the server's
                // encrypted table (GraphHe::select), not one-hot × table
                if self.backend == LinearBackend::He && self.role != Role::Clear && !self.planning && self.he.as_ref().is_some_and(|he| he.can_select(h)) {
                    self.next_id += 1;
                    let idx: Vec<u32> = if self.knows_client() {
                        let idt = self.cl(*ids)?.ok_or_else(|| Error::Config("embedding: the client's token ids are missing".into()))?;
                        idt.v.iter().map(|&v| v as u32).collect()
                    } else {
                        Vec::new()
                    };
                    let tb = self.weights(|| table.iter().map(|&v| enc(ring, v, f)).collect());
                    let he = self.he.as_mut().expect("checked above");
                    return Ok(Val::Sh(he.select(&mut self.ctx, ch, vocab, h, &tb, &idx, t, ring)?));
                }
                if self.backend == LinearBackend::Triples {
                    // one-hot (T × vocab, the client's) · table (vocab × h, the server's)
                    let oh_t = transpose(&ArithShare::new(ring, oh), vocab, t);
                    let tb = self.weights(|| table.iter().map(|&v| enc(ring, v, f)).collect());
                    return Ok(Val::Sh(self.weight_matmul_as(ch, &oh_t, &tb, t, vocab, h, true)?));
                }
                let y = self.linear(
                    ch,
                    || {
                        let mut wt = vec![0u64; h * vocab];
                        for v in 0..vocab {
                            for j in 0..h {
                                wt[j * vocab + v] = enc(ring, table[v * h + j], f);
                            }
                        }
                        LinearOp::Conv { c_in: vocab as u32, h: 1, w: t as u32, c_out: h as u32, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4], weight: wt }
                    },
                    vocab,
                    vocab * t,
                    h * t,
                    &ArithShare::new(ring, oh),
                )?;
                Val::Sh(transpose(&y, h, t))
            }
            Step::Linear { x, rows, n_in, n_out, w, b, .. } => {
                let (rows, n_in, n_out) = (*rows, *n_in, *n_out);
                if self.backend == LinearBackend::Triples {
                    let xs = self.sh(*x)?.clone();
                    let ws = self.weights(|| w.iter().map(|&v| enc(ring, v, f)).collect());
                    let y = self.weight_matmul(ch, &xs, &ws, rows, n_in, n_out)?;
                    let y = if b.is_empty() { y } else { self.server_add(&y, |i| enc(ring, b[i % n_out], 2 * f)) };
                    return Ok(Val::Sh(self.ctx.trunc(ch, &y, f).map_err(tpc)?));
                }
                if self.backend == LinearBackend::He && self.role != Role::Clear && !self.planning {
                    self.next_id += 1;
                    let y = match self.he_fused.remove(&self.cur) {
                        Some(y) => y,
                        None => self.he_linear_group(ch)?,
                    };
                    let y = if b.is_empty() { y } else { self.server_add(&y, |i| enc(ring, b[i / rows], 2 * f)) };
                    let y = self.ctx.trunc(ch, &y, f).map_err(tpc)?;
                    return Ok(Val::Sh(transpose(&y, n_out, rows)));
                }
                let xt = transpose(self.sh(*x)?, rows, n_in);
                if self.backend == LinearBackend::He && self.role != Role::Clear {
                    let (bx, bo) = (self.p.slots[*x].bound, self.p.slots[st.out()].bound);
                    self.he_shift = crate::graph_he::linear_shift(bx, bo, f).ok_or_else(|| Error::Model(format!("linear layer '{}': its product does not fit the HE backend's ring", self.p.slots[st.out()].name)))?;
                }
                let y = self.linear(
                    ch,
                    || {
                        let mut wt = vec![0u64; n_out * n_in];
                        for i in 0..n_in {
                            for j in 0..n_out {
                                wt[j * n_in + i] = enc(ring, w[i * n_out + j], f);
                            }
                        }
                        LinearOp::Conv { c_in: n_in as u32, h: 1, w: rows as u32, c_out: n_out as u32, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4], weight: wt }
                    },
                    n_in,
                    n_in * rows,
                    n_out * rows,
                    &xt,
                )?;
                let y = if b.is_empty() { y } else { self.server_add(&y, |i| enc(ring, b[i / rows], 2 * f)) };
                let y = self.ctx.trunc(ch, &y, f).map_err(tpc)?;
                Val::Sh(transpose(&y, n_out, rows))
            }
            Step::AddConst { x, c, .. } => Val::Sh(self.server_add(self.sh(*x)?, |i| enc(ring, c[i], f))),
            Step::Scale { x, c, .. } => {
                let y = self.sh(*x)?.scale(enc(ring, *c, f));
                Val::Sh(self.ctx.trunc(ch, &y, f).map_err(tpc)?)
            }
            Step::ScaleVec { x, len, c, .. } => Val::Sh(self.scale_vec(ch, *x, *len, c)?),
            Step::Add { a, b, .. } => Val::Sh(self.sh(*a)?.add(self.sh(*b)?)),
            Step::Sub { a, b, .. } => Val::Sh(self.sh(*a)?.sub(self.sh(*b)?)),
            Step::Neg { x, .. } => Val::Sh(self.sh(*x)?.neg()),
            Step::Mul { a, b, .. } => {
                let bd = Bound::Proven { x: self.p.slots[*a].bound, y: self.p.slots[*b].bound };
                let (a, b) = (self.sh(*a)?.clone(), self.sh(*b)?.clone());
                Val::Sh(elementwise::mul(&mut self.ctx, ch, &a, &b, bd).map_err(tpc)?)
            }
            Step::Mask { x, m, clamp, .. } => {
                let xs = self.sh(*x)?.clone();
                match self.cl(*m)? {
                    None => Val::Sh(xs),
                    Some(mt) => {
                        let idx = self.p.mask_index(st).ok_or_else(|| Error::Model("mask: shapes".into()))?;
                        if mt.shape != self.p.slots[*m].shape {
                            return Err(Error::Input(format!("mask of shape {:?}, the program says {:?}", mt.shape, self.p.slots[*m].shape)));
                        }
                        let v = xs.v.iter().zip(idx).map(|(a, i)| ring.add(*a, enc(ring, mt.v[i].clamp(-clamp, *clamp), f))).collect();
                        Val::Sh(ArithShare { ring, v })
                    }
                }
            }
            Step::LayerNorm { x, len, eps, gamma, beta, .. } => {
                let xs = self.sh(*x)?.clone();
                // the slot's proven bound (widths from bounds: every preset but
                // dealer's): the clip's comparisons on the fewest exact bits, and
                // none at all within 2^11 (`layernorm_within`); the dealer preset's
                // public bound covers GeLU and Softmax inputs only
                let b = if self.widths { self.p.slots[*x].bound } else { f64::INFINITY };
                let y = layernorm::layernorm_within(&mut self.ctx, ch, &xs, *len, *eps, None, None, b).map_err(tpc)?;
                match (gamma.is_empty(), beta.is_empty()) {
                    (true, true) => Val::Sh(y),
                    (true, false) => Val::Sh(self.server_add(&y, |i| enc(ring, beta[i % len], f))),
                    (false, _) => {
                        let g = self.scale_cols(ch, &y, *len, gamma)?;
                        let g = if beta.is_empty() { g } else { self.server_add(&g, |i| enc(ring, beta[i % len], 2 * f)) };
                        Val::Sh(self.ctx.trunc(ch, &g, f).map_err(tpc)?)
                    }
                }
            }
            Step::Gelu { x, .. } => {
                let xs = self.sh(*x)?.clone();
                let b = self.cmp_bound(*x, true);
                Val::Sh(gelu::gelu_within(&mut self.ctx, ch, &xs, b).map_err(tpc)?)
            }
            Step::Tanh { x, .. } => {
                let xs = self.sh(*x)?.clone();
                Val::Sh(tanh::tanh(&mut self.ctx, ch, &xs).map_err(tpc)?)
            }
            Step::Pool { x, m, d, axis, .. } => {
                let xs = self.sh(*x)?.clone();
                let (im, id) = self.p.pool_index(st).ok_or_else(|| Error::Model("pool: shapes".into()))?;
                let w = match (self.cl(*m)?, self.cl(*d)?) {
                    (Some(mt), Some(dt)) => {
                        let shape = &self.p.slots[*x].shape;
                        let inner: usize = shape[axis + 1..].iter().product();
                        let n_ax = shape[*axis].max(1);
                        let mut w = Vec::with_capacity(xs.len());
                        let mut mass = vec![0.0f64; xs.len() / n_ax];
                        for i in 0..xs.len() {
                            let v = mt.v[im[i]] / dt.v[id[i]];
                            if !v.is_finite() {
                                return Err(Error::Input(format!("pooling weight {v} (mask / count)")));
                            }
                            mass[(i / (inner * n_ax)) * inner + i % inner] += v.abs();
                            w.push(enc(ring, v, f));
                        }
                        if let Some(m) = mass.iter().find(|&&m| m > 1.0 + 1e-6) {
                            return Err(Error::Input(format!("pooling weights (mask / count) summing to {m} in absolute value: only means (at most 1) are supported")));
                        }
                        ArithShare::new(ring, w)
                    }
                    _ => ArithShare::zeros(ring, xs.len()),
                };
                let prod = elementwise::mul(&mut self.ctx, ch, &xs, &w, Bound::Proven { x: self.p.slots[*x].bound, y: 1.0 }).map_err(tpc)?;
                let shape = &self.p.slots[*x].shape;
                let inner: usize = shape[axis + 1..].iter().product();
                let n_ax = shape[*axis];
                let mut out = vec![0u64; xs.len() / n_ax.max(1)];
                for (i, v) in prod.v.iter().enumerate() {
                    let o = (i / (inner * n_ax)) * inner + i % inner;
                    out[o] = ring.add(out[o], *v);
                }
                Val::Sh(ArithShare::new(ring, out))
            }
            Step::L2Norm { x, len, .. } => {
                let xs = self.sh(*x)?.clone();
                Val::Sh(self.l2norm(ch, &xs, *len)?)
            }
            Step::Softmax { x, len, .. } => {
                let xs = self.sh(*x)?.clone();
                let b = self.cmp_bound(*x, false);
                Val::Sh(softmax::softmax_within(&mut self.ctx, ch, &xs, *len, b).map_err(tpc)?)
            }
            Step::MatMul { a, b, count, m, k, n, .. } => {
                let (bx, by) = (self.p.slots[*a].bound, self.p.slots[*b].bound);
                let bd = Bound::Proven { x: bx, y: by };
                let (av, bv) = (self.sh(*a)?.clone(), self.sh(*b)?.clone());
                if self.plan.interactive.is_none() {
                    let z = matmul::matmul(&mut self.ctx, ch, &av, &bv, *count, MatDims { m: *m, k: *k, n: *n }, bd).map_err(tpc)?;
                    self.check_clear_bound(st, &z)?;
                    return Ok(Val::Sh(z));
                }
                // interactive preset: HE cross products (the product's own proven bound
                // decides whether it fits: graph_he::pre_shift_bounded; exact also beyond
                // the HE ring: GraphHe::matmul_shared_wide) or OT matrix triples,
                // the plan's entry or per shape by cost (graph_he::choose_shared)
                hush_2pc::transformer::range::check_product(&self.ctx, *k, bd, "matmul").map_err(tpc)?;
                let (av, bv) = hush_2pc::transformer::range::apply(&mut self.ctx, ch, &av, &bv, bd, "matmul").map_err(tpc)?;
                let shift = crate::graph_he::pre_shift_bounded(*k, bx, by, self.p.slots[st.out()].bound, f);
                let z = match self.he.as_mut() {
                    Some(he) => {
                        let use_he = match (self.forced, shift) {
                            (Some(LinearBackend::He), None) => return Err(Error::Model(format!("matmul: operands bounded by {bx:.3e} and {by:.3e} (sums of {k}) do not fit the HE backend's ring"))),
                            (Some(LinearBackend::He), _) => true,
                            (Some(_), _) => false,
                            (None, s) => crate::graph_he::choose_shared(he, s.is_some(), *count, *m, *k, *n)?,
                        };
                        match (use_he, shift) {
                            (true, Some((0, 0))) => he.matmul_shared(&mut self.ctx, ch, &av, &bv, *count, *m, *k, *n)?,
                            (true, Some((da, db))) => he.matmul_shared_wide(&mut self.ctx, ch, &av, &bv, *count, *m, *k, *n, da, db)?,
                            _ => self.ctx.matmul(ch, &av, &bv, *count, MatDims { m: *m, k: *k, n: *n }).map_err(tpc)?,
                        }
                    }
                    None => self.ctx.matmul(ch, &av, &bv, *count, MatDims { m: *m, k: *k, n: *n }).map_err(tpc)?,
                };
                let z = self.ctx.trunc(ch, &z, f).map_err(tpc)?;
                self.check_clear_bound(st, &z)?;
                Val::Sh(z)
            }
            Step::Move { ins, .. } => {
                let map = self.p.move_map(st).map_err(|e| Error::Model(e.to_string()))?;
                let ss: Vec<&ArithShare> = ins.iter().filter_map(|s| if let Src::Slot(k) = s { Some(*k) } else { None }).map(|k| self.sh(k)).collect::<Result<_>>()?;
                Val::Sh(ArithShare { ring, v: map.iter().map(|&(s, i)| ss[s as usize].v[i as usize]).collect() })
            }
        })
    }

    /// The fixed-point reference's check of a secret × secret product
    /// against its proven bound (the product bounds of
    /// `hush_onnx::graph`'s `matmul_bound`: k·|A|·|B|, P·V's softmax row
    /// sum, Q·Kᵀ's Cauchy–Schwarz bound, which the HE backend's fit relies
    /// on): an entry beyond it is an error naming the value. Only the
    /// clear reference sees values; the parties check nothing.
    fn check_clear_bound(&self, st: &Step, z: &ArithShare) -> Result<()> {
        if self.role != Role::Clear {
            return Ok(());
        }
        let (bo, sf) = (self.p.slots[st.out()].bound, (self.fx.frac as f64).exp2());
        match z.v.iter().map(|&v| self.ring.to_signed(v) as f64 / sf).find(|v| v.abs() > bo) {
            Some(v) => Err(Error::Model(format!("matmul '{}': the reference's product {v} exceeds its proven bound {bo} (the bound's proof is wrong)", self.p.slots[st.out()].name))),
            None => Ok(()),
        }
    }

    /// x · c per position of the last axis (the server's c): a module-dealt
    /// per-channel scale on the transposed value, then one truncation.
    fn scale_vec(&mut self, ch: &mut dyn Channel, x: usize, len: usize, c: &[f64]) -> Result<ArithShare> {
        let f = self.fx.frac;
        let xs = self.sh(x)?.clone();
        let y = self.scale_cols(ch, &xs, len, c)?;
        self.ctx.trunc(ch, &y, f).map_err(tpc)
    }

    /// Each row of `len` divided by its L2 norm: Σx² (exact), brought to
    /// scale 2^[`L2_SCALE`], rsqrt by Newton's iteration on
    /// [2^[`L2_LO`], 2^[`L2_HI`]] ([`hush_2pc::transformer::recip::rsqrt`]),
    /// x·rsqrt, one truncation (as in [`crate::encoder`]'s normalisation).
    fn l2norm(&mut self, ch: &mut dyn Channel, x: &ArithShare, len: usize) -> Result<ArithShare> {
        let (ring, f) = (self.ring, self.fx.frac);
        let sq = self.ctx.powers(ch, x, 2).map_err(tpc)?.pop().ok_or_else(|| Error::Config("powers".into()))?;
        let sums = ArithShare::new(ring, sq.v.chunks(len).map(|c| c.iter().fold(0u64, |a, v| ring.add(a, *v))).collect());
        let v = if 2 * f > L2_SCALE { self.ctx.trunc(ch, &sums, 2 * f - L2_SCALE).map_err(tpc)? } else { sums.scale(1u64 << (L2_SCALE - 2 * f)) };
        let r = hush_2pc::transformer::recip::rsqrt(&mut self.ctx, ch, &v, L2_SCALE, L2_LO, L2_HI).map_err(tpc)?;
        let rb = ArithShare::new(ring, (0..x.len()).map(|i| r.v[i / len]).collect());
        let y = self.ctx.mul(ch, x, &rb).map_err(tpc)?;
        self.ctx.trunc(ch, &y, L2_SCALE).map_err(tpc)
    }

    fn run(&mut self, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>) -> Result<Vec<ArithShare>> {
        self.run_with(ch, inputs, |_, _| Ok(()))
    }

    /// Runs every step; `before(ctx, i)` is called before step `i` (the
    /// look-ahead installs that step's correlations there).
    fn run_with(&mut self, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>, mut before: impl FnMut(&mut Ctx, usize) -> Result<()>) -> Result<Vec<ArithShare>> {
        self.vals = vec![None; self.p.slots.len()];
        self.meter.clear();
        self.he_fused.clear();
        for (i, st) in self.p.steps.iter().enumerate() {
            self.cur = i;
            self.backend = self.plan.backend(i);
            self.forced = self.plan.per_step.as_ref().and_then(|v| v.get(i).copied().flatten());
            if self.role == Role::Clear && self.backend == LinearBackend::He {
                // the reference computes X·W exactly (in the clear), as the HE backend does within its bound
                self.backend = LinearBackend::Module;
            }
            let (t0, c0) = (Instant::now(), ch.cost());
            if let Some((p, tag)) = self.probe {
                (p.restart_peak)(tag);
            }
            before(&mut self.ctx, i)?;
            let wait_s = t0.elapsed().as_secs_f64();
            let v = self.step(ch, st, inputs).map_err(|e| match e {
                Error::Nonlinear(m) => Error::Nonlinear(format!("{} → '{}': {m}", st.kind(), self.p.slots[st.out()].name)),
                e => e,
            })?;
            self.vals[st.out()] = Some(v);
            let c1 = ch.cost();
            self.meter.push(StepCost { secs: t0.elapsed().as_secs_f64(), bytes_sent: c1.bytes_sent - c0.bytes_sent, bytes_recv: c1.bytes_recv - c0.bytes_recv, rounds: c1.rounds - c0.rounds, wait_s, peak_bytes: self.probe.map(|(p, tag)| (p.peak)(tag).max(0) as u64) });
        }
        self.p.outputs.iter().map(|(_, s)| self.sh(*s).cloned()).collect()
    }

    /// What each step consumes from the provider, in order: the program run
    /// once in plan mode ([`Ctx::begin_plan`]: nothing computed by the
    /// protocols, nothing sent, the module-dealt path skipped). The needs
    /// are a function of the public program and the plan alone, so both
    /// parties derive the same list; a divergence would surface as a
    /// "preprocessing plan mismatch" error at the first differing item.
    fn plan_steps(&mut self, inputs: &HashMap<String, Tensor>) -> Result<Vec<Vec<hush_2pc::transformer::ctx::Need>>> {
        let (id0, saved) = (self.next_id, std::mem::take(&mut self.vals));
        self.planning = true;
        let (mut unused, _peer) = MemChannel::pair();
        let mut needs = Vec::with_capacity(self.p.steps.len());
        self.vals = vec![None; self.p.slots.len()];
        let r = (|| {
            for (i, st) in self.p.steps.iter().enumerate() {
                self.backend = self.plan.backend(i);
                self.ctx.begin_plan().map_err(tpc)?;
                let v = self.step(&mut unused, st, inputs);
                let n = self.ctx.end_plan().map_err(tpc)?;
                self.vals[st.out()] = Some(v?);
                needs.push(n);
            }
            Ok(())
        })();
        self.planning = false;
        self.next_id = id0;
        self.vals = saved;
        r.map(|_| needs)
    }

    /// [`Exec::run`] with the provider's work moved off the online path: the
    /// needs of every step are planned first ([`Exec::plan_steps`]), then a
    /// dealing thread with its own context on the same provider deals them
    /// step by step ([`Ctx::deal_plan`]), at most [`DEAL_AHEAD_STEPS`] steps
    /// ahead, while this thread runs the steps on what it installs. The
    /// online context never deals. With a dealer as the provider, the
    /// dealer computes and ships step i + 1's correlations while the
    /// parties compute step i; with the parties' own modules, the dealing
    /// runs on the core the ping-pong of the online phase leaves idle.
    ///
    /// **Why this changes nothing of the views.** The same correlations
    /// are dealt, in the same order and with the same batch numbers, as
    /// lazy dealing would deal them (one context deals them all); only
    /// their timing moves, and dealing is input-independent. The dealing
    /// thread sends nothing to the peer.
    fn run_ahead(&mut self, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>, module: SharedModule) -> Result<Vec<ArithShare>> {
        let needs = self.plan_steps(inputs)?;
        let (party, proto, fx) = (self.ctx.party, self.ctx.proto(), self.ctx.fx);
        let (k, arity, one_round) = (self.ctx.k, self.ctx.arity, self.ctx.one_round);
        let (tx, rx) = std::sync::mpsc::sync_channel::<hush_2pc::Result<hush_2pc::transformer::ctx::Prefilled>>(deal_ahead_steps());
        // the worker's allocations count for this party (heap meter)
        let tag = hush_transport::helper_thread_context();
        std::thread::scope(|sc| {
            let needs = &needs;
            let worker = sc.spawn(move || {
                if let Some((t, set)) = tag {
                    set(t);
                }
                let mut d = match Ctx::new(party, proto, Dealer::new(Box::new(module)), fx) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                (d.k, d.arity, d.one_round) = (k, arity, one_round);
                for n in needs.iter().filter(|n| !n.is_empty()) {
                    let r = d.deal_plan(n);
                    let stop = r.is_err();
                    if tx.send(r).is_err() || stop {
                        return; // the online side stopped, or dealing failed
                    }
                }
            });
            let r = self.run_with(ch, inputs, |ctx, i| {
                ctx.lazy().map_err(tpc)?;
                if needs[i].is_empty() {
                    return Ok(());
                }
                let pre = rx.recv().map_err(|_| Error::Config("the dealing thread stopped".into()))?.map_err(tpc)?;
                ctx.install(pre).map_err(tpc)
            });
            drop(rx);
            let joined = worker.join();
            let r = r.and_then(|o| {
                self.ctx.lazy().map_err(tpc)?;
                Ok(o)
            });
            match joined {
                Ok(()) => r,
                Err(_) => r.and(Err(Error::Config("the dealing thread panicked".into()))),
            }
        })
    }
}

/// Steps the dealing thread of [`Exec::run_ahead`] may run ahead of the
/// online phase (their correlations are held meanwhile). Measured on
/// BERT-base at seq 128, lan, idle (2026-11-29, Intel Xeon, 2 cores):
/// 2 → 6 steps cut the online thread's wait for correlations from 2.1 s
/// to 0.5 s in dealer mode (29.7 → 28.1–29.1 s) and from 1.3–1.5 s to
/// 0.05 s in tee mode (22.9–23.8 → 22.1–22.7 s), for about 90 MB more at
/// the client (peak RSS 894 → 987 MB in dealer mode).
pub const DEAL_AHEAD_STEPS: usize = 6;

/// [`DEAL_AHEAD_STEPS`], or `HUSH_DEAL_AHEAD` (1–64) when set (a tuning
/// knob for measurements; the correlations dealt and their order do not
/// depend on it).
pub fn deal_ahead_steps() -> usize {
    std::env::var("HUSH_DEAL_AHEAD").ok().and_then(|v| v.parse::<usize>().ok()).filter(|v| (1..=64).contains(v)).unwrap_or(DEAL_AHEAD_STEPS)
}

/// Per-run figures.
#[derive(Clone, Debug, Default)]
pub struct GraphStats {
    pub seconds: f64,
    pub bytes: u64,
    pub rounds: u64,
}

/// One party's run over `ch` in tee mode (an in-process simulated module
/// paired with the peer's). `prog` is the server's program (with weights)
/// at the server and the public one at the client; `inputs` are the
/// client's (empty at the server). Returns the outputs at the client.
pub fn party_tee(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>) -> Result<Option<Vec<Tensor>>> {
    let mut module = SharedModule::new(Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()))));
    hush_tee::establish(&mut module, ch, if role == Role::Server { ModuleRole::Sender } else { ModuleRole::Receiver })?;
    party_with(role, prog, o, ch, inputs, module)
}

/// One party's run with an established correlation provider (a trusted
/// module, simulated, or a dealer connection).
pub fn party_with(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>, module: SharedModule) -> Result<Option<Vec<Tensor>>> {
    party_metered(role, prog, o, ch, inputs, module).map(|r| r.0)
}

/// [`party_with`], also returning this party's cost per step. Deals on a
/// look-ahead thread ([`DEAL_AHEAD_STEPS`]) unless `HUSH_LOOKAHEAD=0`.
pub fn party_metered(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>, module: SharedModule) -> Result<(Option<Vec<Tensor>>, Vec<StepCost>)> {
    party_run(role, prog, o, ch, inputs, module, crate::engine::lookahead_env())
}

/// [`party_metered`] with the look-ahead chosen (`ahead`: a dealing thread
/// deals each step's correlations ahead of it; otherwise each primitive
/// deals when called).
pub fn party_run(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>, module: SharedModule, ahead: bool) -> Result<(Option<Vec<Tensor>>, Vec<StepCost>)> {
    party_run_probed(role, prog, o, ch, inputs, module, ahead, None)
}

/// [`party_run`], metering this party's heap peak per step with `probe`
/// (the meter and the party's tag; [`StepCost::peak_bytes`]).
#[allow(clippy::too_many_arguments)]
pub fn party_run_probed(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>, module: SharedModule, ahead: bool, probe: Option<(crate::runtime::MemProbe, usize)>) -> Result<(Option<Vec<Tensor>>, Vec<StepCost>)> {
    if role == Role::Server && !prog.has_weights {
        return Err(Error::Config("graph: the server's program has no weights".into()));
    }
    check_program(prog, o.fx)?;
    let fp = FixedPoint::new(o.fx.bits, o.fx.frac).map_err(tpc)?;
    let ctx = Ctx::new(u8::from(role != Role::Server), o.proto, Dealer::new(Box::new(module.clone())), fp).map_err(tpc)?;
    let mut ex = Exec { role, backend: o.linear, plan: o.clone(), meter: Vec::new(), widths: o.widths_from_bounds, public_bound: o.public_bound, p: prog, fx: o.fx, ring: fp.ring, ctx, module: Some(module.clone()), he: None, forced: None, he_shift: 0, cur: 0, he_fused: HashMap::new(), next_id: 0, vals: Vec::new(), planning: false, probe };
    let outs = if ahead { ex.run_ahead(ch, inputs, module)? } else { ex.run(ch, inputs)? };
    let meter = std::mem::take(&mut ex.meter);
    Ok((reveal(role, prog, o, ch, &outs)?, meter))
}

/// The outputs revealed to the client (the server sends its shares).
fn reveal(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, outs: &[ArithShare]) -> Result<Option<Vec<Tensor>>> {
    let ring = FixedPoint::new(o.fx.bits, o.fx.frac).map_err(tpc)?.ring;
    let flat: Vec<u64> = outs.iter().flat_map(|s| s.v.iter().copied()).collect();
    if role == Role::Server {
        linear::send_ring(ch, &o.fx, &flat)?;
        return Ok(None);
    }
    let other = linear::recv_ring(ch, &o.fx, flat.len(), "graph: the server's share of the outputs")?;
    let mut res = Vec::new();
    let mut off = 0;
    for ((_, s), sh) in prog.outputs.iter().zip(outs) {
        let v = (0..sh.len()).map(|i| o.fx.decode(ring.add(sh.v[i], other[off + i]))).collect();
        off += sh.len();
        res.push(Tensor::new(prog.slots[*s].shape.clone(), v));
    }
    Ok(Some(res))
}

/// What a run asked of a trusted party: the interactive preset's test
/// asserts both are zero/false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProviderUse {
    /// A module or a dealer connection was constructed for the run.
    pub module: bool,
    /// The operators' context had a dealer handle (through which any
    /// module or dealer request would go).
    pub dealer_handle: bool,
}

/// One party's run of a plan, on the provider the plan names — the one
/// place a graph session branches on where its correlations come from
/// (issue 28): the **interactive provider** (no module and no dealer;
/// `module` is not called) when the plan is the interactive preset, else
/// the module or dealer connection `module` establishes over the session's
/// channel (the provider constructors of [`crate::provider`]), dealing
/// ahead ([`party_run_probed`]). `diagnose` explains a failure with the
/// module at hand (a dealer that ended the session).
#[allow(clippy::too_many_arguments)]
pub fn party_planned(
    role: Role,
    prog: &Program,
    o: &GraphOptions,
    ch: &mut dyn Channel,
    inputs: &HashMap<String, Tensor>,
    probe: Option<(crate::runtime::MemProbe, usize)>,
    module: impl FnOnce(&mut dyn Channel) -> Result<SharedModule>,
    diagnose: impl FnOnce(&mut SharedModule, Error) -> Error,
) -> Result<(Option<Vec<Tensor>>, Vec<StepCost>)> {
    if o.interactive.is_some() {
        return party_interactive(role, prog, o, ch, inputs).map(|(y, m, _)| (y, m));
    }
    let mut m = module(ch)?;
    party_run_probed(role, prog, o, ch, inputs, m.clone(), crate::engine::lookahead_env(), probe).map_err(|e| diagnose(&mut m, e))
}

/// One party's run in the **interactive preset** ([`GraphOptions::interactive`]):
/// no module and no dealer. Sets up COTs in both directions (`setup.source`,
/// party 0 = the server first), then the RLWE keys (client → server), then
/// runs every step lazily on the interactive context (each correlation made
/// with the peer just before its use) and reveals the outputs to the client.
pub fn party_interactive(role: Role, prog: &Program, o: &GraphOptions, ch: &mut dyn Channel, inputs: &HashMap<String, Tensor>) -> Result<(Option<Vec<Tensor>>, Vec<StepCost>, ProviderUse)> {
    use hush_primitives::{Block, Prg};
    let setup = o.interactive.as_ref().ok_or_else(|| Error::Config("party_interactive: the plan is not the interactive preset".into()))?;
    if role == Role::Clear {
        return Err(Error::Config("party_interactive: a party is the server or the client".into()));
    }
    if role == Role::Server && !prog.has_weights {
        return Err(Error::Config("graph: the server's program has no weights".into()));
    }
    check_program(prog, o.fx)?;
    o.validate(prog, false)?;
    let party = u8::from(role != Role::Server);
    let prg = |salt: u128| match setup.seed {
        Some(s) => Prg::new(Block(((s as u128) << 64) ^ (salt << 8) ^ party as u128)),
        None => Prg::from_os(),
    };
    let sc = hush_correlations::registry::SourceConfig::named(&setup.source);
    let ot = hush_2pc::beaver::OtSession::setup(ch, party, &sc, &mut prg(1)).map_err(|e| Error::Nonlinear(format!("COT setup ({}): {e}", sc.name)))?;
    let he = crate::graph_he::GraphHe::setup(ch, role == Role::Server, &setup.he_params, prg(2))?;
    let fp = FixedPoint::new(o.fx.bits, o.fx.frac).map_err(tpc)?;
    let ctx = Ctx::new_interactive(party, ot, fp).map_err(tpc)?;
    let mut ex = Exec { role, backend: o.linear, plan: o.clone(), meter: Vec::new(), widths: o.widths_from_bounds, public_bound: o.public_bound, p: prog, fx: o.fx, ring: fp.ring, ctx, module: None, he: Some(he), forced: None, he_shift: 0, cur: 0, he_fused: HashMap::new(), next_id: 0, vals: Vec::new(), planning: false, probe: None };
    let outs = ex.run(ch, inputs)?;
    let used = ProviderUse { module: ex.module.is_some(), dealer_handle: ex.ctx.dealer().is_some() };
    let meter = std::mem::take(&mut ex.meter);
    Ok((reveal(role, prog, o, ch, &outs)?, meter, used))
}

/// Both parties in this process over an in-memory channel (tee mode,
/// simulated modules): the outputs and the run's figures.
pub fn run_private(prog: &Program, inputs: &HashMap<String, Tensor>, o: &GraphOptions) -> Result<(Vec<Tensor>, GraphStats)> {
    run_private_on(prog, inputs, o, &hush_transport::NetProfile::none()).map(|(y, st, _)| (y, st))
}

/// [`run_private`] over an emulated network, with both parties' cost per
/// step: (server's, client's).
pub type StepCosts = (Vec<StepCost>, Vec<StepCost>);

/// Both parties in this process (tee mode) over an emulated link `net`.
pub fn run_private_on(prog: &Program, inputs: &HashMap<String, Tensor>, o: &GraphOptions, net: &hush_transport::NetProfile) -> Result<(Vec<Tensor>, GraphStats, StepCosts)> {
    run_private_measured(prog, inputs, o, net, &hush_transport::ClientProfile::none(), false)
}

/// [`run_private_on`] with the client's thread under `profile`'s CPU share
/// ([`hush_transport::CpuLimit`]: the client's thread and its dealing
/// thread; the shared rayon pool is not limited) and, with `mem`, the
/// client's heap peak metered per step ([`StepCost::peak_bytes`]; needs the
/// `hush` binary's heap meter, [`crate::runtime::mem_probe`]).
pub fn run_private_measured(prog: &Program, inputs: &HashMap<String, Tensor>, o: &GraphOptions, net: &hush_transport::NetProfile, profile: &hush_transport::ClientProfile, mem: bool) -> Result<(Vec<Tensor>, GraphStats, StepCosts)> {
    let probe = if mem {
        Some(crate::runtime::mem_probe().ok_or_else(|| Error::Config("measuring the client's memory per step needs the hush binary's heap meter (not installed in this process)".into()))?)
    } else {
        None
    };
    let public = prog.public();
    let (ca, cb) = MemChannel::pair_with(hush_transport::ChannelOptions { profile: net.clone(), ..Default::default() });
    let t = Instant::now();
    let tee = |ch: &mut dyn Channel, role: Role, p: &Program, inp: &HashMap<String, Tensor>, pr: Option<(crate::runtime::MemProbe, usize)>| -> Result<(Option<Vec<Tensor>>, Vec<StepCost>)> {
        let tee_modules = |ch: &mut dyn Channel| -> Result<SharedModule> {
            let mut module = SharedModule::new(Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()))));
            hush_tee::establish(&mut module, ch, if role == Role::Server { ModuleRole::Sender } else { ModuleRole::Receiver })?;
            Ok(module)
        };
        party_planned(role, p, o, ch, inp, pr, tee_modules, |_, e| e)
    };
    let (rs, rc) = std::thread::scope(|sc| {
        let hs = sc.spawn(move || {
            let mut ca = ca;
            let r = tee(&mut ca, Role::Server, prog, &HashMap::new(), None);
            (r, ca.cost())
        });
        let public = &public;
        let hc = sc.spawn(move || {
            if let Some(p) = probe {
                (p.enter)(CLIENT_TAG);
            }
            // the client profile's CPU share on this thread (and the
            // dealing thread it starts), lifted with `limit`
            let limit = hush_transport::CpuLimit::apply(profile.cpu_share());
            let mut cb = hush_transport::Throttled { inner: cb, limit };
            let r = tee(&mut cb, Role::Client, public, inputs, probe.map(|p| (p, CLIENT_TAG)));
            (r, cb.inner.cost())
        });
        (hs.join(), hc.join())
    });
    let ((rs, cs), (rc, cc)) = (rs.map_err(|_| Error::Config("server thread panicked".into()))?, rc.map_err(|_| Error::Config("client thread panicked".into()))?);
    let ((_, ms), (y, mc)) = match (rs, rc) {
        // the party that failed first, not the peer it left behind
        (Err(es), Err(ec)) => return Err(if ec.to_string().contains("peer disconnected") && !es.to_string().contains("peer disconnected") { es } else { ec }),
        (_, Err(e)) | (Err(e), _) => return Err(e),
        (Ok(a), Ok(b)) => (a, b),
    };
    let y = y.ok_or_else(|| Error::Config("the client got no result".into()))?;
    Ok((y, GraphStats { seconds: t.elapsed().as_secs_f64(), bytes: cs.bytes_sent + cc.bytes_sent, rounds: cs.rounds.max(cc.rounds) as u64 }, (ms, mc)))
}

/// The heap meter's tag of the client party.
const CLIENT_TAG: usize = 1;

/// The fixed-point reference: the same steps with both parties' data in
/// one place ([`Ctx::clear`], exact ring arithmetic, floor truncation).
pub fn run_clear(prog: &Program, inputs: &HashMap<String, Tensor>, o: &GraphOptions) -> Result<Vec<Tensor>> {
    check_program(prog, o.fx)?;
    let fp = FixedPoint::new(o.fx.bits, o.fx.frac).map_err(tpc)?;
    let mut ex = Exec { role: Role::Clear, backend: o.linear, plan: o.clone(), meter: Vec::new(), widths: o.widths_from_bounds, public_bound: o.public_bound, p: prog, fx: o.fx, ring: fp.ring, ctx: Ctx::clear(fp), module: None, he: None, forced: None, he_shift: 0, cur: 0, he_fused: HashMap::new(), next_id: 0, vals: Vec::new(), planning: false, probe: None };
    let (mut dummy, _peer) = MemChannel::pair();
    let outs = ex.run(&mut dummy, inputs)?;
    Ok(prog.outputs.iter().zip(outs).map(|((_, s), sh)| Tensor::new(prog.slots[*s].shape.clone(), sh.v.iter().map(|&x| o.fx.decode(x)).collect())).collect())
}

/// Whether an ONNX file is one of the `hush.encoder` graphs (read with its
/// size checked first).
pub fn is_hush_encoder_file(path: &std::path::Path) -> Result<bool> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let mut b = Vec::new();
    f.take(hush_onnx::MAX_FILE_BYTES + 1).read_to_end(&mut b).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    Ok(hush_onnx::encoder::is_hush_encoder(&b))
}

/// The client's inputs by the graph's input names: `input_ids` and
/// `attention_mask` from `--ids`/`--mask`, `token_type_ids` from
/// `--token-types` or zeros. Any other input is refused by name.
pub fn graph_inputs(g: &hush_onnx::graph::GraphModel, ids: &std::path::Path, mask: &std::path::Path, types: Option<&std::path::Path>) -> Result<HashMap<String, Tensor>> {
    let names: Vec<&str> = g.inputs.iter().map(|i| i.name.as_str()).collect();
    token_inputs(&names, ids, mask, types)
}

/// The standard encoder inputs by name (`input_ids`, `attention_mask`,
/// `token_type_ids`) for the names given.
pub fn token_inputs(names: &[&str], ids: &std::path::Path, mask: &std::path::Path, types: Option<&std::path::Path>) -> Result<HashMap<String, Tensor>> {
    let (si, vi) = crate::npy::read(ids)?;
    let (sm, vm) = crate::npy::read(mask)?;
    if si.len() != 2 || si != sm {
        return Err(Error::Input(format!("ids {si:?} and mask {sm:?} must be two arrays of the same 2-D shape")));
    }
    if let Some(r) = vm.iter().position(|&m| m != 0.0 && m != 1.0) {
        return Err(Error::Input(format!("mask value {} at {r}: expected 0 or 1", vm[r])));
    }
    let mut out = HashMap::new();
    for name in names {
        let t = match *name {
            "input_ids" => Tensor::ints(si.clone(), vi.clone()),
            "attention_mask" => Tensor::ints(si.clone(), vm.clone()),
            "token_type_ids" => match types {
                Some(p) => {
                    let (st, vt) = crate::npy::read(p)?;
                    if st != si {
                        return Err(Error::Input(format!("token types {st:?} for ids {si:?}")));
                    }
                    Tensor::ints(st, vt)
                }
                None => Tensor::ints(si.clone(), vec![0.0; vi.len()]),
            },
            o => return Err(Error::Input(format!("the graph's input '{o}' has no source (hush embed gives input_ids, attention_mask and token_type_ids)"))),
        };
        out.insert(name.to_string(), t);
    }
    Ok(out)
}

/// A party's time, bytes sent and received and rounds per operator type (the records'
/// `by_op`), from its per-step meter.
pub fn by_op(prog: &Program, meter: &[StepCost]) -> serde_json::Value {
    let mut by_op = serde_json::Map::new();
    for (st, c) in prog.steps.iter().zip(meter) {
        let e = by_op.entry(st.kind().to_string()).or_insert_with(|| serde_json::json!({"secs": 0.0, "wait_s": 0.0, "bytes_sent": 0u64, "bytes_recv": 0u64, "rounds": 0u64}));
        e["secs"] = serde_json::json!(e["secs"].as_f64().unwrap_or(0.0) + c.secs);
        e["wait_s"] = serde_json::json!(e["wait_s"].as_f64().unwrap_or(0.0) + c.wait_s);
        e["bytes_sent"] = serde_json::json!(e["bytes_sent"].as_u64().unwrap_or(0) + c.bytes_sent);
        e["bytes_recv"] = serde_json::json!(e["bytes_recv"].as_u64().unwrap_or(0) + c.bytes_recv);
        e["rounds"] = serde_json::json!(e["rounds"].as_u64().unwrap_or(0) + c.rounds as u64);
    }
    serde_json::Value::Object(by_op)
}

/// `hush embed` on a graph that is not a `hush.encoder` graph: the graph
/// runtime, both parties in this process, tee mode (simulated modules).
pub fn embed_graph_main(a: &crate::encoder::EmbedCommandOptions, model: &std::path::Path, fx: FixedConfig, proto: Proto) -> Result<()> {
    let t0 = Instant::now();
    let g = hush_onnx::graph::GraphModel::from_file(model).map_err(|e| {
        Error::Model(format!(
            "{}: not an encoder graph hush can run ({e}); hush embed takes graphs as torch.onnx.export or optimum write them, or the hush.encoder graphs of scripts/minilm.py (CNNs go through hush serve/run)",
            model.display()
        ))
    })?;
    let inputs = graph_inputs(&g, &a.ids, &a.mask, a.token_types.as_deref())?;
    let shapes = inputs.iter().map(|(k, v)| (k.clone(), v.shape.clone())).collect();
    // the output a served session computes by default (`--output`, else the
    // graph's first): the same program, so the same run bit for bit under a seed
    let outs: Vec<String> = match &a.output {
        Some(o) => vec![o.clone()],
        None => g.outputs.iter().take(1).cloned().collect(),
    };
    let prog = g.instantiate_outputs(&shapes, &outs).map_err(|e| Error::Model(e.to_string()))?;
    let mut setup = match a.common.mode.as_str() {
        "interactive" => Some(InteractiveSetup::default()),
        "silent" => Some(InteractiveSetup::silent()),
        _ => None,
    };
    // checked against the mode and warned about in `hush embed`'s entry (`commands::options`)
    if let Some(h) = &a.common.insecure_test_seed {
        let s = crate::commands::hex_seed(h).ok_or_else(|| Error::Config("--insecure-test-seed: 64 hex digits".into()))?;
        if let Some(setup) = setup.as_mut() {
            setup.seed = Some(u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]));
        }
    }
    let mode = setup.as_ref().map_or("tee", |s| s.mode());
    let note = setup.as_ref().map_or("tee mode: trusted module simulated — gives no hardware protection", |s| s.note());
    let o = match setup {
        Some(s) => GraphOptions::interactive(fx, s),
        None => GraphOptions::tee(fx, proto),
    };
    check_program(&prog, fx)?;
    let net = hush_transport::NetProfile::by_name(&a.common.net).ok_or_else(|| Error::Config(format!("--net {}: one of {}", a.common.net, hush_transport::NetProfile::names().join(", "))))?;
    let (o, _) = crate::graph_plan::resolve(&PlanChoice::from_arg(a.plan.as_deref())?, &o, &prog, &net, false)?;
    let load_s = t0.elapsed().as_secs_f64();
    let (y, st, (_, client_meter)) = run_private_on(&prog, &inputs, &o, &net)?;
    let first = y.first().ok_or_else(|| Error::Model("the graph has no outputs".into()))?;
    crate::npy::write(&a.out, &first.shape, &first.v)?;
    let check = if a.check {
        let c = run_clear(&prog, &inputs, &o)?;
        let fl = g.eval_f64(&inputs).map_err(|e| Error::Model(e.to_string()))?;
        let d = |p: &Tensor, q: &Tensor| p.v.iter().zip(&q.v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        Some((d(first, &c[0]), d(first, &fl[0])))
    } else {
        None
    };
    let rec = serde_json::json!({
        "cmd": "embed",
        "runtime": "graph",
        "model": model.display().to_string(),
        "program": prog.fingerprint(),
        "ops": prog.op_counts().iter().map(|(k, n)| serde_json::json!({"op": k, "count": n})).collect::<Vec<_>>(),
        "output": prog.outputs.first().map(|o| o.0.clone()),
        "output_shape": first.shape,
        "mode": mode,
        "plan": o.to_json(&prog),
        "proto": a.common.proto,
        "bits": fx.bits,
        "frac": fx.frac,
        "net": a.common.net,
        "online_s": st.seconds,
        "load_s": load_s,
        "bytes": st.bytes,
        "rounds": st.rounds,
        "by_op": by_op(&prog, &client_meter),
        "reference_max_abs_diff": check.map(|c| c.0),
        "float_max_abs_diff": check.map(|c| c.1),
        "tee_note": format!("{note}; both parties in this process"),
    });
    if a.json {
        println!("{rec}");
    } else {
        println!("hush embed (graph runtime): output '{}' {:?}, {:.2} s, {:.1} MiB, {} rounds ({note})", prog.outputs[0].0, first.shape, st.seconds, st.bytes as f64 / 1048576.0, st.rounds);
        if let Some((d, fl)) = check {
            println!("fixed-point reference: max |diff| {d:.2e}; float (f64) graph: max |diff| {fl:.2e}");
        }
        println!("wrote {}", a.out.display());
    }
    Ok(())
}
