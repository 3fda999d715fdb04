//! The same mini-batch algorithm in plaintext floating point (reference).

use crate::data::Dataset;
use crate::{batches, TrainConfig};

/// Trains on the whole (joined) data set; returns the weights.
pub fn train(ds: &Dataset, cfg: &TrainConfig) -> Vec<f64> {
    let mut w = vec![0.0; ds.cols];
    for ep in 0..cfg.epochs {
        let eta = cfg.lr_at(ep);
        for b in batches(ds.len(), cfg.batch as usize, ep, cfg.order_seed) {
            let mut g = vec![0.0; ds.cols];
            for &i in &b {
                let z: f64 = ds.rows[i].iter().map(|&(c, v)| w[c] * v).sum();
                let e = cfg.sigmoid.eval(z) - ds.labels[i];
                for &(c, v) in &ds.rows[i] {
                    g[c] += e * v;
                }
            }
            for c in 0..ds.cols {
                w[c] -= eta * (g[c] / b.len() as f64 + cfg.l2 * w[c]);
            }
        }
    }
    w
}
