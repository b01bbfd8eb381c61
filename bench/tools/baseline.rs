//! A bare axum server that answers every request with "OK", or with a fixed body of BYTES bytes:
//! the yardsticks that `bench/wrk-verdict.sh` and `bench/wrk-trap.sh` compare quagmire against,
//! on the same runtime settings. The fixed body shows what sending a page of that size costs by
//! itself, whatever generates it.
//!
//! Usage: `baseline [ADDR] [BYTES]` (default 127.0.0.1:18429, "OK").

use axum::Router;
use axum::body::Bytes;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:18429".into());
    let body = match args.next().map(|bytes| bytes.parse::<usize>()) {
        Some(Ok(bytes)) => {
            // Page-like text, so that nothing along the way treats it specially.
            const LINE: &str = "<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n";
            Bytes::from(LINE.repeat(bytes.div_ceil(LINE.len()))[..bytes].to_string())
        }
        Some(Err(error)) => return Err(std::io::Error::other(format!("BYTES: {error}"))),
        None => Bytes::from_static(b"OK"),
    };
    let listener = tokio::net::TcpListener::bind(&address).await?;
    let router = Router::new().fallback(move || {
        let body = body.clone();
        async move { body }
    });
    axum::serve(listener, router).await
}
