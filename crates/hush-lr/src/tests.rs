use crate::cli::{run_pair, with_intercept};
use crate::data::{synthetic, Dataset};
use crate::secure::{load_model, reveal, save_model, ModelShares, Role, Session};
use crate::*;
use hush_transport::MemChannel;

fn cfg(sig: Sigmoid) -> TrainConfig {
    TrainConfig { epochs: 4, batch: 32, lr: 1.0, lr_decay: 0.0, l2: 0.0, sigmoid: sig, key_bits: 1024, order_seed: 3 }
}

fn open(ml: &ModelShares, mf: &ModelShares) -> (Vec<f64>, Vec<f64>) {
    let (ca, mut cb) = MemChannel::pair();
    let mf = mf.clone();
    let h = std::thread::spawn(move || reveal(&mut cb, &mf).unwrap());
    let mut ca = ca;
    let a = reveal(&mut ca, ml).unwrap();
    assert_eq!(h.join().unwrap(), a);
    a
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
    let m = ModelShares { role: Role::Features, own: vec![1, u64::MAX], peer: vec![7] };
    save_model(&p, &m, Some(&(vec![0.5], vec![1.0, -1.0]))).unwrap();
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
