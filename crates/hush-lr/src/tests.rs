use crate::bench::run_pair;
use crate::party::with_intercept;
use crate::data::{synthetic, Dataset};
use crate::secure::{load_model, reveal, save_model, ModelShares, Role, Session};
use crate::*;
use hush_transport::MemChannel;

fn cfg(sig: Sigmoid) -> TrainConfig {
    TrainConfig { epochs: 4, batch: 32, lr: 1.0, lr_decay: 0.0, l2: 0.0, sigmoid: sig, key_bits: 1024, order_seed: 3, reveal: false, low_bandwidth: false }
}

fn open(ml: &ModelShares, mf: &ModelShares) -> (Vec<f64>, Vec<f64>) {
    let (ca, mut cb) = MemChannel::pair();
    let mf = mf.clone();
    let h = std::thread::spawn(move || reveal(&mut cb, &mf).unwrap());
    let mut ca = ca;
    let a = reveal(&mut ca, ml).unwrap();
    assert_eq!(h.join().unwrap(), a);
    (a.labels.clone(), a.features.clone())
}

fn split_run(ds: &Dataset, split: usize, c: &TrainConfig) -> (Vec<f64>, Vec<f64>) {
    let dl = ds.columns(0, split);
    let df = ds.columns(split, ds.cols);
    let (x, y) = MemChannel::pair();
    let (ml, mf, _, bytes, rounds) = run_pair(x, y, &dl, &df, c).unwrap();
    assert!(bytes > 0 && rounds > 0);
    assert_eq!(ml.own.len(), split);
    assert_eq!(mf.own.len(), ds.cols - split);
    let (wl, wf) = open(&ml, &mf);
    let mut w = wl;
    w.extend(wf);
    (w, plain::train(ds, c))
}

#[test]
fn planted_signs_recovered_and_matches_plaintext() {
    for sig in [Sigmoid::Cubic, Sigmoid::Linear] {
        let (ds, wstar) = synthetic(320, 8, 0.5, 11);
        let (w, wp) = split_run(&ds, 4, &cfg(sig));
        for j in 0..8 {
            assert_eq!(w[j] > 0.0, wstar[j] > 0.0, "{sig:?} sign of w[{j}]: secure {w:?} planted {wstar:?}");
            assert!((w[j] - wp[j]).abs() < 0.05, "{sig:?} secure {w:?} vs plaintext {wp:?}");
        }
        let acc = accuracy(&ds, &w, 0.0);
        assert!((acc - accuracy(&ds, &wp, 0.0)).abs() <= 0.01, "accuracy {acc}");
    }
}

/// Wide data (both parties' features ≥ 4× the batch): the backward passes
/// take the shifted-copies path in both directions and still match the
/// plaintext run of the same algorithm.
#[test]
fn wide_data_takes_the_shifted_path_and_matches_plaintext() {
    let (ds, wstar) = synthetic(192, 150, 0.08, 14);
    assert!(crate::secure::shifted(70, 16) && crate::secure::shifted(80, 16));
    for low_bandwidth in [false, true] {
        let c = TrainConfig { epochs: 2, batch: 16, lr: 2.0, lr_decay: 0.5, sigmoid: Sigmoid::Linear, low_bandwidth, ..cfg(Sigmoid::Linear) };
        let (w, wp) = split_run(&ds, 70, &c);
        for j in 0..150 {
            assert!((w[j] - wp[j]).abs() < 0.05, "low_bandwidth {low_bandwidth}, w[{j}]: secure {} vs plaintext {}", w[j], wp[j]);
        }
        let agree = (0..150).filter(|&j| wstar[j] == 0.0 || (w[j] > 0.0) == (wstar[j] > 0.0)).count();
        assert!(agree >= 100, "sign agreement {agree}/150");
    }
}

#[test]
fn sparse_planted_model() {
    // sparse rows (density 0.1 of 40 features)
    let (ds, wstar) = synthetic(600, 40, 0.1, 12);
    let c = TrainConfig { epochs: 3, batch: 64, lr: 2.0, lr_decay: 0.5, sigmoid: Sigmoid::Linear, ..cfg(Sigmoid::Linear) };
    let (w, wp) = split_run(&ds, 15, &c);
    let agree = (0..40).filter(|&j| (w[j] > 0.0) == (wstar[j] > 0.0)).count();
    assert!(agree >= 38, "sign agreement {agree}/40");
    for j in 0..40 {
        assert!((w[j] - wp[j]).abs() < 0.05, "secure {} vs plaintext {}", w[j], wp[j]);
    }
}

#[test]
fn held_out_prediction_with_shared_model() {
    let (ds, _) = synthetic(400, 6, 0.6, 13);
    let train: Vec<usize> = (0..300).collect();
    let test: Vec<usize> = (300..400).collect();
    let (tr, te) = (with_intercept(&ds.subset(&train)), ds.subset(&test));
    // labels party: features 0..3 + intercept; features party: 3..6
    let dl = with_intercept(&tr.columns(0, 3));
    let dl_cols = dl.cols;
    let df = tr.columns(3, 6);
    let c = cfg(Sigmoid::Cubic);
    let (x, y) = MemChannel::pair();
    let (ml, mf, _, _, _) = run_pair(x, y, &dl, &df, &c).unwrap();
    let tl = with_intercept(&te.columns(0, 3)).to_fixed().unwrap();
    let tf = te.columns(3, 6).to_fixed().unwrap();
    let (mut ca, mut cb) = MemChannel::pair();
    let c2 = c.clone();
    let n = te.len();
    let h = std::thread::spawn(move || {
        let mut s = Session::start(&mut cb, Role::Features, n, 3, &c2).unwrap();
        s.predict(&tf, &mf).unwrap()
    });
    let mut s = Session::start(&mut ca, Role::Labels, n, dl_cols, &c).unwrap();
    let z = s.predict(&tl, &ml).unwrap().unwrap();
    assert!(h.join().unwrap().is_none());
    let acc = z.iter().zip(&te.labels).filter(|(z, y)| (**z > 0.0) == (**y > 0.5)).count() as f64 / n as f64;
    // plaintext run of the same algorithm on the same joined columns
    let mut joined = dl.clone();
    for (r, fr) in joined.rows.iter_mut().zip(&df.rows) {
        r.extend(fr.iter().map(|&(c, v)| (c + dl_cols, v)));
    }
    joined.cols += 3;
    let wp = plain::train(&joined, &c);
    let mut tj = with_intercept(&te.columns(0, 3));
    for (r, fr) in tj.rows.iter_mut().zip(&te.columns(3, 6).rows) {
        r.extend(fr.iter().map(|&(c, v)| (c + dl_cols, v)));
    }
    tj.cols += 3;
    let accp = accuracy(&tj, &wp, 0.0);
    assert!((acc - accp).abs() <= 0.01 + 1e-9, "secure {acc} plaintext {accp}");
    assert!(acc > 0.85, "accuracy {acc}");
}

#[test]
fn peer_disconnect_is_a_clear_error() {
    let (ds, _) = synthetic(100, 4, 0.5, 14);
    let dl = ds.columns(0, 2);
    let x = dl.to_fixed().unwrap();
    let (mut ca, mut cb) = MemChannel::pair();
    let c = cfg(Sigmoid::Linear);
    let h = std::thread::spawn(move || {
        // the features party handshakes, then goes away
        let s = Session::start(&mut cb, Role::Features, 100, 2, &c);
        drop(s);
        drop(cb);
    });
    let c = cfg(Sigmoid::Linear);
    let mut s = Session::start(&mut ca, Role::Labels, 100, 2, &c).unwrap();
    h.join().unwrap();
    let e = s.train(&x, Some(&dl.labels), &mut Default::default()).unwrap_err();
    assert!(e.to_string().contains("disconnected"), "{e}");
}

#[test]
fn handshake_mismatches() {
    let run = |ra: Role, rb: Role, na: usize, nb: usize, lr_b: f64| {
        let (mut ca, mut cb) = MemChannel::pair();
        let h = std::thread::spawn(move || {
            let c = TrainConfig { lr: lr_b, ..cfg(Sigmoid::Linear) };
            Session::start(&mut cb, rb, nb, 2, &c).err().map(|e| e.to_string())
        });
        let e = Session::start(&mut ca, ra, na, 2, &cfg(Sigmoid::Linear)).err().map(|e| e.to_string());
        let _ = h.join();
        e.unwrap_or_default()
    };
    assert!(run(Role::Labels, Role::Labels, 10, 10, 1.0).contains("both parties"));
    assert!(run(Role::Labels, Role::Features, 10, 11, 1.0).contains("sample counts differ"));
    assert!(run(Role::Labels, Role::Features, 10, 10, 0.3).contains("hyper-parameters differ"));
    // reveal must be agreed before training
    let (mut ca, mut cb) = MemChannel::pair();
    let h = std::thread::spawn(move || {
        let c = TrainConfig { reveal: true, ..cfg(Sigmoid::Linear) };
        Session::start(&mut cb, Role::Features, 10, 2, &c).err().map(|e| e.to_string()).unwrap_or_default()
    });
    let e = Session::start(&mut ca, Role::Labels, 10, 2, &cfg(Sigmoid::Linear)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("the peer asked to reveal"), "{e}");
    assert!(h.join().unwrap().contains("this party asked to reveal"));
    // and so must --low-bandwidth
    let (mut ca, mut cb) = MemChannel::pair();
    let h = std::thread::spawn(move || {
        let c = TrainConfig { low_bandwidth: true, ..cfg(Sigmoid::Linear) };
        Session::start(&mut cb, Role::Features, 10, 2, &c).err().map(|e| e.to_string()).unwrap_or_default()
    });
    let e = Session::start(&mut ca, Role::Labels, 10, 2, &cfg(Sigmoid::Linear)).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("--low-bandwidth"), "{e}");
    assert!(h.join().unwrap().contains("--low-bandwidth"));
}

#[test]
fn libsvm_parsing_and_validation() {
    let d = Dataset::parse_libsvm("1 1:0.5 3:-2\n-1 2:1 # c\n\n0 5:1e-3\n", "t").unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!(d.cols, 5);
    assert_eq!(d.labels, vec![1.0, 0.0, 0.0]);
    assert_eq!(d.rows[0], vec![(0, 0.5), (2, -2.0)]);
    for (bad, want) in [
        ("2 1:1", "label 2"),
        ("1 0:1", "1-based"),
        ("1 3:1 2:1", "strictly increasing"),
        ("1 1:nan", "not finite"),
        ("1 1", "idx:value"),
        ("x 1:1", "label is not a number"),
        ("", "no samples"),
    ] {
        let e = Dataset::parse_libsvm(bad, "f.svm").unwrap_err().to_string();
        assert!(e.contains(want), "{bad:?}: {e}");
    }
    // quantisation clamps to the public bound
    let x = Dataset::parse_libsvm("1 1:1000", "t").unwrap().to_fixed().unwrap();
    assert_eq!(x.values[0], (1 << XBITS) - 1);
}

#[test]
fn model_file_roundtrip_atomic() {
    let dir = std::env::temp_dir().join(format!("hush-lr-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("m.json");
    let m = ModelShares { role: Role::Features, own: vec![1, u64::MAX], peer: vec![7], intercept: false };
    let op = crate::secure::Opened { labels: vec![0.5, 2.0], features: vec![1.0, -1.0], intercept: true };
    save_model(&p, &m, Some(&op)).unwrap();
    assert_eq!(crate::secure::load_opened(&p).unwrap(), Some(op));
    assert_eq!(load_model(&p).unwrap(), m);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn range_scaling_and_join() {
    // column 0 dense in [2, 6]; column 1 sparse (implicit zeros) in {0, 4}
    let d = Dataset::parse_libsvm("1 1:2 2:4\n0 1:6\n1 1:4\n", "t").unwrap();
    let sc = d.range_scaler();
    assert_eq!(sc, vec![(2.0, 6.0), (0.0, 4.0)]);
    let s = d.scale_sym(&sc);
    assert_eq!(s.rows[0], vec![(0, -1.0), (1, 1.0)]);
    assert_eq!(s.rows[1], vec![(0, 1.0), (1, -1.0)]);
    assert_eq!(s.rows[2], vec![(1, -1.0)]);
    // a constant column becomes 0
    let c = Dataset::parse_libsvm("1 1:3\n0 1:3\n", "t").unwrap();
    assert!(c.scale_sym(&c.range_scaler()).rows.iter().all(|r| r.is_empty()));
    let j = d.hjoin(&c.columns(0, 1).subset(&[0, 1, 0]));
    assert_eq!(j.cols, 3);
    assert_eq!(j.rows[1], vec![(0, 6.0), (2, 3.0)]);
}

#[test]
fn learning_rate_decay() {
    let c = TrainConfig { lr: 1.0, lr_decay: 0.5, ..Default::default() };
    assert_eq!(c.lr_at(0), 1.0);
    assert_eq!(c.lr_at(2), 0.5);
}

// ---- SciPy .npz input ----

fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    v.extend_from_slice(data);
    v
}

/// A stored (uncompressed) zip of the given members, as numpy would write
/// with compression off.
fn zip_stored(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cd = Vec::new();
    for (name, data) in members {
        let off = out.len() as u32;
        let mut lh = vec![0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        lh.extend_from_slice(&(data.len() as u32).to_le_bytes());
        lh.extend_from_slice(&(data.len() as u32).to_le_bytes());
        lh.extend_from_slice(&(name.len() as u16).to_le_bytes());
        lh.extend_from_slice(&0u16.to_le_bytes());
        lh.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&lh);
        out.extend_from_slice(data);
        let mut c = vec![0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        c.extend_from_slice(&(data.len() as u32).to_le_bytes());
        c.extend_from_slice(&(data.len() as u32).to_le_bytes());
        c.extend_from_slice(&(name.len() as u16).to_le_bytes());
        c.extend_from_slice(&[0; 12]);
        c.extend_from_slice(&off.to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        cd.extend_from_slice(&c);
    }
    let cd_off = out.len() as u32;
    out.extend_from_slice(&cd);
    let mut e = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0];
    e.extend_from_slice(&(members.len() as u16).to_le_bytes());
    e.extend_from_slice(&(members.len() as u16).to_le_bytes());
    e.extend_from_slice(&(cd.len() as u32).to_le_bytes());
    e.extend_from_slice(&cd_off.to_le_bytes());
    e.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&e);
    out
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn csr_npz(format: &str, shape: [i64; 2], indptr: &[i32], indices: &[i32], data: &[f64]) -> Vec<u8> {
    zip_stored(&[
        ("indices.npy", npy("<i4", &[indices.len()], &le(indices, i32::to_le_bytes))),
        ("indptr.npy", npy("<i4", &[indptr.len()], &le(indptr, i32::to_le_bytes))),
        ("format.npy", npy(&format!("|S{}", format.len()), &[], format.as_bytes())),
        ("shape.npy", npy("<i8", &[2], &le(&shape, i64::to_le_bytes))),
        ("data.npy", npy("<f8", &[data.len()], &le(data, f64::to_le_bytes))),
    ])
}

#[test]
fn npz_csr_parsed_and_canonicalised() {
    // row 0: columns 2 and 0 (unsorted); row 1: empty; row 2: column 1 twice (summed)
    let b = csr_npz("csr", [3, 4], &[0, 2, 2, 4], &[2, 0, 1, 1], &[0.5, -1.0, 1.0, 2.0]);
    let d = crate::npz::parse_csr_npz(&b, "t.npz").unwrap();
    assert_eq!((d.len(), d.cols), (3, 4));
    assert_eq!(d.rows[0], vec![(0, -1.0), (2, 0.5)]);
    assert!(d.rows[1].is_empty());
    assert_eq!(d.rows[2], vec![(1, 3.0)]);
    // f32 data and int64 indices (scipy uses either)
    let b = zip_stored(&[
        ("indices.npy", npy("<i8", &[1], &le(&[3i64], i64::to_le_bytes))),
        ("indptr.npy", npy("<i8", &[2], &le(&[0i64, 1], i64::to_le_bytes))),
        ("format.npy", npy("<U3", &[], &le(&['c' as u32, 's' as u32, 'r' as u32], u32::to_le_bytes))),
        ("shape.npy", npy("<i8", &[2], &le(&[1i64, 5], i64::to_le_bytes))),
        ("data.npy", npy("<f4", &[1], &le(&[0.25f32], f32::to_le_bytes))),
    ]);
    let d = crate::npz::parse_csr_npz(&b, "t.npz").unwrap();
    assert_eq!(d.rows[0], vec![(3, 0.25)]);
    assert_eq!(d.cols, 5);
}

#[test]
fn npz_malformed_inputs_are_clear_errors() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (csr_npz("csc", [2, 2], &[0, 0, 0], &[], &[]), "CSR"),
        (csr_npz("csr", [2, 2], &[0, 1, 1], &[2], &[1.0]), "outside the shape"),
        (csr_npz("csr", [2, 2], &[0, 1, 0], &[0], &[1.0]), "indptr"),
        (csr_npz("csr", [2, 2], &[0, 1], &[0], &[1.0]), "indptr has shape"),
        (csr_npz("csr", [2, 2], &[0, 1, 2], &[0], &[1.0, 2.0]), "must both have"),
        (csr_npz("csr", [1, 2], &[0, 1], &[0], &[f64::NAN]), "not finite"),
        (csr_npz("csr", [0, 2], &[0], &[], &[]), "rows"),
        (csr_npz("csr", [1, 1 << 40], &[0, 0], &[], &[]), "columns, above the limit"),
        (csr_npz("csr", [1, 2], &[0, 1], &[-1], &[1.0]), "negative"),
        (b"PK\x03\x04 not really a zip".to_vec(), "not a zip archive"),
        (zip_stored(&[("x.npy", npy("<f8", &[0], &[]))]), "no format.npy"),
        (zip_stored(&[("format.npy", b"hello".to_vec())]), "not an .npy"),
        (zip_stored(&[("format.npy", npy("<c16", &[1], &[0; 16]))]), "not supported"),
        (zip_stored(&[("format.npy", npy("<f8", &[4], &[0; 8]))]), "payload bytes"),
    ];
    for (b, want) in cases {
        let e = crate::npz::parse_csr_npz(&b, "bad.npz").unwrap_err().to_string();
        assert!(e.contains("bad.npz") && e.contains(want), "{want}: {e}");
    }
    // every truncation and many byte flips of a valid file: errors, never a panic
    let good = csr_npz("csr", [3, 4], &[0, 2, 2, 4], &[2, 0, 1, 1], &[0.5, -1.0, 1.0, 2.0]);
    for cut in 0..good.len() {
        assert!(crate::npz::parse_csr_npz(&good[..cut], "t").is_err(), "cut at {cut}");
    }
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(9);
    for _ in 0..3000 {
        let mut b = good.clone();
        for _ in 0..rand::Rng::gen_range(&mut rng, 1..4) {
            let i = rand::Rng::gen_range(&mut rng, 0..b.len());
            b[i] = rand::Rng::gen(&mut rng);
        }
        let _ = crate::npz::parse_csr_npz(&b, "t");
    }
}

#[test]
fn npz_labels_file() {
    let dir = std::env::temp_dir().join(format!("hush-lr-npz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = dir.join("x.npz");
    std::fs::write(&x, csr_npz("csr", [3, 2], &[0, 1, 1, 2], &[0, 1], &[1.0, 2.0])).unwrap();
    let y = dir.join("y.npy");
    std::fs::write(&y, npy("<i8", &[3], &le(&[1i64, -1, 0], i64::to_le_bytes))).unwrap();
    let (d, has) = data::load_with_labels(&x, Some(&y)).unwrap();
    assert!(has);
    assert_eq!(d.labels, vec![1.0, 0.0, 0.0]);
    let (_, has) = data::load_with_labels(&x, None).unwrap();
    assert!(!has);
    std::fs::write(&y, "1\n0\n").unwrap();
    let e = data::load_with_labels(&x, Some(&y)).unwrap_err().to_string();
    assert!(e.contains("2 labels for 3 rows"), "{e}");
    std::fs::write(&y, "1\n0\n3\n").unwrap();
    let e = data::load_with_labels(&x, Some(&y)).unwrap_err().to_string();
    assert!(e.contains("label 3"), "{e}");
    let svm = dir.join("a.svm");
    std::fs::write(&svm, "1 1:1\n").unwrap();
    let e = data::load_with_labels(&svm, Some(&y)).unwrap_err().to_string();
    assert!(e.contains("--labels is for .npz"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The low-bandwidth mode with the cubic sigmoid (Paillier triples, two
/// Beaver products) recovers the planted signs and matches the plaintext
/// run of the same algorithm, as the default mode does.
#[test]
fn low_bandwidth_cubic_matches_plaintext() {
    let (ds, wstar) = synthetic(256, 40, 0.3, 21);
    let c = TrainConfig { epochs: 3, batch: 32, lr: 2.0, lr_decay: 0.5, sigmoid: Sigmoid::Cubic, low_bandwidth: true, ..cfg(Sigmoid::Cubic) };
    let (w, wp) = split_run(&ds, 13, &c);
    for j in 0..40 {
        assert!((w[j] - wp[j]).abs() < 0.05, "w[{j}]: secure {} vs plaintext {}", w[j], wp[j]);
    }
    let agree = (0..40).filter(|&j| (w[j] > 0.0) == (wstar[j] > 0.0)).count();
    assert!(agree >= 36, "sign agreement {agree}/40");
}

/// One low-bandwidth batch's bytes per direction, pinned: the packed
/// forward (⌈d/K⌉ ciphertexts of the sender's share of the receiver's
/// weights, one product per row back) and the balanced backward (c·b
/// shifted error copies, ⌈d/c⌉ packed gradients back), as the difference
/// between a one-batch and a two-batch training of the same shapes
/// (linear sigmoid: no triples, no openings).
#[test]
fn low_bandwidth_batch_bytes_are_pinned() {
    let (d_l, d_f, b) = (10usize, 30usize, 16usize);
    let per_dir = |n: usize| {
        let (ds, _) = synthetic(n, d_l + d_f, 0.4, 22);
        let c = TrainConfig { epochs: 1, batch: b as u32, sigmoid: Sigmoid::Linear, low_bandwidth: true, ..cfg(Sigmoid::Linear) };
        let (x, y) = MemChannel::pair();
        let (_, _, rep, bytes, rounds) = run_pair(x, y, &ds.columns(0, d_l), &ds.columns(d_l, d_l + d_f), &c).unwrap();
        assert_eq!(rep.bytes_from_labels + rep.bytes_to_labels, bytes);
        (rep.bytes_from_labels, rep.bytes_to_labels, rounds)
    };
    let (l1, f1, r1) = per_dir(b);
    let (l2, f2, r2) = per_dir(2 * b);
    let k_l = hush_paillier::packed::PackedVec::new(d_l, XBITS, 1024, crate::secure::PACK_K).unwrap().k;
    let k_f = hush_paillier::packed::PackedVec::new(d_f, XBITS, 1024, crate::secure::PACK_K).unwrap().k;
    let slots = hush_paillier::Packing::new(64 + XBITS + 5, hush_paillier::SIGMA, 1024).unwrap().slots;
    let (c_l, c_f) = crate::secure::balanced_caps(d_l, d_f, b, slots);
    assert!((1..=slots).contains(&c_l) && (1..=slots).contains(&c_f));
    let ct = 256u64; // a 1024-bit key's ciphertext
    let lf = (d_f.div_ceil(k_f) + b + c_f * b + d_l.div_ceil(c_l)) as u64 * ct;
    let fl = (d_l.div_ceil(k_l) + b + c_l * b + d_f.div_ceil(c_f)) as u64 * ct;
    assert_eq!((l2 - l1, f2 - f1), (lf, fl), "K = ({k_l}, {k_f}), caps = ({c_l}, {c_f})");
    // packed forward (2 flights) and balanced backward (2 flights)
    assert_eq!(r2 - r1, 4);
    // the cubic sigmoid adds the batch's 2b triples, made in the forward
    // pass's flights with the features party owning their key (4b
    // ciphertexts to the labels party, ⌈2b/slots⌉ packed answers back), and
    // its two Beaver openings (2b words each way, each)
    let per_dir_cubic = |n: usize| {
        let (ds, _) = synthetic(n, d_l + d_f, 0.4, 22);
        let c = TrainConfig { epochs: 1, batch: b as u32, sigmoid: Sigmoid::Cubic, low_bandwidth: true, ..cfg(Sigmoid::Cubic) };
        let (x, y) = MemChannel::pair();
        let (_, _, rep, _, rounds) = run_pair(x, y, &ds.columns(0, d_l), &ds.columns(d_l, d_l + d_f), &c).unwrap();
        (rep.bytes_from_labels, rep.bytes_to_labels, rounds)
    };
    let (l1c, f1c, r1c) = per_dir_cubic(b);
    let (l2c, f2c, r2c) = per_dir_cubic(2 * b);
    let t_slots = hush_paillier::Packing::new(130, hush_paillier::SIGMA, 1024).unwrap().slots;
    let open = 2 * (2 * b as u64 * 8);
    assert_eq!(
        (l2c - l1c, f2c - f1c),
        (lf + (2 * b).div_ceil(t_slots) as u64 * ct + open, fl + 4 * b as u64 * ct + open)
    );
    // the triples ride the forward pass's flights; the openings take two
    assert_eq!(r2c - r1c, 6);
}

/// The caps on SHAPER's shape (1M × (30k + 70k), batch 4,096, 2,048-bit
/// keys: 15 slots): the backward pass's busier direction carries about half
/// of what the wide default's labels → features direction does (15 error
/// copies of 4,096 and 30k/15 packed gradients), and the two directions
/// are within one error copy of each other.
#[test]
fn balanced_caps_on_shapers_shape() {
    let (d_l, d_f, b) = (30_000usize, 70_000usize, 4096usize);
    let (c_l, c_f) = crate::secure::balanced_caps(d_l, d_f, b, 15);
    let lf = c_f * b + d_l.div_ceil(c_l);
    let fl = c_l * b + d_f.div_ceil(c_f);
    let default_lf = 15 * b + d_l.div_ceil(15);
    assert!(2 * lf.max(fl) < default_lf, "caps ({c_l}, {c_f}): {lf} / {fl} vs {default_lf}");
    assert!(lf.abs_diff(fl) <= b, "unbalanced: {lf} / {fl}");
}

#[test]
fn csv_with_ids_parsing_and_validation() {
    let dir = std::env::temp_dir().join(format!("hush-lr-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("d.csv");
    std::fs::write(&p, "x1,id,label,x2\n0.5,u7,1,0\n-2,u3,-1,1e-3\n0,u9,0,4\n").unwrap();
    let (d, has, ids) = crate::data::load_csv_with_ids(&p, "id", "label").unwrap();
    assert!(has);
    assert_eq!(ids, ["u7", "u3", "u9"]);
    assert_eq!(d.cols, 2);
    assert_eq!(d.labels, vec![1.0, 0.0, 0.0]);
    assert_eq!(d.rows, vec![vec![(0, 0.5)], vec![(0, -2.0), (1, 1e-3)], vec![(1, 4.0)]]);
    // no label column: a features party's file
    let (d, has, _) = crate::data::load_csv_with_ids(&p, "id", "y").unwrap();
    assert!(!has);
    assert_eq!(d.cols, 3);
    for (text, want) in [
        ("id,x\na,1\nb,x\n", "\"x\" is not a number"),
        ("id,x\na,1\na,2\n", "duplicate ID \"a\""),
        ("id,label\na,2\n", "label 2"),
        ("id,x\na,inf\n", "not finite"),
        ("key,x\na,1\n", "no column \"id\""),
    ] {
        std::fs::write(&p, text).unwrap();
        let e = crate::data::load_csv_with_ids(&p, "id", "label").unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
