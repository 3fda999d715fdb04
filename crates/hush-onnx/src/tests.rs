use super::proto::*;
use super::*;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn f32_tensor(name: &str, dims: &[i64], vals: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: Some(data_type::FLOAT),
        name: Some(name.into()),
        raw_data: Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(DimensionValue::DimValue(d)),
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

fn node(
    op: &str,
    name: &str,
    ins: &[&str],
    outs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(name.into()),
        op_type: Some(op.into()),
        attribute: attrs,
        domain: None,
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(attr_type::INTS),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(attr_type::INT),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, in_dims: &[i64], out: &str) -> Vec<u8> {
    let m = ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto {
            node: nodes,
            name: Some("t".into()),
            initializer: inits,
            input: vec![vi("x", in_dims)],
            output: vec![vi(out, &[1, 1])],
        }),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        metadata_props: Vec::new(),
    };
    m.encode_to_vec()
}

fn header(b: &[u8]) -> String {
    assert_eq!(&b[..8], MAGIC);
    let h = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
    String::from_utf8(b[12..12 + h].to_vec()).unwrap()
}

fn data(b: &[u8]) -> Vec<f32> {
    let h = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
    b[12 + h..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn unsupported_msg(r: Result<Vec<u8>>) -> String {
    match r {
        Err(Error::Unsupported(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The bundled MNIST model converts to exactly the committed `.hushm`
/// (written by the earlier Python importer): pins the Rust output.
#[test]
fn bundled_mnist_model_converts_to_the_committed_file() {
    let got = convert_file(&root().join("models/mnist_cnn.onnx")).unwrap();
    let want = std::fs::read(root().join("models/mnist_cnn.hushm")).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(
        got == want,
        "the conversion of models/mnist_cnn.onnx differs from models/mnist_cnn.hushm"
    );
}

#[test]
fn gemm_layout_alpha_beta_and_header() {
    // Gemm without transB: B is in×out and is transposed to out×in; alpha and beta applied.
    let b = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 3×2
    let m = model(
        vec![node(
            "Gemm",
            "fc",
            &["x", "B", "C"],
            &["y"],
            vec![AttributeProto {
                name: Some("alpha".into()),
                f: Some(0.5),
                r#type: Some(attr_type::FLOAT),
                ..Default::default()
            }],
        )],
        vec![
            f32_tensor("B", &[3, 2], &b),
            f32_tensor("C", &[2], &[0.25, -1.0]),
        ],
        &[1, 3],
        "y",
    );
    let out = convert(&m).unwrap();
    assert_eq!(
        header(&out),
        concat!(
            r#"{"format":"hush-model","version":1,"name":"t","input":{"name":"x","shape":[3]},"output":{"name":"y","shape":[2]},"#,
            r#""postprocess":"none","nodes":[{"op":"dense","name":"fc","inputs":["x"],"output":"y","weight":0,"bias":1,"shape":[2]}],"#,
            r#""tensors":[{"name":"fc.weight","shape":[2,3],"offset":0,"dtype":"f32"},{"name":"fc.bias","shape":[2],"offset":24,"dtype":"f32"}]}"#
        )
    );
    assert_eq!(data(&out), vec![0.5, 1.5, 2.5, 1.0, 2.0, 3.0, 0.25, -1.0]);
}

#[test]
fn batchnorm_folds_into_conv() {
    let w = [1.0f32, -2.0]; // 2 output channels, 1 input channel, 1×1
    let m = model(
        vec![
            node(
                "Conv",
                "conv",
                &["x", "w"],
                &["c"],
                vec![ints("kernel_shape", &[1, 1])],
            ),
            node(
                "BatchNormalization",
                "bn",
                &["c", "s", "b", "m", "v"],
                &["y"],
                vec![],
            ),
        ],
        vec![
            f32_tensor("w", &[2, 1, 1, 1], &w),
            f32_tensor("s", &[2], &[2.0, 3.0]),
            f32_tensor("b", &[2], &[0.5, 0.0]),
            f32_tensor("m", &[2], &[1.0, -1.0]),
            f32_tensor("v", &[2], &[4.0, 1.0]),
        ],
        &[1, 1, 2, 2],
        "y",
    );
    let out = convert(&m).unwrap();
    let h = header(&out);
    assert!(h.contains(r#""folded":["bn"]"#), "{h}");
    assert!(!h.contains("scale"), "{h}");
    let eps = 1e-5f64;
    let s0 = 2.0 / (4.0 + eps).sqrt();
    let s1 = 3.0 / (1.0 + eps).sqrt();
    let want = [
        (1.0 * s0) as f32,
        (-2.0 * s1) as f32,
        (0.5 - 1.0 * s0) as f32,
        (1.0 * s1) as f32,
    ];
    assert_eq!(data(&out), want);
}

#[test]
fn refusals_name_node_and_operator() {
    let m = model(
        vec![
            node("Relu", "relu", &["x"], &["r"], vec![]),
            node("Sigmoid", "my_sigmoid", &["r"], &["y"], vec![]),
        ],
        vec![],
        &[1, 4],
        "y",
    );
    let e = unsupported_msg(convert(&m));
    assert!(
        e.starts_with("node 'my_sigmoid' (operator Sigmoid): operator not supported"),
        "{e}"
    );
    let m = model(
        vec![node(
            "Conv",
            "grouped",
            &["x", "w"],
            &["y"],
            vec![ints("kernel_shape", &[1, 1]), int("group", 2)],
        )],
        vec![f32_tensor("w", &[2, 1, 1, 1], &[1.0, 1.0])],
        &[1, 2, 3, 3],
        "y",
    );
    let e = unsupported_msg(convert(&m));
    assert!(
        e.contains("'grouped' (operator Conv)") && e.contains("groups = 2"),
        "{e}"
    );
    // a string where a list of integers belongs
    let bad = AttributeProto {
        name: Some("strides".into()),
        s: Some(b"2".to_vec()),
        r#type: Some(attr_type::STRING),
        ..Default::default()
    };
    let m = model(
        vec![node(
            "MaxPool",
            "mp",
            &["x"],
            &["y"],
            vec![ints("kernel_shape", &[2, 2]), bad],
        )],
        vec![],
        &[1, 1, 4, 4],
        "y",
    );
    let e = unsupported_msg(convert(&m));
    assert!(
        e.contains("'mp' (operator MaxPool)") && e.contains("strides"),
        "{e}"
    );
    // an operand nobody produced
    let m = model(
        vec![node("Relu", "r", &["nothing"], &["y"], vec![])],
        vec![],
        &[1, 4],
        "y",
    );
    assert!(unsupported_msg(convert(&m)).contains("'nothing' is not produced"));
}

#[test]
fn malformed_and_oversized_inputs_are_errors() {
    assert!(matches!(
        convert(&b"\x08\x07garbage that is not a model".repeat(3)),
        Err(Error::Parse(_))
    ));
    assert!(matches!(convert(&[0xff; 64]), Err(Error::Parse(_))));
    // a tensor whose shape claims far more data than it holds: refused before any allocation
    let mut t = f32_tensor("w", &[1 << 40, 1 << 20], &[1.0]);
    let m = model(
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![t.clone()],
        &[1, 4],
        "y",
    );
    let e = unsupported_msg(convert(&m));
    assert!(
        e.contains("initializer 'w'") && e.contains("elements"),
        "{e}"
    );
    t.dims = vec![4, 4];
    let m = model(
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![t],
        &[1, 4],
        "y",
    );
    let e = unsupported_msg(convert(&m));
    assert!(
        e.contains("initializer 'w'") && e.contains("needs 16 values"),
        "{e}"
    );
    // a huge input shape
    let m = model(
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![],
        &[1, 1 << 30, 1 << 30],
        "y",
    );
    assert!(unsupported_msg(convert(&m)).contains("elements"));
    // external data
    let mut t = f32_tensor("w", &[1], &[1.0]);
    t.data_location = Some(1);
    let m = model(
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![t],
        &[1, 4],
        "y",
    );
    assert!(unsupported_msg(convert(&m)).contains("external"));
}

#[test]
fn names_are_escaped_to_ascii() {
    let m = model(
        vec![node("Relu", "r\u{e9}lu\"\u{1f600}", &["x"], &["y"], vec![])],
        vec![],
        &[1, 4],
        "y",
    );
    let h = header(&convert(&m).unwrap());
    assert!(h.is_ascii());
    assert!(h.contains(r#""name":"r\u00e9lu\"\ud83d\ude00""#), "{h}");
}

/// Mutated copies of the bundled model never panic: each is converted or refused.
#[test]
fn mutated_models_never_panic() {
    let base = std::fs::read(root().join("models/mnist_cnn.onnx")).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..3000 {
        let mut b = base.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        if next() % 8 == 0 {
            b.truncate((next() % b.len() as u64) as usize);
        }
        match std::panic::catch_unwind(|| convert(&b)) {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => panic!("the importer panicked on a mutated model"),
        }
    }
    assert!(ok > 0 && refused > 0, "ok {ok}, refused {refused}");
}

// ---- encoder import (hush embed) ---------------------------------------------------

fn meta(k: &str, v: &str) -> StringStringEntryProto {
    StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) }
}

/// A tiny valid encoder graph: hidden 4, 2 heads, FFN 6, one layer, vocab 5.
fn encoder_parts() -> (Vec<TensorProto>, Vec<StringStringEntryProto>, Vec<NodeProto>) {
    let (h, f, v, p) = (4usize, 6usize, 5usize, 8usize);
    let t = |name: &str, dims: &[usize]| {
        let n: usize = dims.iter().product();
        f32_tensor(name, &dims.iter().map(|&d| d as i64).collect::<Vec<_>>(), &(0..n).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect::<Vec<_>>())
    };
    let mut inits = vec![
        t("embeddings.word_embeddings.weight", &[v, h]),
        t("embeddings.position_embeddings.weight", &[p, h]),
        t("embeddings.token_type_embeddings.weight", &[2, h]),
        t("embeddings.LayerNorm.weight", &[h]),
        t("embeddings.LayerNorm.bias", &[h]),
    ];
    let l = "encoder.layer.0.";
    for (name, o, i) in [
        ("attention.self.query", h, h),
        ("attention.self.key", h, h),
        ("attention.self.value", h, h),
        ("attention.output.dense", h, h),
        ("intermediate.dense", f, h),
        ("output.dense", h, f),
    ] {
        inits.push(t(&format!("{l}{name}.weight"), &[o, i]));
        inits.push(t(&format!("{l}{name}.bias"), &[o]));
    }
    for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
        inits.push(t(&format!("{l}{name}.weight"), &[h]));
        inits.push(t(&format!("{l}{name}.bias"), &[h]));
    }
    let md = vec![meta("hush.encoder", "bert"), meta("num_attention_heads", "2"), meta("layer_norm_eps", "1e-12")];
    let nodes = vec![node("Gather", "g", &["embeddings.word_embeddings.weight", "ids"], &["e"], vec![]), node("Erf", "erf", &["e"], &["y"], vec![])];
    (inits, md, nodes)
}

fn encoder_bytes(inits: Vec<TensorProto>, md: Vec<StringStringEntryProto>, nodes: Vec<NodeProto>) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto { node: nodes, name: Some("enc".into()), initializer: inits, input: vec![], output: vec![] }),
        opset_import: vec![],
        metadata_props: md,
    }
    .encode_to_vec()
}

#[test]
fn encoder_imports_shapes_and_metadata() {
    let (i, m, n) = encoder_parts();
    let e = encoder::encoder_from_onnx(&encoder_bytes(i, m, n)).unwrap();
    assert_eq!((e.hidden, e.heads, e.ffn, e.vocab, e.max_pos, e.layers.len()), (4, 2, 6, 5, 8, 1));
    assert!(e.normalize && e.eps == 1e-12);
    assert_eq!(e.layers[0].ff2.n_in, 6);
}

/// Untrusted encoder files: every defect is an error naming what is wrong.
#[test]
fn encoder_refusals_name_the_tensor_key_or_operator() {
    let cases: Vec<(Box<dyn Fn(&mut Vec<TensorProto>, &mut Vec<StringStringEntryProto>, &mut Vec<NodeProto>)>, &str)> = vec![
        (Box::new(|_, m, _| m.retain(|e| e.key.as_deref() != Some("hush.encoder"))), "hush.encoder"),
        (Box::new(|_, m, _| m.retain(|e| e.key.as_deref() != Some("num_attention_heads"))), "num_attention_heads"),
        (Box::new(|_, m, _| m[1] = meta("num_attention_heads", "3")), "do not divide"),
        (Box::new(|_, m, _| m.push(meta("pooling", "cls"))), "mean pooling"),
        (Box::new(|i, _, _| i.retain(|t| t.name.as_deref() != Some("encoder.layer.0.attention.self.key.bias"))), "encoder.layer.0.attention.self.key.bias"),
        (Box::new(|i, _, _| i[0] = f32_tensor("embeddings.word_embeddings.weight", &[5, 4], &[0.0; 19])), "embeddings.word_embeddings.weight"),
        (Box::new(|i, _, _| { let n = i.iter().position(|t| t.name.as_deref() == Some("encoder.layer.0.output.dense.weight")).unwrap(); i[n] = f32_tensor("encoder.layer.0.output.dense.weight", &[4, 5], &[0.0; 20]); }), "encoder.layer.0.output.dense.weight"),
        (Box::new(|i, _, _| i[3] = f32_tensor("embeddings.LayerNorm.weight", &[4], &[1.0, f32::NAN, 1.0, 1.0])), "not finite"),
        (Box::new(|_, _, n| n.push(node("Conv", "c0", &["y"], &["z"], vec![]))), "operator Conv"),
        (Box::new(|_, _, n| n.retain(|x| x.op_type.as_deref() != Some("Erf"))), "Erf"),
    ];
    for (mutate, want) in cases {
        let (mut i, mut m, mut n) = encoder_parts();
        mutate(&mut i, &mut m, &mut n);
        let e = encoder::encoder_from_onnx(&encoder_bytes(i, m, n)).unwrap_err().to_string();
        assert!(e.contains(want), "want '{want}' in: {e}");
    }
    // truncated and garbage bytes
    let (i, m, n) = encoder_parts();
    let b = encoder_bytes(i, m, n);
    for cut in [1, b.len() / 3, b.len() - 1] {
        assert!(encoder::encoder_from_onnx(&b[..cut]).is_err());
    }
    // a CNN model is not an encoder
    let cnn = std::fs::read(root().join("models/mnist_cnn.onnx")).unwrap();
    assert!(encoder::encoder_from_onnx(&cnn).unwrap_err().to_string().contains("hush.encoder"));
}

#[test]
fn exporter_operators_on_client_values_and_constants() {
    use crate::eval::{eval_node, Tensor};
    let run = |op: &str, ins: &[&Tensor], attrs: Vec<AttributeProto>| {
        let names: Vec<String> = (0..ins.len()).map(|i| format!("x{i}")).collect();
        let n = node(op, op, &names.iter().map(|s| s.as_str()).collect::<Vec<_>>(), &["y"], attrs);
        eval_node(&n, &ins.iter().map(|t| Some(*t)).collect::<Vec<_>>()).map(|mut v| v.remove(0))
    };
    let a = Tensor::ints(vec![4], vec![0., 1., 2., 3.]);
    let two = Tensor::ints(vec![], vec![2.]);
    assert_eq!(run("GreaterOrEqual", &[&a, &two], vec![]).unwrap().v, vec![0., 0., 1., 1.]);
    assert_eq!(run("LessOrEqual", &[&a, &two], vec![]).unwrap().v, vec![1., 1., 1., 0.]);
    assert_eq!(run("Xor", &[&a, &two], vec![]).unwrap().v, vec![1., 0., 0., 0.]);
    let f = Tensor::new(vec![3], vec![f64::NAN, 1.0, f64::NEG_INFINITY]);
    assert_eq!(run("IsNaN", &[&f], vec![]).unwrap().v, vec![1., 0., 0.]);
    assert_eq!(run("IsInf", &[&f], vec![]).unwrap().v, vec![0., 0., 1.]);
    // GatherElements on axis 1 (torch.gather of the token-type buffer), negative index
    let d = Tensor::ints(vec![2, 3], vec![10., 11., 12., 20., 21., 22.]);
    let i = Tensor::ints(vec![2, 2], vec![2., 0., -1., 1.]);
    assert_eq!(run("GatherElements", &[&d, &i], vec![int("axis", 1)]).unwrap().v, vec![12., 10., 22., 21.]);
    let i = Tensor::ints(vec![1, 2], vec![0., 3.]);
    assert!(run("GatherElements", &[&d, &i], vec![int("axis", 1)]).unwrap_err().to_string().contains("outside"));
    let i = Tensor::ints(vec![3, 1], vec![0., 0., 0.]);
    assert!(run("GatherElements", &[&d, &i], vec![int("axis", 1)]).is_err());
    // CumSum (RoBERTa's and MPNet's position ids: cumsum(ids != pad) · mask + pad),
    // along either axis, exclusive and reversed; an axis outside the rank is refused
    let m = Tensor::ints(vec![2, 3], vec![1., 1., 0., 0., 1., 1.]);
    let ax1 = Tensor::ints(vec![], vec![1.]);
    assert_eq!(run("CumSum", &[&m, &ax1], vec![]).unwrap().v, vec![1., 2., 2., 0., 1., 2.]);
    assert_eq!(run("CumSum", &[&m, &Tensor::ints(vec![1], vec![0.])], vec![]).unwrap().v, vec![1., 1., 0., 1., 2., 1.]);
    assert_eq!(run("CumSum", &[&m, &ax1], vec![int("exclusive", 1)]).unwrap().v, vec![0., 1., 2., 0., 0., 1.]);
    assert_eq!(run("CumSum", &[&m, &ax1], vec![int("reverse", 1)]).unwrap().v, vec![2., 1., 0., 2., 2., 1.]);
    assert_eq!(run("CumSum", &[&m, &Tensor::ints(vec![], vec![-1.])], vec![int("exclusive", 1), int("reverse", 1)]).unwrap().v, vec![1., 0., 0., 2., 1., 0.]);
    assert!(run("CumSum", &[&m, &Tensor::ints(vec![], vec![2.])], vec![]).is_err());
    assert!(run("CumSum", &[&m, &Tensor::ints(vec![0], vec![])], vec![]).is_err());
    // Log in float32: T5/MPNet's bucket log(n/8)/log(16)·8 is exactly 2 at n = 16; the
    // exporter's float32 arithmetic decides which side it truncates to, so hush does too
    let l = run("Log", &[&Tensor::new(vec![3], vec![1.0, 2.0, 0.0])], vec![]).unwrap().v;
    assert_eq!((l[0], l[1] as f32, l[2]), (0.0, 2f32.ln(), f64::NEG_INFINITY));
    // int64's extremes (torch's "to the end") saturate; a huge step stops
    let big = Tensor::ints(vec![1], vec![9_223_372_036_854_775_807.0]);
    assert_eq!(big.as_ints().unwrap(), vec![i64::MAX]);
    assert!(Tensor::ints(vec![1], vec![1e19]).as_ints().is_err());
    let z = Tensor::ints(vec![1], vec![1.]);
    let s = run("Slice", &[&a, &z, &big, &Tensor::ints(vec![1], vec![0.]), &big], vec![]).unwrap();
    assert_eq!(s.v, vec![1.]);
    // non-finite values survive the JSON a public program travels in
    let j = serde_json::to_string(&f).unwrap();
    let back: Tensor = serde_json::from_str(&j).unwrap();
    assert!(back.v[0].is_nan() && back.v[1] == 1.0 && back.v[2] == f64::NEG_INFINITY, "{j}");
    assert!(serde_json::from_str::<Tensor>(r#"{"shape":[1],"v":["zero"],"int":false}"#).is_err());
}

/// A small attention head pair for the Q·Kᵀ bound: ids → embedding →
/// `norm` ("ln": LayerNormalization; "id": Identity) → Q and K projections
/// with biases → heads (Reshape [1, S, 2, D], Transpose) → Q·Kᵀ → /4.
/// `k_move`: "heads" (Kᵀ by Transpose [0, 2, 3, 1], the rows kept) or
/// "mixed" (a Reshape straight to [1, 2, D, S]: each line of the contracted
/// axis runs across two rows of K).
fn qk_model(norm: &str, k_move: &str, wq: &[f32], seed: u64) -> crate::proto::ModelProto {
    const S: usize = 16;
    const H: usize = 32;
    const D: usize = 16;
    const V: usize = 20;
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    let mut rnd = |n: usize, scale: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
            })
            .collect()
    };
    let i64s = |name: &str, v: &[i64]| TensorProto { dims: vec![v.len() as i64], data_type: Some(data_type::INT64), int64_data: v.to_vec(), name: Some(name.into()), ..Default::default() };
    let inits = vec![
        f32_tensor("emb", &[V as i64, H as i64], &rnd(V * H, 2.0)),
        f32_tensor("ln.g", &[H as i64], &rnd(H, 0.2).iter().map(|v| 1.0 + v).collect::<Vec<_>>()),
        f32_tensor("ln.b", &[H as i64], &rnd(H, 0.1)),
        f32_tensor("wq", &[H as i64, H as i64], wq),
        f32_tensor("bq", &[H as i64], &rnd(H, 0.1)),
        f32_tensor("wk", &[H as i64, H as i64], &rnd(H * H, 0.3)),
        f32_tensor("bk", &[H as i64], &rnd(H, 0.1)),
        f32_tensor("c4", &[], &[4.0]),
        i64s("heads", &[1, S as i64, 2, D as i64]),
        i64s("mixed", &[1, 2, D as i64, S as i64]),
    ];
    let mut nodes = vec![node("Gather", "g", &["emb", "ids"], &["e"], vec![])];
    nodes.push(match norm {
        "ln" => node("LayerNormalization", "ln", &["e", "ln.g", "ln.b"], &["l"], vec![int("axis", -1)]),
        _ => node("Identity", "id", &["e"], &["l"], vec![]),
    });
    nodes.extend([
        node("MatMul", "mq", &["l", "wq"], &["q0"], vec![]),
        node("Add", "aq", &["bq", "q0"], &["q1"], vec![]),
        node("Reshape", "rq", &["q1", "heads"], &["q2"], vec![]),
        node("Transpose", "tq", &["q2"], &["qh"], vec![ints("perm", &[0, 2, 1, 3])]),
        node("MatMul", "mk", &["l", "wk"], &["k0"], vec![]),
        node("Add", "ak", &["k0", "bk"], &["k1"], vec![]),
    ]);
    if k_move == "heads" {
        nodes.push(node("Reshape", "rk", &["k1", "heads"], &["k2"], vec![]));
        nodes.push(node("Transpose", "tk", &["k2"], &["kt"], vec![ints("perm", &[0, 2, 3, 1])]));
    } else {
        nodes.push(node("Reshape", "rk", &["k1", "mixed"], &["kt"], vec![]));
    }
    nodes.push(node("MatMul", "qk", &["qh", "kt"], &["s"], vec![]));
    nodes.push(node("Div", "sc", &["s", "c4"], &["y"], vec![]));
    let ids = ValueInfoProto {
        name: Some("ids".into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(data_type::INT64),
                shape: Some(TensorShapeProto { dim: [1, S as i64].iter().map(|&d| Dimension { value: Some(DimensionValue::DimValue(d)) }).collect() }),
            }),
        }),
    };
    ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto { node: nodes, name: Some("qk".into()), initializer: inits, input: vec![ids], output: vec![vi("y", &[1, 2, S as i64, S as i64])] }),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        metadata_props: vec![],
    }
}

/// The largest singular value by power iteration (from below).
fn sigma_by_power(w: &[f64], n_in: usize, n_out: usize) -> f64 {
    let mut v: Vec<f64> = (0..n_out).map(|j| 1.0 + (j as f64 * 0.37).sin()).collect();
    let mut s = 0.0;
    for _ in 0..500 {
        let u: Vec<f64> = (0..n_in).map(|i| (0..n_out).map(|j| w[i * n_out + j] * v[j]).sum()).collect();
        s = u.iter().map(|x| x * x).sum::<f64>().sqrt() / v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v = (0..n_out).map(|j| (0..n_in).map(|i| w[i * n_out + j] * u[i]).sum()).collect();
        let nv = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        v.iter_mut().for_each(|x| *x /= nv);
    }
    s
}

/// `graph::spectral_bound` is an upper bound on the largest singular
/// value (random matrices of both orientations, against power iteration)
/// and exact where the Gram matrix is diagonal (a scaled signed
/// permutation, a diagonal): a bound that were too small, or a loose one
/// on these, fails here.
#[test]
fn spectral_bound_is_at_least_the_largest_singular_value() {
    use crate::graph::spectral_bound;
    let mut s = 77u64;
    let mut r = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    for (n_in, n_out) in [(24, 24), (16, 40), (40, 16), (1, 7), (7, 1)] {
        let w: Vec<f64> = (0..n_in * n_out).map(|_| r()).collect();
        let (b, p) = (spectral_bound(&w, n_in, n_out), sigma_by_power(&w, n_in, n_out));
        assert!(b >= p * (1.0 - 1e-12), "{n_in}×{n_out}: bound {b} below σ ≈ {p}");
        assert!(b <= p * (n_in.min(n_out) as f64).sqrt() * 1.0001, "{n_in}×{n_out}: {b} vs {p}");
    }
    // 3·(a signed permutation): σ = 3 exactly; diag(3, −5, 2): σ = 5
    let n = 9;
    let w: Vec<f64> = (0..n * n).map(|t| if t % n == (t / n * 4 + 1) % n { if t % 2 == 0 { 3.0 } else { -3.0 } } else { 0.0 }).collect();
    assert!((spectral_bound(&w, n, n) - 3.0).abs() < 1e-12);
    let d = [3.0, 0.0, 0.0, 0.0, -5.0, 0.0, 0.0, 0.0, 2.0];
    assert!((spectral_bound(&d, 3, 3) - 5.0).abs() < 1e-12);
    assert_eq!(spectral_bound(&[], 0, 3), 0.0);
    // no weights (the client's copy of a program) is no bound, never 0
    assert_eq!(spectral_bound(&[], 3, 3), f64::INFINITY);
}

/// Q·Kᵀ gets the Cauchy–Schwarz bound (`graph`'s `matmul_bound`) only when
/// both operands' rows come from a LayerNorm through linear layers, their
/// biases and row-keeping moves: from an Identity on the embedding (no
/// LayerNorm) or through a Reshape that mixes K's rows it keeps k·|Q|·|K|.
/// The bound is sound: at least the ideal Cauchy–Schwarz bound with the
/// true σ(W) (power iteration), and above every score of the f64 graph on
/// random ids.
/// 32 × 32 pseudo-random weights in ±0.3 (xorshift from `seed`).
fn xorshift_weights(mut s: u64) -> Vec<f32> {
    (0..32 * 32)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * 0.3
        })
        .collect()
}

#[test]
fn qk_bound_uses_cauchy_schwarz_only_from_layernorm_rows() {
    use crate::eval::Tensor;
    use crate::graph::{GraphModel, Program, Step};
    use std::collections::HashMap;
    let wq = xorshift_weights(5);
    let shapes = HashMap::from([("ids".to_string(), vec![1usize, 16])]);
    let lower = |norm: &str, mv: &str| -> (GraphModel, Program) {
        let g = GraphModel::from_model(qk_model(norm, mv, &wq, 9)).unwrap();
        let p = g.instantiate(&shapes).unwrap();
        (g, p)
    };
    let qk = |p: &Program| {
        p.steps
            .iter()
            .find_map(|st| match st {
                Step::MatMul { out, a, b, k, .. } if p.slots[*out].name == "s" => Some((p.slots[*a].bound, p.slots[*b].bound, p.slots[*out].bound, *k)),
                _ => None,
            })
            .expect("the Q·Kᵀ MatMul")
    };
    let up = |x: f64| x.log2().ceil().exp2();
    // from the LayerNorm: the Cauchy–Schwarz bound, far below k·|Q|·|K|
    let (g, p) = lower("ln", "heads");
    let (ba, bb, bo, k) = qk(&p);
    assert_eq!(k, 16);
    assert!(bo * 8.0 <= up(k as f64 * ba * bb), "Cauchy–Schwarz {bo} vs general {}", up(k as f64 * ba * bb));
    // sound: the ideal bound (true σ, the float LayerNorm's row norm) is below it
    {
        let m = qk_model("ln", "heads", &wq, 9);
        let init = |n: &str| m.graph.as_ref().unwrap().initializer.iter().find(|x| x.name.as_deref() == Some(n)).map(|x| Tensor::from_proto(x).unwrap().v).unwrap();
        let (gam, bet) = (init("ln.g"), init("ln.b"));
        let l_ln = (32f64).sqrt() * gam.iter().fold(0.0f64, |a, v| a.max(v.abs())) + bet.iter().map(|v| v * v).sum::<f64>().sqrt();
        let lq = sigma_by_power(&init("wq"), 32, 32) * l_ln + init("bq").iter().map(|v| v * v).sum::<f64>().sqrt();
        let lk = sigma_by_power(&init("wk"), 32, 32) * l_ln + init("bk").iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!(bo >= lq * lk, "the bound {bo} is below the ideal Cauchy–Schwarz bound {}", lq * lk);
    }
    let mut worst = 0.0f64;
    for seed in 0..8u64 {
        let ids: Vec<f64> = (0..16).map(|t| ((t as u64 * 7 + seed * 13) % 20) as f64).collect();
        let y = g.eval_f64(&HashMap::from([("ids".to_string(), Tensor::ints(vec![1, 16], ids))])).unwrap();
        worst = worst.max(y[0].v.iter().fold(0.0f64, |a, v| a.max(v.abs())) * 4.0);
    }
    assert!(worst > 0.0 && worst <= bo, "f64 scores up to {worst}, bound {bo}");
    // no LayerNorm before the projections: the general bound
    let (_, p) = lower("id", "heads");
    let (ba, bb, bo, k) = qk(&p);
    assert_eq!(bo, up(k as f64 * ba * bb), "no LayerNorm rows: k·|Q|·|K|");
    // a reshape that mixes K's rows: the general bound
    let (_, p) = lower("ln", "mixed");
    let (ba, bb, bo, k) = qk(&p);
    assert_eq!(bo, up(k as f64 * ba * bb), "rows mixed by the move: k·|Q|·|K|");
}

/// A linear layer on a LayerNorm's rows takes the Cauchy–Schwarz bound per
/// output column, ‖x‖₂·‖w_j‖₂ (session 21), far below the ℓ1 bound
/// Σ_i |w_ij|·max|x|; sound (at least the ideal bound with the float
/// LayerNorm's row norm), and without a LayerNorm the ℓ1 bound stays.
#[test]
fn linear_bound_uses_cauchy_schwarz_from_layernorm_rows() {
    use crate::eval::Tensor;
    use crate::graph::{GraphModel, Program, Step};
    use std::collections::HashMap;
    let wq = xorshift_weights(11);
    let shapes = HashMap::from([("ids".to_string(), vec![1usize, 16])]);
    let q0 = |p: &Program| {
        p.steps
            .iter()
            .find_map(|st| match st {
                Step::Linear { out, x, w, n_in, n_out, .. } if p.slots[*out].name == "q0" => Some((p.slots[*x].bound, p.slots[*out].bound, w.clone(), *n_in, *n_out)),
                _ => None,
            })
            .expect("the Q projection")
    };
    let up = |x: f64| x.log2().ceil().exp2();
    let l1 = |w: &[f64], bx: f64, n_in: usize, n_out: usize| (0..n_out).map(|j| (0..n_in).map(|i| w[i * n_out + j].abs()).sum::<f64>() * bx).fold(0.0, f64::max);
    let col2 = |w: &[f64], n_in: usize, n_out: usize| (0..n_out).map(|j| (0..n_in).map(|i| w[i * n_out + j].powi(2)).sum::<f64>().sqrt()).fold(0.0, f64::max);
    let m = qk_model("ln", "heads", &wq, 9);
    let g = GraphModel::from_model(m.clone()).unwrap();
    let (bx, bq, w, n_in, n_out) = q0(&g.instantiate(&shapes).unwrap());
    let init = |n: &str| m.graph.as_ref().unwrap().initializer.iter().find(|x| x.name.as_deref() == Some(n)).map(|x| Tensor::from_proto(x).unwrap().v).unwrap();
    let (gam, bet) = (init("ln.g"), init("ln.b"));
    let l_ln = (n_in as f64).sqrt() * gam.iter().fold(0.0f64, |a, v| a.max(v.abs())) + bet.iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!(bq >= l_ln * col2(&w, n_in, n_out), "the bound {bq} is below the ideal Cauchy–Schwarz bound {}", l_ln * col2(&w, n_in, n_out));
    assert!(bq * 4.0 <= up(l1(&w, bx, n_in, n_out)), "Cauchy–Schwarz {bq} vs ℓ1 {}", up(l1(&w, bx, n_in, n_out)));
    // no LayerNorm: no row norm, the ℓ1 bound
    let g = GraphModel::from_model(qk_model("id", "heads", &wq, 9)).unwrap();
    let (bx, bq, w, n_in, n_out) = q0(&g.instantiate(&shapes).unwrap());
    assert_eq!(bq, up(l1(&w, bx, n_in, n_out)));
}
