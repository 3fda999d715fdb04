//! Benchmark architectures with random weights (timing only; no downloads):
//! MiniONN's MNIST CNN and 7-conv CIFAR-10 CNN (CRISP's benchmarks A and
//! B), SqueezeNet 1.1 and ResNet-50 at ImageNet shape (224×224, BatchNorm
//! folded into the convolutions). `python/hush/models.py` builds the same
//! networks as ONNX files.

use crate::model::{Builder, Model, Post, V};
use crate::Result;
use hush_primitives::{Block, Prg};

pub const NAMES: &[&str] = &["minionn-mnist", "minionn-cifar", "squeezenet", "resnet50"];

struct R(Prg);

impl R {
    fn v(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| ((self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale).collect()
    }
}

fn conv(b: &mut Builder, r: &mut R, x: V, co: usize, k: usize, s: usize, p: usize) -> V {
    let ci = b.shape(x)[0];
    // uniform with the variance of He initialisation: keeps activations O(1)
    let sc = (6.0 / (ci * k * k) as f32).sqrt();
    let w = r.v(co * ci * k * k, sc);
    let bias = r.v(co, 0.05);
    b.conv(x, co, [k, k], [s, s], [p; 4], &w, &bias)
}

fn dense(b: &mut Builder, r: &mut R, x: V, n: usize) -> V {
    let ni = b.shape(x)[0];
    let w = r.v(n * ni, (6.0 / ni as f32).sqrt());
    let bias = r.v(n, 0.05);
    b.dense(x, n, &w, &bias)
}

fn cr(b: &mut Builder, r: &mut R, x: V, co: usize, k: usize, s: usize, p: usize) -> V {
    let c = conv(b, r, x, co, k, s, p);
    b.relu(c)
}

/// MiniONN MNIST (CRISP benchmark A).
pub fn minionn_mnist(seed: u64) -> Vec<u8> {
    let mut r = R(Prg::new(Block(seed as u128)));
    let (mut b, x) = Builder::new("minionn-mnist", &[1, 28, 28]);
    let c1 = cr(&mut b, &mut r, x, 16, 5, 1, 0);
    let p1 = b.maxpool(c1, [2, 2], [2, 2], [0; 4]);
    let c2 = cr(&mut b, &mut r, p1, 16, 5, 1, 0);
    let p2 = b.maxpool(c2, [2, 2], [2, 2], [0; 4]);
    let f = b.flatten(p2);
    let d1 = dense(&mut b, &mut r, f, 100);
    let a1 = b.relu(d1);
    let y = dense(&mut b, &mut r, a1, 10);
    b.postprocess(Post::Argmax);
    b.finish(y)
}

/// MiniONN CIFAR-10, 7 convolutions (CRISP benchmark B).
pub fn minionn_cifar(seed: u64) -> Vec<u8> {
    let mut r = R(Prg::new(Block(seed as u128)));
    let (mut b, x) = Builder::new("minionn-cifar", &[3, 32, 32]);
    let mut h = cr(&mut b, &mut r, x, 64, 3, 1, 1);
    h = cr(&mut b, &mut r, h, 64, 3, 1, 1);
    h = b.avgpool(h, [2, 2], [2, 2], [0; 4], true);
    h = cr(&mut b, &mut r, h, 64, 3, 1, 1);
    h = cr(&mut b, &mut r, h, 64, 3, 1, 1);
    h = b.avgpool(h, [2, 2], [2, 2], [0; 4], true);
    h = cr(&mut b, &mut r, h, 64, 3, 1, 1);
    h = cr(&mut b, &mut r, h, 64, 1, 1, 0);
    h = cr(&mut b, &mut r, h, 16, 1, 1, 0);
    let f = b.flatten(h);
    let y = dense(&mut b, &mut r, f, 10);
    b.postprocess(Post::Argmax);
    b.finish(y)
}

fn fire(b: &mut Builder, r: &mut R, x: V, s: usize, e: usize) -> V {
    let sq = cr(b, r, x, s, 1, 1, 0);
    let e1 = cr(b, r, sq, e, 1, 1, 0);
    let e3 = cr(b, r, sq, e, 3, 1, 1);
    b.concat(&[e1, e3], 0)
}

/// SqueezeNet 1.1 at 3×224×224.
pub fn squeezenet(seed: u64) -> Vec<u8> {
    let mut r = R(Prg::new(Block(seed as u128)));
    let (mut b, x) = Builder::new("squeezenet1.1", &[3, 224, 224]);
    let mut h = cr(&mut b, &mut r, x, 64, 3, 2, 0);
    h = b.maxpool(h, [3, 3], [2, 2], [0; 4]);
    h = fire(&mut b, &mut r, h, 16, 64);
    h = fire(&mut b, &mut r, h, 16, 64);
    h = b.maxpool(h, [3, 3], [2, 2], [0; 4]);
    h = fire(&mut b, &mut r, h, 32, 128);
    h = fire(&mut b, &mut r, h, 32, 128);
    h = b.maxpool(h, [3, 3], [2, 2], [0; 4]);
    h = fire(&mut b, &mut r, h, 48, 192);
    h = fire(&mut b, &mut r, h, 48, 192);
    h = fire(&mut b, &mut r, h, 64, 256);
    h = fire(&mut b, &mut r, h, 64, 256);
    h = cr(&mut b, &mut r, h, 1000, 1, 1, 0);
    h = b.global_avgpool(h);
    let y = b.flatten(h);
    b.postprocess(Post::Softmax);
    b.finish(y)
}

fn bottleneck(b: &mut Builder, r: &mut R, x: V, width: usize, stride: usize) -> V {
    let ci = b.shape(x)[0];
    let out = width * 4;
    let a = cr(b, r, x, width, 1, 1, 0);
    let a = cr(b, r, a, width, 3, stride, 1);
    let a = conv(b, r, a, out, 1, 1, 0);
    let skip = if stride != 1 || ci != out { conv(b, r, x, out, 1, stride, 0) } else { x };
    let s = b.add(a, skip);
    b.relu(s)
}

/// ResNet-50 at 3×224×224 (BatchNorm folded).
pub fn resnet50(seed: u64) -> Vec<u8> {
    let mut r = R(Prg::new(Block(seed as u128)));
    let (mut b, x) = Builder::new("resnet50", &[3, 224, 224]);
    let mut h = cr(&mut b, &mut r, x, 64, 7, 2, 3);
    h = b.maxpool(h, [3, 3], [2, 2], [1; 4]);
    for (i, (blocks, width)) in [(3, 64), (4, 128), (6, 256), (3, 512)].into_iter().enumerate() {
        for j in 0..blocks {
            let stride = if j == 0 && i > 0 { 2 } else { 1 };
            h = bottleneck(&mut b, &mut r, h, width, stride);
        }
    }
    h = b.global_avgpool(h);
    let f = b.flatten(h);
    let y = dense(&mut b, &mut r, f, 1000);
    b.postprocess(Post::Softmax);
    b.finish(y)
}

/// A benchmark model by name.
pub fn by_name(name: &str) -> Option<Vec<u8>> {
    match name {
        "minionn-mnist" => Some(minionn_mnist(1)),
        "minionn-cifar" => Some(minionn_cifar(2)),
        "squeezenet" => Some(squeezenet(3)),
        "resnet50" => Some(resnet50(4)),
        _ => None,
    }
}

pub fn load(name: &str) -> Result<Model> {
    match by_name(name) {
        Some(b) => Model::from_bytes(&b),
        None => Model::load(std::path::Path::new(name)),
    }
}
