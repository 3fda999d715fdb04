//! One fuzzing binary for every target: `HUSH_FUZZ_TARGET=<name>` picks
//! the target (see `targets::TARGETS`). Subcommands (without the fuzzer):
//! `hush-fuzz seeds DIR` writes seed corpora for every target into
//! `DIR/<target>/`; `hush-fuzz run TARGET FILE...` runs inputs once.

mod targets;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("seeds") {
        let dir = std::path::PathBuf::from(&args[2]);
        for t in targets::TARGETS {
            let d = dir.join(t);
            std::fs::create_dir_all(&d).unwrap();
            for (i, s) in targets::seeds(t).iter().enumerate() {
                std::fs::write(d.join(format!("seed{i}")), s).unwrap();
            }
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("run") {
        for f in &args[3..] {
            targets::run(&args[2], &std::fs::read(f).unwrap());
            println!("ok {f}");
        }
        return;
    }
    let name = std::env::var("HUSH_FUZZ_TARGET").expect("set HUSH_FUZZ_TARGET (see src/targets.rs)");
    assert!(targets::TARGETS.contains(&name.as_str()), "unknown target {name}");
    #[cfg(feature = "afl")]
    afl::fuzz!(|data: &[u8]| {
        targets::run(&name, data);
    });
    #[cfg(not(feature = "afl"))]
    {
        use std::io::Read;
        let mut d = Vec::new();
        std::io::stdin().read_to_end(&mut d).unwrap();
        targets::run(&name, &d);
    }
}
