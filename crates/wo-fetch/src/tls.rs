//! The TLS of every outgoing HTTPS connection (this crate's fetches and the providers'
//! calls): rustls with the *ring* provider, trusting Mozilla's roots as `webpki-roots`
//! bundles them — the same trust on every machine, whatever its system store holds, and no
//! C build beyond *ring*'s (reqwest's own rustls default brings aws-lc and the system store).

use std::sync::Arc;

/// A rustls client configuration for reqwest's `tls_backend_preconfigured`: TLS 1.2 and 1.3,
/// Mozilla's roots, no client certificate. reqwest uses a preconfigured configuration as it
/// is, so the ALPN list is set here: `h2` then `http/1.1` for a client built with HTTP/2,
/// else `http/1.1` alone (what reqwest offers on its own).
pub fn client_config(http2: bool) -> rustls::ClientConfig {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    // Only fails for a provider without TLS 1.2 or 1.3; ring has both.
    .expect("the ring provider supports TLS 1.2 and 1.3")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    config
}

#[cfg(test)]
mod tests {
    use super::client_config;

    #[test]
    fn offers_http2_only_when_asked_and_trusts_the_bundled_roots() {
        let h1 = client_config(false);
        assert_eq!(h1.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let h2 = client_config(true);
        assert_eq!(
            h2.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert!(!webpki_roots::TLS_SERVER_ROOTS.is_empty());
        // reqwest accepts it (an unrecognised preconfigured backend fails here).
        reqwest::Client::builder()
            .tls_backend_preconfigured(client_config(true))
            .build()
            .expect("reqwest takes the rustls configuration");
    }
}
