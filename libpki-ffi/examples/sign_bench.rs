//! The Rust baseline for tests/c/bench.c: sequential `SigndClient::sign`
//! calls through `block_on` on a per-thread client, as libpki makes them,
//! timed per call.
//!
//! Usage: `sign_bench KEY N` (socket from `SIGNET_SIGND_SOCKET`).
#![forbid(unsafe_code)]

use std::time::Instant;

use signet_ipc::{block_on, SignatureScheme, SigndClient, DEFAULT_SOCKET};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(key), Some(n)) = (args.next(), args.next()) else {
        return Err("usage: sign_bench KEY N".into());
    };
    let n: u32 = n.parse()?;
    let socket = std::env::var("SIGNET_SIGND_SOCKET").unwrap_or_else(|_| DEFAULT_SOCKET.into());
    // The same per-thread connection libpki uses for C callers.
    let client = SigndClient::new(socket)?.per_thread();
    let msg = vec![0u8; 32];
    block_on(client.sign("", &key, SignatureScheme::Default, msg.clone()))?;
    let start = Instant::now();
    for _ in 0..n {
        block_on(client.sign("", &key, SignatureScheme::Default, msg.clone()))?;
    }
    let per_call = start.elapsed().as_secs_f64() / f64::from(n.max(1)) * 1e6;
    println!("rust sign_bench {key}: SigndClient::sign {per_call:.1} us/call ({n} calls)");
    Ok(())
}
