//! A bare axum server that answers every request with "200 OK": the yardstick that
//! `bench/wrk-trap.sh` compares the trap listener against, on the same runtime settings.
//!
//! Usage: `baseline ADDR` (default 127.0.0.1:18429).

use axum::Router;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let address = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:18429".into());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    let router = Router::new().fallback(|| async { "OK" });
    axum::serve(listener, router).await
}
