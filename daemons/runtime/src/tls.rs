//! TLS server configuration for daemons that serve HTTPS (acmed, tokend's mTLS listener).
//!
//! The certificate chain and key are files the daemon reads at start (a
//! transport key, not a CA key: signd holds every key that signs PKI objects).
//! [`acceptor_requesting_client_certs`] also asks each client for a certificate
//! and lets any through: the handler sees the chain ([`crate::http::PeerCertificates`])
//! and decides what it is worth.

use std::path::Path;

use openssl::pkey::PKey;
use openssl::ssl::{AlpnError, SslAcceptor, SslAcceptorBuilder, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::X509;

/// ALPN protocols offered, most preferred first, in wire form (length-prefixed).
const ALPN_WIRE: &[u8] = b"\x02h2\x08http/1.1";

/// Builds a TLS 1.2+ acceptor (Mozilla "intermediate" settings) from a PEM
/// chain (leaf first) and a PEM private key, with ALPN for HTTP/2 and HTTP/1.1.
/// The error names the file at fault.
pub fn acceptor_from_files(chain_pem: &Path, key_pem: &Path) -> Result<SslAcceptor, String> {
    Ok(builder_from_files(chain_pem, key_pem)?.build())
}

/// Like [`acceptor_from_files`], and every handshake asks the client for a
/// certificate without requiring one, accepting any chain it sends (expired,
/// self-signed, from any CA): TLS only proves the client holds the leaf's
/// private key. What the chain is worth is the handler's decision; it reads
/// the chain from the request's [`crate::http::PeerCertificates`]. No CA
/// names are sent in the request (clients send the certificate they are
/// configured with). Sessions resume with the certificate they began with.
pub fn acceptor_requesting_client_certs(chain_pem: &Path, key_pem: &Path) -> Result<SslAcceptor, String> {
    let mut b = builder_from_files(chain_pem, key_pem)?;
    // Verification is the application's: accept whatever the client proves it holds.
    b.set_verify_callback(SslVerifyMode::PEER, |_, _| true);
    // OpenSSL refuses to resume a session of a verifying server without a context.
    b.set_session_id_context(b"signet-runtime-client-certs").map_err(|e| e.to_string())?;
    Ok(b.build())
}

fn builder_from_files(chain_pem: &Path, key_pem: &Path) -> Result<SslAcceptorBuilder, String> {
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
    Ok(b)
}
