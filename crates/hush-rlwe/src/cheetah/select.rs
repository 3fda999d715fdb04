//! **Row selection from the key owner's encrypted table** (an embedding
//! lookup where the reader knows its indices in the clear).
//!
//! The table T (`rows` × `width`, entries in Z_2^ℓ) belongs to the key owner
//! (in the graph runtime: the model server, whose word-embedding table is
//! part of its private model); the reader (the user, who tokenised its own
//! text) knows the row index id_q of each query q. The result is additive
//! shares of T\[id_q\] mod 2^ℓ: the owner gets T\[id_q\] − v_q, the reader v_q.
//!
//! This is the reverse of Cheetah's linear layer ([`super`]): there the
//! party with the secret key (the user) encrypts its input and the weight
//! owner computes on it, so a one-hot × table product costs the weight
//! owner one weight transform and product per (row block, channel block):
//! 366,336 products for BERT-base's 30,522 × 768 table at 128 tokens. Here
//! the table owner holds the key and encrypts its table **once per session**,
//! R = ⌊N / width⌋ rows per ciphertext, row i of ciphertext j at
//! coefficients \[i·width, (i + 1)·width); the reader's work per query is one
//! negacyclic rotation (multiplication by the monomial X^{−i·width}: no
//! transform, coefficient i·width + c moves to c for c < width, since
//! i·width + width ≤ N) and one fresh public-key encryption of zero. The
//! owner's upload is the table's size in ciphertexts (seeded: b only), the
//! reader's response one switched ciphertext per query with only its
//! first `width` coefficients of b (the layout of [`super::HeClient`]'s
//! responses). Two flights, owner → reader then reader → owner.
//!
//! **Views** (semi-honest, the same argument as the linear layer's with
//! the roles of the two keys' holders swapped):
//! * The reader sees ciphertexts under the owner's secret key (RLWE:
//!   pseudorandom, so nothing about T) and the owner's public key.
//! * The owner sees, per query, a response (a', b'\[0..width)) with
//!   a' = X^{−k}·a_j + a_0 and b' = X^{−k}·b_j + b_0 − encode(v) + f, where
//!   (b_0, a_0) is a fresh Enc_pk(0) = (u·b_pk + e_1, u·a_pk + e_2): a_0 is
//!   an RLWE sample with secret u, pseudorandom even to the holder of s,
//!   so a' hides (j, k). Decrypting gives phase Δ·(T\[id\] − v) + ε + f with
//!   v uniform in Z_2^ℓ (so T\[id\] − v is uniform) and ε = X^{−k}·e_j plus
//!   Enc_pk(0)'s noise. **The owner knows e_j** (it made the ciphertext), so
//!   ε would point at (j, k) without flooding: f is uniform on
//!   \[−2^F, 2^F) with F from [`super::budget`] for one input ciphertext,
//!   which bounds n·2^{ℓ−1}·22 + 21·(2N + 1) + 1 ≥ |ε| (|e_j| ≤ 21, a
//!   rotation permutes and negates coefficients, Enc_pk(0) adds at most
//!   21·(2N + 1)) times 2^κ: the statistical distance between the owner's
//!   view of ε + f for any two (j, k) is at most 2^{−κ} per coefficient.
//!   The modulus switch to 2^k is a public function of the flooded values.
//!   The test `select_flooding_hides_the_row_from_the_owner` measures this
//!   view with flooding off (it identifies the row) and on (it does not).
//! * Which rows are selected changes no length, no count and no order of
//!   messages; the reader does the same work for every query.
//!
//! A malicious reader could answer with any ciphertext of its choosing
//! (for example a sum of several rows); in the semi-honest model this
//! module serves, that is the reader choosing another input.

use super::*;

/// Rows of width `width` per ciphertext of degree `n` (None: a row is
/// wider than a ciphertext; callers use the linear layer instead).
pub fn rows_per_ct(n: usize, width: usize) -> Option<usize> {
    if width == 0 || width > n {
        None
    } else {
        Some(n / width)
    }
}

fn select_shape(ctx: &Context, rows: usize, width: usize) -> Result<(usize, usize)> {
    let r = rows_per_ct(ctx.n, width).ok_or_else(|| Error::Shape(format!("table rows of {width} entries: a selection needs 1..={} per row", ctx.n)))?;
    if rows == 0 {
        return Err(Error::Shape("an empty table".into()));
    }
    Ok((r, rows.div_ceil(r)))
}

/// The bytes of one selection: (owner → reader, reader → owner). Public,
/// from the table's shape and the number of queries.
pub fn select_bytes(ctx: &Context, cfg: &Config, rows: usize, width: usize, queries: usize) -> Result<(usize, usize)> {
    let (_, cts) = select_shape(ctx, rows, width)?;
    let bud = budget(ctx, cfg, 1)?;
    Ok((cts * bytes_up(ctx), queries * (bytes_down_fixed(ctx, cfg, bud.k) + bytes_down_needed(ctx, cfg, bud.k, width))))
}

/// The needed coefficients of query q's response: coefficient c of b holds
/// output q·width + c.
fn needed_of(q: usize, width: usize) -> Vec<(u32, u32)> {
    (0..width).map(|c| (c as u32, (q * width + c) as u32)).collect()
}

/// Multiplies a residue polynomial (coefficient form, prime-major) by the
/// monomial X^{−k} in Z_q\[X\]/(X^N + 1), 0 ≤ k < N.
fn rotate_down(ctx: &Context, x: &[u64], k: usize) -> Vec<u64> {
    let n = ctx.n;
    let mut out = vec![0u64; x.len()];
    for (i, &p) in ctx.primes().iter().enumerate() {
        let (src, dst) = (&x[i * n..(i + 1) * n], &mut out[i * n..(i + 1) * n]);
        dst[..n - k].copy_from_slice(&src[k..]);
        for (d, &s) in dst[n - k..].iter_mut().zip(&src[..k]) {
            *d = if s == 0 { 0 } else { p - s };
        }
    }
    out
}

/// The reader's response to query `q` from the owner's ciphertext `ct`
/// holding the row at coefficient `k`: X^{−k}·ct + Enc_pk(0), then masked,
/// flooded and switched ([`finish_response`]). Returns the bytes and the
/// reader's shares (output index, v).
#[allow(clippy::too_many_arguments)]
fn respond(
    ctx: &Context,
    cfg: &Config,
    bud: &Budget,
    sw: &crate::ring::Switcher,
    enc: &crate::ring::Encoder,
    flood: Option<&Flooder>,
    pk: &PublicKey,
    ct: &SeededCt,
    k: usize,
    q: usize,
    width: usize,
    prg: &mut Prg,
) -> (Vec<u8>, Vec<(u32, u64)>) {
    let mut b = rotate_down(ctx, &ct.b, k);
    let mut a = rotate_down(ctx, &ctx.uniform_from_seed(ct.seed), k);
    let (mut zb, za) = pk.encrypt_zero(ctx, prg);
    ctx.add_assign(&mut b, &zb);
    ctx.add_assign(&mut a, &za);
    zb.zeroize();
    let (mut down, mut shares) = (Vec::new(), Vec::with_capacity(width));
    finish_response(ctx, cfg, bud, sw, enc, flood, prg, &mut b, &a, &needed_of(q, width), &mut down, &mut shares);
    b.zeroize();
    (down, shares)
}

impl HeClient {
    /// Owner side of a selection: encrypts `table` (`rows` × `width`,
    /// row-major, entries in Z_2^ℓ) and returns its share T\[id_q\] − v_q of
    /// each of the reader's `queries` rows (`queries` × `width`).
    pub fn select_owner(&mut self, ch: &mut dyn Channel, rows: usize, width: usize, table: &[u64], queries: usize) -> Result<Vec<u64>> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let (per, cts) = select_shape(&ctx, rows, width)?;
        if table.len() != rows * width {
            return Err(Error::Shape(format!("a table of {} entries, the selection takes {rows} × {width}", table.len())));
        }
        let tm = if cfg.bits == 64 { u64::MAX } else { (1u64 << cfg.bits) - 1 };
        if table.iter().any(|&v| v & !tm != 0) {
            return Err(Error::Shape(format!("table entries outside Z_2^{}", cfg.bits)));
        }
        let bud = budget(&ctx, &cfg, 1)?;
        self.upload(ch, cts, |j| {
            let mut m = vec![0u64; ctx.n];
            for r in 0..per {
                let row = j * per + r;
                if row < rows {
                    m[r * width..(r + 1) * width].copy_from_slice(&table[row * width..(row + 1) * width]);
                }
            }
            m
        })?;
        let needed: Vec<Vec<(u32, u32)>> = (0..queries).map(|q| needed_of(q, width)).collect();
        let mut y = vec![0u64; queries * width];
        for qs in (0..queries).step_by(RESPONSE_BATCH_CTS).map(|q| q..(q + RESPONSE_BATCH_CTS).min(queries)) {
            self.response_batch(ch, &bud, &needed[qs], &mut y, None)?;
        }
        Ok(y)
    }
}

impl HeServer {
    /// Reader side of a selection: `ids` are the rows it selects (each
    /// below `rows`); returns its share v_q of each (`ids.len()` × `width`).
    pub fn select_reader(&mut self, ch: &mut dyn Channel, rows: usize, width: usize, ids: &[u32]) -> Result<Vec<u64>> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let (per, cts) = select_shape(&ctx, rows, width)?;
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= rows) {
            return Err(Error::Shape(format!("row {bad} selected from a table of {rows} rows")));
        }
        let bud = budget(&ctx, &cfg, 1)?;
        let bu = bytes_up(&ctx);
        // the owner's ciphertexts, kept only where a query points
        let mut wanted = vec![false; cts];
        for &id in ids {
            wanted[id as usize / per] = true;
        }
        let mut kept: Vec<Option<SeededCt>> = (0..cts).map(|_| None).collect();
        for batch in (0..cts).step_by(UPLOAD_BATCH_CTS).map(|c| c..(c + UPLOAD_BATCH_CTS).min(cts)) {
            let mut up = vec![0u8; batch.len() * bu];
            ch.recv_chunked_into("HE selection: the owner's table ciphertexts", &mut up)?;
            for (i, buf) in up.chunks(bu).enumerate() {
                let j = batch.start + i;
                if wanted[j] {
                    kept[j] = Some(SeededCt::read(&ctx, buf, "HE selection: a table ciphertext")?.0);
                }
            }
        }
        let flooder = Flooder::new(&ctx, &bud);
        let (sw, enc) = (ctx.switcher(bud.k), ctx.encoder(cfg.bits));
        let mut seed = self.prg.random_block();
        let mut v = vec![0u64; ids.len() * width];
        let (flood, pk, kept) = (self.flood, &self.pk, &kept);
        for qs in (0..ids.len()).step_by(RESPONSE_BATCH_CTS).map(|q| q..(q + RESPONSE_BATCH_CTS).min(ids.len())) {
            let parts: Vec<(Vec<u8>, Vec<(u32, u64)>)> = qs
                .into_par_iter()
                .map(|q| {
                    let id = ids[q] as usize;
                    let ct = kept[id / per].as_ref().expect("kept above");
                    let mut prg = Prg::with_nonce(seed, q as u64);
                    let fl = if flood { Some(&flooder) } else { None };
                    respond(&ctx, &cfg, &bud, &sw, &enc, fl, pk, ct, (id % per) * width, q, width, &mut prg)
                })
                .collect();
            let mut down = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
            for (bytes, shares) in parts {
                down.extend_from_slice(&bytes);
                for (o, s) in shares {
                    v[o as usize] = s;
                }
            }
            ch.send_chunked(&down)?;
        }
        seed.0.zeroize();
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hush_primitives::Block;
    use hush_transport::MemChannel;

    /// The owner's view of the noise of every revealed coefficient of the
    /// reader's responses (unswitched, the raw phase: the most it could
    /// get), for `reps` fresh responses to the same query (row at
    /// coefficient `k` of ciphertext `ct`), beside the owner's own noise
    /// e of that ciphertext rotated to the true position and to a wrong one.
    /// Returns the correlation z-scores (true, wrong).
    fn owner_view(flood: bool, reps: usize) -> (f64, f64) {
        let cfg = Config { bits: 16, flood_bits: 64, mod_switch: false, price: None };
        let ctx = Arc::new(Context::new(crate::Params::insecure_test_n256()).unwrap());
        let (mut co, mut cr) = MemChannel::pair();
        let ctx2 = ctx.clone();
        let h = std::thread::spawn(move || HeServer::setup(&mut cr, ctx2, cfg, Prg::new(Block(2))).map(|s| (s, cr)));
        let mut owner = HeClient::setup(&mut co, ctx.clone(), cfg, Prg::new(Block(1))).unwrap();
        let (reader, mut cr) = h.join().unwrap().unwrap();
        let (width, per) = (64usize, 4usize);
        let mut prg = Prg::new(Block(5));
        let m: Vec<u64> = (0..ctx.n).map(|_| prg.next_u64() & 0xffff).collect();
        let ct = owner.sk.encrypt(&ctx, cfg.bits, &m, &mut prg);
        // the owner's noise e = b + a·s − encode(m), centered
        let mut a = ctx.uniform_from_seed(ct.seed);
        ctx.ntt(&mut a);
        let mut as_ = ctx.mul(&a, &owner.sk.s_ntt);
        ctx.intt(&mut as_);
        let mut ph = ct.b.clone();
        ctx.add_assign(&mut ph, &as_);
        let em = ctx.encode(cfg.bits, &m);
        let e: Vec<u64> = (0..ph.len()).map(|i| crate::ring::sub_mod(ph[i], em[i], ctx.primes()[i / ctx.n])).collect();
        let e: Vec<i128> = (0..ctx.n).map(|j| ctx.crt2_centered(e[j], e[ctx.n + j])).collect();
        // e rotated down by k (negacyclic), first `width` coefficients
        let rot = |k: usize| -> Vec<i128> { (0..width).map(|c| if c + k < ctx.n { e[c + k] } else { -e[c + k - ctx.n] }).collect() };
        let (k_true, k_wrong) = (2 * width, width);
        let (et, ew) = (rot(k_true), rot(k_wrong));
        let bud = budget(&ctx, &cfg, 1).unwrap();
        let fl = Flooder::new(&ctx, &bud);
        let (sw, enc) = (ctx.switcher(bud.k), ctx.encoder(cfg.bits));
        let (mut st, mut sw2, mut vt, mut vw) = (0f64, 0f64, 0f64, 0f64);
        for r in 0..reps {
            let mut rp = Prg::new(Block(1000 + r as u128));
            let (down, _) = respond(&ctx, &cfg, &bud, &sw, &enc, if flood { Some(&fl) } else { None }, &reader.pk, &ct, k_true, 0, width, &mut rp);
            cr.send_chunked(&down).unwrap();
            let mut y = vec![0u64; width];
            let mut nv = Vec::new();
            owner.response_batch(&mut co, &bud, &[needed_of(0, width)], &mut y, Some(&mut nv)).unwrap();
            for c in 0..width {
                let v = nv[c] as f64;
                st += v * et[c] as f64;
                sw2 += v * ew[c] as f64;
                vt += v * v * (et[c] * et[c]) as f64;
                vw += v * v * (ew[c] * ew[c]) as f64;
            }
        }
        let _ = per;
        (st / vt.sqrt(), sw2 / vw.sqrt())
    }

    #[test]
    fn select_flooding_hides_the_row_from_the_owner() {
        // Without flooding, the owner (who knows its ciphertext's noise e)
        // finds the selected row: the response's noise correlates with e
        // rotated to the true position (z far above 0), not with a wrong
        // one. With flooding neither correlates (|z| within a few sd).
        let (zt, zw) = owner_view(false, 400);
        assert!(zt > 8.0, "without flooding the row must show (z = {zt:.1})");
        assert!(zw.abs() < 5.0, "a wrong position does not correlate (z = {zw:.1})");
        let (zt, zw) = owner_view(true, 400);
        assert!(zt.abs() < 5.0 && zw.abs() < 5.0, "flooded: no correlation (z = {zt:.1}, {zw:.1})");
    }
}
