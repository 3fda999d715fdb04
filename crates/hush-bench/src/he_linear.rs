//! `hush bench he-linear`: Cheetah's HE linear layers (crate `hush-rlwe`)
//! on benchmark layer shapes, both parties as two threads of this process
//! over the in-memory pair with an emulated network profile. The client's
//! key set-up (one message with the public key) is timed separately as
//! `setup_s`; `wall_s` covers the layers. Outputs are checked against
//! plaintext W·x mod 2^ℓ element by element.

use crate::{connect_pair, machine_fields, machine_note, profile, Error, Record, Result, Transport};
use hush_primitives::{Block, Prg};
use hush_rlwe::cheetah::{plan, Config, HeClient, HeServer, Shape};
use hush_rlwe::{Context, Params};
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `hush bench he-linear`.
#[derive(clap::Args, Clone, Debug)]
pub struct HeLinearArgs {
    /// minionn-mnist (its 2 convs + 2 FCs), minionn-cifar (7 convs + FC),
    /// resnet50 (all 53 convs + FC), resnet-conv (ResNet-50's 3×3 conv, 64×56×56 → 64) or resnet-stem
    /// (7×7 stride 2, 3×224×224 → 64).
    #[arg(long, default_value = "minionn-mnist")]
    pub layers: String,
    /// he128-n8192-p50 (default), he128-n8192, he128-n8192-wide or he128-n4096.
    #[arg(long, default_value = "he128-n8192-p50")]
    pub params: String,
    /// Ring width ℓ of the shares.
    #[arg(long, default_value_t = 37)]
    pub bits: u32,
    /// Network profile: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    pub net: String,
    #[arg(long)]
    pub json: bool,
}

fn conv(c_in: usize, h: usize, c_out: usize, k: usize, s: usize, p: usize) -> Shape {
    Shape::Conv { c_in, h, w: h, c_out, kh: k, kw: k, stride: [s, s], pads: [p; 4] }
}

/// Every conv and the FC of ResNet-50 at 224×224 (the shapes of `hush_inference::zoo::resnet50`).
fn resnet50() -> Vec<Shape> {
    let mut v = vec![conv(3, 224, 64, 7, 2, 3)];
    let (mut c, mut h) = (64, 56);
    for (i, (blocks, width)) in [(3, 64), (4, 128), (6, 256), (3, 512)].into_iter().enumerate() {
        for j in 0..blocks {
            let s = if j == 0 && i > 0 { 2 } else { 1 };
            let out = width * 4;
            v.push(conv(c, h, width, 1, 1, 0));
            v.push(conv(width, h, width, 3, s, 1));
            let h2 = (h + 2 - 3) / s + 1;
            v.push(conv(width, h2, out, 1, 1, 0));
            if s != 1 || c != out {
                v.push(conv(c, h, out, 1, s, 0));
            }
            c = out;
            h = h2;
        }
    }
    v.push(Shape::Fc { n_in: 2048, n_out: 1000 });
    v
}

/// The layer shapes of a named set.
pub fn layer_set(name: &str) -> Result<Vec<Shape>> {
    Ok(match name {
        "minionn-mnist" => vec![conv(1, 28, 16, 5, 1, 0), conv(16, 12, 16, 5, 1, 0), Shape::Fc { n_in: 256, n_out: 100 }, Shape::Fc { n_in: 100, n_out: 10 }],
        "minionn-cifar" => vec![
            conv(3, 32, 64, 3, 1, 1),
            conv(64, 32, 64, 3, 1, 1),
            conv(64, 16, 64, 3, 1, 1),
            conv(64, 16, 64, 3, 1, 1),
            conv(64, 8, 64, 3, 1, 1),
            conv(64, 8, 64, 1, 1, 0),
            conv(64, 8, 16, 1, 1, 0),
            Shape::Fc { n_in: 1024, n_out: 10 },
        ],
        "resnet-conv" => vec![conv(64, 56, 64, 3, 1, 1)],
        "resnet50" => resnet50(),
        "resnet-stem" => vec![conv(3, 224, 64, 7, 2, 3)],
        _ => return Err(Error::Invalid(format!("unknown layer set '{name}' (minionn-mnist, minionn-cifar, resnet50, resnet-conv, resnet-stem)"))),
    })
}

fn params(name: &str) -> Result<Params> {
    match name {
        "he128-n8192-p50" => Ok(Params::he128_n8192_p50()),
        "he128-n8192" => Ok(Params::he128_n8192()),
        "he128-n8192-wide" => Ok(Params::he128_n8192_wide()),
        "he128-n4096" => Ok(Params::he128_n4096()),
        _ => Err(Error::Invalid(format!("unknown parameter set '{name}' (he128-n8192-p50, he128-n8192, he128-n8192-wide, he128-n4096)"))),
    }
}

fn reference(shape: &Shape, w: &[u64], x: &[u64], m: u64) -> Vec<u64> {
    match *shape {
        Shape::Fc { n_in, n_out } => (0..n_out).map(|i| (0..n_in).fold(0u64, |a, j| a.wrapping_add(w[i * n_in + j].wrapping_mul(x[j]))) & m).collect(),
        Shape::Conv { c_in, h, w: wd, c_out, kh, kw, stride, pads } => {
            let oh = (h + pads[0] + pads[2] - kh) / stride[0] + 1;
            let ow = (wd + pads[1] + pads[3] - kw) / stride[1] + 1;
            let mut y = vec![0u64; c_out * oh * ow];
            for mo in 0..c_out {
                for c in 0..c_in {
                    for l in 0..kh {
                        for l2 in 0..kw {
                            let wv = w[((mo * c_in + c) * kh + l) * kw + l2];
                            for i in 0..oh {
                                let yi = (i * stride[0] + l).wrapping_sub(pads[0]);
                                if yi >= h {
                                    continue;
                                }
                                for j in 0..ow {
                                    let xj = (j * stride[1] + l2).wrapping_sub(pads[1]);
                                    if xj < wd {
                                        let o = &mut y[(mo * oh + i) * ow + j];
                                        *o = o.wrapping_add(wv.wrapping_mul(x[(c * h + yi) * wd + xj]));
                                    }
                                }
                            }
                        }
                    }
                }
            }
            y.iter_mut().for_each(|v| *v &= m);
            y
        }
    }
}

/// Runs the layer set once and returns its record.
pub fn bench_he_linear(a: &HeLinearArgs) -> Result<Record> {
    let shapes = layer_set(&a.layers)?;
    let note = machine_note();
    let p = params(&a.params)?;
    let ctx = Arc::new(Context::new(p.clone()).map_err(|e| Error::Invalid(e.to_string()))?);
    let cfg = Config::new(a.bits);
    let lay: Vec<_> = shapes.iter().map(|s| plan(&ctx, &cfg, s)).collect::<std::result::Result<_, _>>().map_err(|e| Error::Invalid(e.to_string()))?;
    let m = (1u64 << a.bits) - 1;
    let mut prg = Prg::new(Block(0xbe7c));
    // small fixed-point-like weights (any ℓ-bit values work; the noise bound assumes the worst case)
    let ws: Vec<Vec<u64>> = shapes.iter().map(|s| (0..s.weight_len()).map(|_| (prg.next_u64() % 8191).wrapping_sub(4095) & m).collect()).collect();
    let xs: Vec<Vec<u64>> = shapes.iter().map(|s| (0..s.in_len()).map(|_| prg.next_u64() & m).collect()).collect();
    let x_s: Vec<Vec<u64>> = xs.iter().map(|x| x.iter().map(|_| prg.next_u64() & m).collect()).collect();
    let x_c: Vec<Vec<u64>> = xs.iter().zip(&x_s).map(|(x, s)| x.iter().zip(s).map(|(a, b)| a.wrapping_sub(*b) & m).collect()).collect();
    let (mut cc, mut cs) = connect_pair(Transport::Mem, profile(&a.net)?)?;
    let (ctx2, shapes2, ws2) = (ctx.clone(), shapes.clone(), ws.clone());
    let srv = std::thread::spawn(move || -> std::result::Result<(Vec<Vec<u64>>, f64), String> {
        // not pinned: the server's rows run on rayon's pool over all cores
        // (the client waits meanwhile); threads spawned from a pinned thread
        // would inherit its single CPU
        let mut s = HeServer::setup(&mut cs, ctx2, cfg, Prg::from_os()).map_err(|e| e.to_string())?;
        let mut cpu = 0.0;
        let mut out = Vec::new();
        for ((sh, w), xs) in shapes2.iter().zip(&ws2).zip(&x_s) {
            let t0 = Instant::now();
            out.push(s.linear(&mut cs, sh, w, xs).map_err(|e| e.to_string())?);
            cpu += t0.elapsed().as_secs_f64();
        }
        Ok((out, cpu))
    });
    let t_setup = Instant::now();
    let mut c = HeClient::setup(&mut cc, ctx.clone(), cfg, Prg::from_os()).map_err(|e| Error::Invalid(e.to_string()))?;
    let setup_s = t_setup.elapsed().as_secs_f64();
    let c0 = cc.cost();
    let t = Instant::now();
    let mut ys = Vec::new();
    for (sh, x) in shapes.iter().zip(&x_c) {
        ys.push(c.linear(&mut cc, sh, x).map_err(|e| Error::Invalid(e.to_string()))?);
    }
    let wall = t.elapsed().as_secs_f64();
    let c1 = cc.cost();
    let (ys_s, server_s) = srv.join().map_err(|_| Error::Panic)?.map_err(Error::Invalid)?;
    for (i, sh) in shapes.iter().enumerate() {
        let want = reference(sh, &ws[i], &xs[i], m);
        let got: Vec<u64> = ys[i].iter().zip(&ys_s[i]).map(|(a, b)| a.wrapping_add(*b) & m).collect();
        if got != want {
            return Err(Error::Check(format!("layer {i} ({sh:?}): HE result differs from plaintext")));
        }
    }
    let d = c1 - c0;
    let mut r = Record::new("he-linear");
    r.set("layers", a.layers.as_str())
        .set("params", p.name)
        .set("n", p.n as u64)
        .set("log_q", (p.log_q() * 10.0).round() / 10.0)
        .set("bits", a.bits as u64)
        .set("flood_bits", cfg.flood_bits as u64)
        .set("net", a.net.as_str())
        .set("wall_s", wall)
        .set("setup_s", setup_s)
        .set("server_s", server_s)
        .set("bytes", d.bytes_sent + d.bytes_recv)
        .set("bytes_client_to_server", d.bytes_sent)
        .set("bytes_server_to_client", d.bytes_recv)
        .set("setup_bytes", c0.bytes_sent)
        .set("rounds", c1.rounds as u64)
        .set("in_ciphertexts", lay.iter().map(|(l, _)| l.in_cts() as u64).sum::<u64>())
        .set("out_ciphertexts", lay.iter().map(|(l, _)| l.out_cts() as u64).sum::<u64>())
        .set("products", lay.iter().map(|(l, _)| l.products() as u64).sum::<u64>())
        .set("outputs", shapes.iter().map(|s| s.out_len() as u64).sum::<u64>())
        .set("checked", true)
        .set("machine", note);
    machine_fields(&mut r);
    Ok(r)
}

pub fn bench_he_linear_main(a: HeLinearArgs) -> Result<()> {
    let r = bench_he_linear(&a)?;
    if a.json {
        println!("{}", r.json());
    } else {
        println!("hush bench he-linear ({}; Cheetah HE linear layers, {})", a.layers, machine_note());
        print!("{}", r.table());
    }
    Ok(())
}
