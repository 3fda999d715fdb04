//! Dealing batches are fresh because the module says so, whatever the
//! hosts do: two dealers sharing one module never obtain the same values.

use hush_2pc::tami::{self, Flavor, TamiShape};
use hush_2pc::tee::Dealer;
use hush_tee::{InProcessModule, Module, ModuleRole, ModuleStats, Request, Response, TrustedModule};
use hush_transport::MemChannel;
use std::sync::{Arc, Mutex};

/// One module behind several host handles.
#[derive(Clone)]
struct Shared(Arc<Mutex<InProcessModule>>);

impl TrustedModule for Shared {
    fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
        self.0.lock().unwrap().call(req)
    }
    fn stats(&self) -> ModuleStats {
        self.0.lock().unwrap().stats()
    }
    fn describe(&self) -> String {
        "shared ".to_string() + &self.0.lock().unwrap().describe()
    }
}

fn established_pair() -> (Shared, Shared) {
    let (mut a, mut b) = MemChannel::pair();
    let h = std::thread::spawn(move || {
        let mut m = Shared(Arc::new(Mutex::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds())))));
        hush_tee::establish(&mut m, &mut a, ModuleRole::Sender).unwrap();
        m
    });
    let mut r = Shared(Arc::new(Mutex::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds())))));
    hush_tee::establish(&mut r, &mut b, ModuleRole::Receiver).unwrap();
    (h.join().unwrap(), r)
}

#[test]
fn two_dealers_sharing_a_module_never_get_the_same_values() {
    let (s, r) = established_pair();
    let shape = TamiShape::new(32, 4, 8, Flavor::Relu);
    for (party, m) in [(0u8, s), (1u8, r)] {
        let mut d1 = Dealer::new(Box::new(m.clone()));
        let mut d2 = Dealer::new(Box::new(m.clone()));
        for _ in 0..3 {
            tami::deal(&mut d1, party, 100, shape).unwrap();
        }
        // The second dealer starts at batch 0: the module refuses batches
        // 0, 1, 2 (already dealt) with a clear error, then deals batch 3.
        let mut refused = 0;
        loop {
            match tami::deal(&mut d2, party, 100, shape) {
                Ok(_) => break,
                Err(e) => {
                    assert!(e.to_string().contains("already dealt"), "{e}");
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, 3);
        // Compare the released shares byte for byte: every release distinct.
        let mut d3 = Dealer::new(Box::new(m.clone()));
        let mut releases = Vec::new();
        for batch in 0..8u64 {
            if let Ok(bytes) = d3.deal(hush_2pc::deal::tami::TamiTables::request(batch, 100, &shape)) {
                releases.push((batch, bytes));
            }
        }
        // Batches 0..=3 were taken; d3 gets 4..8 only.
        assert_eq!(releases.iter().map(|r| r.0).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        for i in 0..releases.len() {
            for j in 0..i {
                assert_ne!(releases[i].1, releases[j].1);
            }
        }
        // and d1 continuing is refused until it passes the others.
        assert!(d1.deal(hush_2pc::deal::tami::TamiTables::request(3, 100, &shape)).is_err());
    }
}
