//! TLS server configuration for daemons that serve HTTPS (acmed).
//!
//! The certificate chain and key are files the daemon reads at start (a
//! transport key, not a CA key: signd holds every key that signs PKI objects).

use std::path::Path;

use openssl::pkey::PKey;
use openssl::ssl::{AlpnError, SslAcceptor, SslMethod, SslVersion};
use openssl::x509::X509;

/// ALPN protocols offered, most preferred first, in wire form (length-prefixed).
const ALPN_WIRE: &[u8] = b"\x02h2\x08http/1.1";

/// Builds a TLS 1.2+ acceptor (Mozilla "intermediate" settings) from a PEM
/// chain (leaf first) and a PEM private key, with ALPN for HTTP/2 and HTTP/1.1.
/// The error names the file at fault.
pub fn acceptor_from_files(chain_pem: &Path, key_pem: &Path) -> Result<SslAcceptor, String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let chain = X509::stack_from_pem(&read(chain_pem)?).map_err(|e| format!("{}: {e}", chain_pem.display()))?;
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Err(format!("{}: no certificate", chain_pem.display()));
    };
    let key = PKey::private_key_from_pem(&read(key_pem)?).map_err(|e| format!("{}: {e}", key_pem.display()))?;
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(|e| e.to_string())?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(|e| e.to_string())?;
    b.set_certificate(leaf).map_err(|e| format!("{}: {e}", chain_pem.display()))?;
    for c in intermediates {
        b.add_extra_chain_cert(c.clone()).map_err(|e| format!("{}: {e}", chain_pem.display()))?;
    }
    b.set_private_key(&key).map_err(|e| format!("{}: {e}", key_pem.display()))?;
    b.check_private_key().map_err(|e| format!("{} does not match {}: {e}", key_pem.display(), chain_pem.display()))?;
    b.set_alpn_select_callback(|_, client| openssl::ssl::select_next_proto(ALPN_WIRE, client).ok_or(AlpnError::NOACK));
    Ok(b.build())
}
