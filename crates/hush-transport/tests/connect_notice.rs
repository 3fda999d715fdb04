//! The connect notice hook: silent by default, called once per refused
//! connection attempt (not per retry), and the error after the connect
//! timeout is `ConnectRefused` naming the address.

use hush_transport::{ChannelOptions, Error, LinkSecurity, TcpChannel};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record(msg: &str) {
    SEEN.lock().unwrap().push(msg.to_string());
}

fn closed_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[test]
fn refused_connections_notice_once_then_fail_naming_the_address() {
    let opts = ChannelOptions { connect_timeout: Duration::from_millis(400), ..Default::default() };
    // default: silent (nothing recorded without a hook)
    let addr = closed_addr();
    let e = TcpChannel::connect_with(addr.as_str(), opts.clone(), &LinkSecurity::Insecure).err().expect("refused");
    assert!(SEEN.lock().unwrap().is_empty());
    assert!(matches!(e, Error::ConnectRefused { .. }), "{e}");

    hush_transport::set_connect_notice(record);
    let addr = closed_addr();
    let t = Instant::now();
    let e = TcpChannel::connect_with(addr.as_str(), opts.clone(), &LinkSecurity::Insecure).err().expect("refused");
    assert!(t.elapsed() >= Duration::from_millis(400), "{:?}", t.elapsed());
    assert_eq!(e.to_string(), format!("could not connect to {addr}: connection refused"));
    assert_eq!(*SEEN.lock().unwrap(), vec![format!("waiting for {addr}: connection refused, retrying… (for up to 0.4 s)")]);

    // the plain-stream variant (3PC hello) behaves alike
    let addr = closed_addr();
    let e = hush_transport::connect_retrying(&addr, &opts).err().expect("refused");
    assert_eq!(e.to_string(), format!("could not connect to {addr}: connection refused"));
    assert_eq!(SEEN.lock().unwrap().len(), 2);

    // a listener that appears while retrying is reached (after one notice)
    let addr = closed_addr();
    let a2 = addr.clone();
    let th = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let l = std::net::TcpListener::bind(&a2).unwrap();
        let _ = l.accept();
    });
    let slow = ChannelOptions { connect_timeout: Duration::from_secs(5), ..Default::default() };
    let s = hush_transport::connect_retrying(&addr, &slow).expect("connects once the peer listens");
    drop(s);
    th.join().unwrap();
    assert_eq!(SEEN.lock().unwrap().len(), 3);

    hush_transport::clear_connect_notice();
    let _ = hush_transport::connect_retrying(&closed_addr(), &opts);
    assert_eq!(SEEN.lock().unwrap().len(), 3);
}
